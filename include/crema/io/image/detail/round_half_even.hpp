#pragma once

#include <cmath>

namespace crema::detail {

// Python's round(): to the nearest, ties to even (the rounding mode's default).
[[nodiscard]] inline long round_half_even(double value) noexcept {
  return static_cast<long>(std::nearbyint(value));
}

}  // namespace crema::detail
