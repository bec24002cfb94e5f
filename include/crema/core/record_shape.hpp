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

// A length_error naming `who`'s `call` if record `i` is not in a batch of `capacity`.
inline void check_batch_index(const char* who, const char* call, std::size_t i,
                              std::size_t capacity) {
  if (i >= capacity) {
    fail<length_error>("{}::{}: record {} of a batch of {}", who, call, i, capacity);
  }
}

}  // namespace detail
}  // namespace crema
