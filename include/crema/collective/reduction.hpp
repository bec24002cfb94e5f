#pragma once

#include <crema/core/error.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

/// @file
/// The vocabulary every collective of crema shares: what a reduction does with the sum, which
/// element types can be reduced, the 1/N factor, the checks of participants, buffers and ranges.
/// The concept every model offers is in `tree_collective.hpp`.

namespace crema {

/// @brief What a reduction does with the sum.
enum class reduction {
  sum,      ///< the sum over participants
  average,  ///< the sum times 1/N, folded into the pass that writes the result
};

/// @brief The factor type an element is scaled by: itself for floating point, double otherwise.
template <class T>
using scale_type_t = std::conditional_t<std::is_floating_point_v<T>, T, double>;

/// @brief An element type a reducer can sum and average: `a + b` and `a * scale`.
template <class T>
concept reducible = std::copyable<T> && std::default_initializable<T> &&
    requires(T a, T b, scale_type_t<T> scale) {
  { a + b } -> std::convertible_to<T>;
  { a* scale } -> std::convertible_to<T>;
};

/// @return the factor a reduction scales the sum by: 1, or 1/N for `reduction::average`
template <reducible T>
[[nodiscard]] constexpr scale_type_t<T> scale_for(reduction op, std::size_t participants) noexcept {
  return op == reduction::average ? scale_type_t<T>(1) / static_cast<scale_type_t<T>>(participants)
                                  : scale_type_t<T>(1);
}

namespace detail {

// Names the participant a call was given when it is not one of the collective's.
inline void check_participant(const char* collective, const char* call, std::size_t participant,
                              std::size_t participants) {
  if (participant >= participants) {
    fail<collective_error>("{}::{}: participant {} is outside a tree of {}", collective, call,
                           participant, participants);
  }
}

// Names the range a call was given when it is not within the buffers.
inline void check_range(const char* collective, const char* call, std::size_t begin,
                        std::size_t end, std::size_t size) {
  if (begin > end || end > size) {
    fail<collective_error>("{}::{}: elements [{}, {}) are not within the {} of each buffer",
                           collective, call, begin, end, size);
  }
}

// Every collective takes one buffer per participant, all of the same size and apart from each
// other (two participants on one buffer would sum it twice): says which is not.
template <class Buffers>
void check_buffers(const char* collective, const Buffers& buffers, std::size_t participants) {
  if (participants == 0) fail<collective_error>("{}: no participants", collective);
  if (buffers.size() != participants) {
    fail<collective_error>("{}: {} buffers for {} participants", collective, buffers.size(),
                           participants);
  }
  for (std::size_t i = 1; i < buffers.size(); ++i) {
    if (buffers[i].size() != buffers[0].size()) {
      fail<collective_error>("{}: participant {} has {} elements, participant 0 has {}", collective,
                             i, buffers[i].size(), buffers[0].size());
    }
  }
  if (buffers[0].size() == 0) return;
  // Sorted by address, each buffer must end before the next begins.
  std::vector<std::size_t> order(buffers.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto address = [&](std::size_t i) {
    return reinterpret_cast<std::uintptr_t>(buffers[i].data());
  };
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return address(a) < address(b); });
  const std::size_t bytes = buffers[0].size_bytes();
  for (std::size_t k = 1; k < order.size(); ++k) {
    if (address(order[k]) - address(order[k - 1]) < bytes) {
      fail<collective_error>("{}: the buffers of participants {} and {} overlap", collective,
                             std::min(order[k - 1], order[k]), std::max(order[k - 1], order[k]));
    }
  }
}

// `check_buffers`, for a constructor's initializer list: the buffers, once checked.
template <class Buffers>
[[nodiscard]] Buffers checked_buffers(const char* collective, Buffers buffers,
                                      std::size_t participants) {
  check_buffers(collective, buffers, participants);
  return buffers;
}

}  // namespace detail
}  // namespace crema
