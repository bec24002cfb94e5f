#pragma once

#include <crema/core/error.hpp>

#include <cuda_runtime_api.h>

#include <optional>
#include <string>

/// @file
/// Checking CUDA runtime calls: every failure becomes a `crema::cuda_error` that names the call,
/// the device, the CUDA error name and its description.

/// @brief Runs a CUDA runtime call and throws `crema::cuda_error` if it does not return
/// `cudaSuccess`. The message is "<call> failed on device <D>: <cudaErrorName>: <description>",
/// D the calling thread's current device (crema makes a call's device current before it), and
/// "<call> failed: ..." where there is none.
#define CREMA_CUDA_TRY(call) ::crema::detail::cuda_check((call), #call)
/// @brief As `CREMA_CUDA_TRY`, for a call on an object of device `device` (a stream, an event)
/// that may be made from a thread where another device is current: the message names `device`.
#define CREMA_CUDA_TRY_ON(device, call) ::crema::detail::cuda_check((call), #call, (device))

namespace crema::detail {

/// @return " on device D", D the calling thread's current device, for the message of a failed
/// call: on a node of GPUs, which one failed; "" where the runtime names none (no device, no
/// driver). Clears the error that asking may leave.
[[nodiscard]] inline std::string on_current_device() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  return crema::detail::format(" on device {}", device);
}

/// Throws `crema::cuda_error` for a failed `status`; `call` is the call's source text, made on
/// `device` (the current device where not given).
inline void cuda_check(cudaError_t status, const char* call, std::optional<int> device = {}) {
  if (status != cudaSuccess) [[unlikely]] {
    (void)cudaGetLastError();  // clear a non-sticky error so the next call starts clean
    fail_with_code<cuda_error>(
        static_cast<int>(status), "{} failed{}: {}: {}", call,
        device ? crema::detail::format(" on device {}", *device) : on_current_device(),
        cudaGetErrorName(status), cudaGetErrorString(status));
  }
}

/// @return whether the CUDA runtime fails every call on `probe`'s device for good: a "sticky"
/// error, as a kernel's fault leaves, which no call clears and only the process's end ends.
/// `probe` is an event of that device: its query fails, and fails again once the first error is
/// cleared (a failure of one call alone passes).
[[nodiscard]] inline bool cuda_failed_for_good(cudaEvent_t probe) noexcept {
  const auto failed = [](cudaError_t status) {
    return status != cudaSuccess && status != cudaErrorNotReady;
  };
  if (!failed(cudaEventQuery(probe))) return false;
  (void)cudaGetLastError();
  return failed(cudaEventQuery(probe));
}

}  // namespace crema::detail
