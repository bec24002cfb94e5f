#pragma once

#include <crema/core/detail/cpu_features.hpp>

#include <atomic>

namespace crema::detail {

/// The instructions both passes run on: the best the processor has (checked once), or
/// lower where a test asks for it. Every kind computes the same bits.
enum class resample_isa { plain, avx2 };

[[nodiscard]] inline resample_isa best_resample_isa() noexcept {
#if defined(CREMA_X86_KERNELS)
  if (host_cpu().avx2) return resample_isa::avx2;
#endif
  return resample_isa::plain;
}

/// The ceiling itself, for tests that run each kind: thread-safe.
[[nodiscard]] inline std::atomic<resample_isa>& resample_rows() noexcept {
  static std::atomic<resample_isa> ceiling{best_resample_isa()};
  return ceiling;
}

}  // namespace crema::detail
