#pragma once

#include <cstddef>
#include <optional>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace crema::detail {

// Sizes that users choose (counts in options, bucket sizes) are multiplied and added before
// anything is allocated; these say when that overflows instead of wrapping.

/// `a * b`, or nothing if it does not fit in a `std::size_t`.
[[nodiscard]] constexpr std::optional<std::size_t> checked_mul(std::size_t a,
                                                               std::size_t b) noexcept {
  std::size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

/// `a + b`, or nothing if it does not fit in a `std::size_t`.
[[nodiscard]] constexpr std::optional<std::size_t> checked_add(std::size_t a,
                                                               std::size_t b) noexcept {
  std::size_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

/// The bytes of physical memory of this machine, or nothing where the system does not say.
/// A request for more than this is a mistake in a count, not a memory shortage.
[[nodiscard]] inline std::optional<std::size_t> physical_memory_bytes() noexcept {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    return checked_mul(static_cast<std::size_t>(pages), static_cast<std::size_t>(page_size));
  }
#endif
  return std::nullopt;
}

}  // namespace crema::detail
