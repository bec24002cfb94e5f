#pragma once

#include <cstddef>

namespace crema {

/// @brief One record's dimensions: channels, height, width (a `device_batch`'s records, a
/// transform's output).
struct record_shape {
  std::size_t channels = 1;
  std::size_t height = 1;
  std::size_t width = 1;

  /// @return channels x height x width (saturating is not needed: a batch checks the product)
  [[nodiscard]] constexpr std::size_t elements() const noexcept {
    return channels * height * width;
  }
  friend constexpr bool operator==(const record_shape&, const record_shape&) = default;
};

}  // namespace crema
