#pragma once

#include <crema/core/cuda/device.hpp>

#include <cstdio>

namespace crema::test {

/// True, after saying so in the line CTest reads as "skipped", where there is no CUDA device.
inline bool skip_without_cuda_device() {
  if (crema::cuda::device_count() > 0) return false;
  std::printf("crema-test-skip: no CUDA device (cudaGetDeviceCount failed or found none)\n");
  return true;
}

}  // namespace crema::test
