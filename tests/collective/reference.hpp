#pragma once

// Serial references for the reducer tests: a sum in a tree's order, written out plainly, and
// deterministic inputs.

#include <crema/collective/topology.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace crema::test {

// v(node) = own, then + v(child) for each child in order: the order the reducer promises.
template <class T>
T tree_order_sum(const tree_topology& tree, const std::vector<std::vector<T>>& buffers,
                 std::size_t node, std::size_t element) {
  T value = buffers[node][element];
  for (const std::size_t child : tree.children(node)) {
    value = value + tree_order_sum(tree, buffers, child, element);
  }
  return value;
}

// Values whose float sums depend on their order, so a wrong order shows.
inline std::vector<std::vector<float>> make_inputs(std::size_t participants, std::size_t size,
                                                   std::uint32_t seed) {
  std::vector<std::vector<float>> buffers(participants, std::vector<float>(size));
  std::uint32_t state = seed;
  for (auto& buffer : buffers) {
    for (auto& value : buffer) {
      state = state * 1664525U + 1013904223U;
      value = static_cast<float>(state >> 8) / static_cast<float>(1U << 24) * 2.0f - 1.0f;
      if ((state & 7U) == 0) value *= 1.0e4f;  // mixed magnitudes
    }
  }
  return buffers;
}

template <class T>
std::vector<std::span<T>> spans_of(std::vector<std::vector<T>>& buffers) {
  std::vector<std::span<T>> spans;
  for (auto& buffer : buffers) spans.emplace_back(buffer);
  return spans;
}

}  // namespace crema::test
