#pragma once

// The records most pipeline tests read: the numbers 0 .. count - 1, in memory.

#include <crema/pipeline/vector_source.hpp>

#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace crema::test {

/// 0, 1, ..., count - 1: what one pass over `numbers(count)` holds.
inline std::vector<int> first_numbers(int count) {
  std::vector<int> values(static_cast<std::size_t>(count));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

/// A source of `first_numbers(count)`, keyed "vector:<name>".
inline vector_source<int> numbers(int count, std::string name = "numbers") {
  return vector_source<int>(first_numbers(count), std::move(name));
}

/// The transform that hands a record on as it is.
inline constexpr auto identity = [](const int& record) { return record; };

}  // namespace crema::test
