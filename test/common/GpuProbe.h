#ifndef NEPTUNE_TEST_COMMON_GPU_PROBE_H
#define NEPTUNE_TEST_COMMON_GPU_PROBE_H
/** \file
 * Whether a usable CUDA device is present, found by opening the driver at run
 * time (a test linked against the toolkit's stub would fail to start instead). */
namespace neptune::testing {
bool cuda_device_present();
/** Device 0's compute capability as 10 * major + minor (90 for sm_90), or 0 without a device. */
int cuda_compute_capability();
}  // namespace neptune::testing
#endif
