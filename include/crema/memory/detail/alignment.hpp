#pragma once

#include <crema/core/error.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace crema::detail {

/// Refuses an alignment that is not a power of two, or larger than a resource can promise,
/// with an allocation_error naming the request and the side.
inline void check_alignment(std::size_t bytes, std::size_t alignment, std::size_t largest,
                            std::string_view side) {
  if (!std::has_single_bit(alignment)) {
    throw allocation_error(bytes, side,
                           crema::detail::format("alignment {} is not a power of two", alignment));
  }
  if (alignment > largest) {
    throw allocation_error(bytes, side,
                           crema::detail::format("alignment {} exceeds {}", alignment, largest));
  }
}

/// Allocates `bytes` aligned to `alignment` from an allocator that guarantees only `native`
/// alignment: asks `allocate(size)` for enough more to align the block and to keep the
/// allocator's own pointer just before it (`over_aligned_origin` finds it again). Requests that
/// `native` already covers pass through unchanged.
template <class Allocate>
[[nodiscard]] void* allocate_over_aligned(std::size_t bytes, std::size_t alignment,
                                          std::size_t native, std::string_view side,
                                          Allocate&& allocate) {
  if (alignment <= native) return allocate(bytes);
  const std::size_t extra = alignment + sizeof(void*);
  if (bytes > static_cast<std::size_t>(-1) - extra) {
    throw allocation_error(bytes, side,
                           crema::detail::format("{} more bytes to align it overflow", extra));
  }
  auto* origin = static_cast<std::byte*>(allocate(bytes + extra));
  const auto first = reinterpret_cast<std::uintptr_t>(origin) + sizeof(void*);
  auto* aligned = origin + (((first + alignment - 1) & ~(alignment - 1)) -
                            reinterpret_cast<std::uintptr_t>(origin));
  std::memcpy(aligned - sizeof(void*), &origin, sizeof origin);
  return aligned;
}

/// The allocator's own pointer behind a block `allocate_over_aligned` returned with the same
/// `alignment` and `native` (the block itself when no over-allocation was needed).
[[nodiscard]] inline void* over_aligned_origin(void* block, std::size_t alignment,
                                               std::size_t native) noexcept {
  if (block == nullptr || alignment <= native) return block;
  void* origin = nullptr;
  std::memcpy(&origin, static_cast<std::byte*>(block) - sizeof(void*), sizeof origin);
  return origin;
}

}  // namespace crema::detail
