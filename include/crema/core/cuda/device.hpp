#pragma once

#include <crema/core/cuda/cuda_try.hpp>

#include <cuda_runtime_api.h>

namespace crema::cuda {

/// @brief The number of CUDA devices this process can use; 0 where there are none.
///
/// Without a GPU (or without a driver) `cudaGetDeviceCount` returns an error rather than 0:
/// both mean "no device" here. Thread-safe, never throws, never allocates.
[[nodiscard]] inline int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

/// @brief The device the calling thread's CUDA calls go to.
/// @throws crema::cuda_error if there is no usable device
[[nodiscard]] inline int current_device() {
  int device = 0;
  CREMA_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

/// @brief Makes `device` current for the calling thread for the lifetime of the guard, then
/// restores the device that was current before. Not movable.
class scoped_device {
 public:
  /// @throws crema::cuda_error if `device` cannot be made current, naming `device` (after a
  /// fault there), not the one left current
  explicit scoped_device(int device) : previous_(current_device()) {
    if (device != previous_) {
      CREMA_CUDA_TRY_ON(device, cudaSetDevice(device));
      switched_ = true;
    }
  }
  scoped_device(const scoped_device&) = delete;
  scoped_device& operator=(const scoped_device&) = delete;
  ~scoped_device() {
    if (switched_) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_;
  bool switched_ = false;  // the common case, already on `device`, costs no call at all
};

}  // namespace crema::cuda
