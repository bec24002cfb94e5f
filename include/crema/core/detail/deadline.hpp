#pragma once

#include <crema/core/detail/chrono.hpp>

namespace crema::detail {

/// `now + timeout` on the steady clock, saturating at its end: a timeout of
/// `std::chrono::milliseconds::max()` means "for ever", not an overflow into the past (which is
/// what `condition_variable::wait_for` makes of it).
template <class Rep, class Period>
[[nodiscard]] std::chrono::steady_clock::time_point deadline_after(
    std::chrono::duration<Rep, Period> timeout) {
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  const auto left = clock::time_point::max() - now;
  if (timeout >= std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(left)) {
    return clock::time_point::max();
  }
  return now + std::chrono::ceil<clock::duration>(timeout);
}

}  // namespace crema::detail
