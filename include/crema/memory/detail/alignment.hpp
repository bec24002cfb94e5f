#pragma once

#include <crema/core/error.hpp>

#include <bit>
#include <cstddef>
#include <string_view>

namespace crema::detail {

/// Refuses an alignment that is not a power of two, or larger than a resource can promise,
/// with an allocation_error naming the request and the side.
inline void check_alignment(std::size_t bytes, std::size_t alignment, std::size_t largest,
                            std::string_view side) {
  if (!std::has_single_bit(alignment)) {
    throw allocation_error(bytes, side,
                           fmt::format("alignment {} is not a power of two", alignment));
  }
  if (alignment > largest) {
    throw allocation_error(bytes, side, fmt::format("alignment {} exceeds {}", alignment, largest));
  }
}

}  // namespace crema::detail
