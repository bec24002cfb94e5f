#pragma once

#include <crema/core/error.hpp>

#include <cuda_runtime_api.h>

/// @file
/// Checking CUDA runtime calls: every failure becomes a `crema::cuda_error` that names the call,
/// the CUDA error name and its description.

/// @brief Runs a CUDA runtime call and throws `crema::cuda_error` if it does not return
/// `cudaSuccess`. The message is "<call> failed: <cudaErrorName>: <description>".
#define CREMA_CUDA_TRY(call) ::crema::detail::cuda_check((call), #call)

namespace crema::detail {

/// Throws `crema::cuda_error` for a failed `status`; `call` is the call's source text.
inline void cuda_check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) [[unlikely]] {
    (void)cudaGetLastError();  // clear a non-sticky error so the next call starts clean
    fail_with_code<cuda_error>(static_cast<int>(status), "{} failed: {}: {}", call,
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
