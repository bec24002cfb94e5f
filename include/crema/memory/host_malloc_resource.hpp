#pragma once

#include <crema/core/error.hpp>
#include <crema/memory/detail/alignment.hpp>
#include <crema/memory/resource.hpp>

#include <cstddef>
#include <cstdlib>
#include <limits>
#include <string_view>

namespace crema {
namespace detail {

/// malloc for the usual alignments, aligned_alloc (whose size must be a multiple of the
/// alignment) past them. `side` only names the memory in the error.
[[nodiscard]] inline void* aligned_malloc(std::size_t bytes, std::size_t alignment,
                                          std::string_view side) {
  check_alignment(bytes, alignment, std::numeric_limits<std::size_t>::max(), side);
  // No object may be larger than PTRDIFF_MAX bytes; refusing here also keeps sanitizer
  // allocators, which do not all check, from handing out a pointer for it.
  constexpr auto largest = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  void* pointer = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    if (bytes <= largest) pointer = std::malloc(bytes == 0 ? 1 : bytes);
  } else if (bytes <= largest - alignment) {
    pointer = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  }
  if (pointer == nullptr) throw allocation_error(bytes, side);
  return pointer;
}

}  // namespace detail

/// @brief Host memory from `std::malloc` (`std::aligned_alloc` past `alignof(std::max_align_t)`).
///
/// Stateless; every copy is interchangeable. `allocate` is thread-safe, may block in the C
/// library, and throws `crema::allocation_error` naming the bytes when malloc fails;
/// `deallocate` is thread-safe and never throws.
class host_malloc_resource {
 public:
  /// @brief `bytes` bytes aligned to `alignment`.
  /// @throws crema::allocation_error if the C library has no memory to give
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = alignof(std::max_align_t)) const {
    return detail::aligned_malloc(bytes, alignment, "host");
  }
  /// @brief Frees what `allocate` returned.
  void deallocate(void* pointer, std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = alignof(std::max_align_t)) const noexcept {
    std::free(pointer);
  }
  friend bool operator==(const host_malloc_resource&, const host_malloc_resource&) = default;
};

static_assert(host_resource<host_malloc_resource>);

}  // namespace crema
