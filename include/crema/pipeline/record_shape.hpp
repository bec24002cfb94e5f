#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/error.hpp>

#include <cstddef>
#include <optional>

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

namespace detail {

// The elements of `batch_size` records of `shape`; a length_error naming `who` if they overflow.
inline std::size_t batch_elements(const char* who, std::size_t batch_size, record_shape shape) {
  const auto per_record = checked_mul(shape.channels, shape.height);
  const auto record = per_record ? checked_mul(*per_record, shape.width) : std::nullopt;
  const auto all = record ? checked_mul(*record, batch_size) : std::nullopt;
  if (!all) {
    fail<length_error>("{}: {} records of {} x {} x {} elements overflow", who, batch_size,
                       shape.channels, shape.height, shape.width);
  }
  return *all;
}

}  // namespace detail
}  // namespace crema
