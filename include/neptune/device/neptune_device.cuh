#ifndef NEPTUNE_DEVICE_NEPTUNE_DEVICE_CUH
#define NEPTUNE_DEVICE_NEPTUNE_DEVICE_CUH
/** \file
 * The header-only CUDA device library that Neptune's emitted kernels call (namespace
 * neptune::device): shared tiles and cp.async loads, mma.sync m16n8k16 on warp register tiles,
 * elementwise maps and row reductions, masked stores, warp-rows tiles for CUDA-core work. Emitted code includes only this header; it
 * includes nothing outside the library, so NVRTC compiles it from in-memory headers alone: pass
 * every .cuh of this folder to nvrtcCreateProgram under its include name "neptune/device/<file>".
 *
 * Requirements: C++17, sm_80 or newer; the Hopper instructions (hopper.cuh: TMA, mbarriers, wgmma)
 * exist only when compiling for sm_90a. Element types are the storage structs f16 and bf16. */
#include "neptune/device/copy.cuh"
#include "neptune/device/hopper.cuh"
#include "neptune/device/mma.cuh"
#include "neptune/device/row_strip.cuh"
#include "neptune/device/store.cuh"
#include "neptune/device/tile.cuh"
#include "neptune/device/types.cuh"
#include "neptune/device/warp_rows.cuh"

#endif
