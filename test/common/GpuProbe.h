#ifndef NEPTUNE_TEST_COMMON_GPU_PROBE_H
#define NEPTUNE_TEST_COMMON_GPU_PROBE_H
/** \file
 * Whether a usable CUDA device is present, found by opening the driver at run
 * time (a test linked against the toolkit's stub would fail to start instead). */
namespace neptune::testing {
bool cuda_device_present();
}
#endif
