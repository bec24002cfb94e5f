// tree_collective and its traits: which types model the concept, and which say that their ranges
// must be reduced in one order everywhere.

#include <crema/collective/host/device_tree_reducer.hpp>
#include <crema/collective/tree_collective.hpp>

#include <doctest/doctest.h>

#include <cstddef>

namespace {

// The least a model offers, and whether its ranges come in order.
template <bool InOrder>
struct minimal_collective {
  using value_type = float;
  static constexpr bool ranges_in_order = InOrder;
  [[nodiscard]] std::size_t participants() const { return 1; }
  [[nodiscard]] std::size_t size() const { return 0; }
  void broadcast(std::size_t) {}
  void reduce(std::size_t, crema::reduction) {}
  void allreduce(crema::reduction) {}
  void reduce_range(std::size_t, std::size_t, std::size_t, crema::reduction) {}
};

// Everything but the range reduction that buckets need.
struct without_ranges {
  using value_type = float;
  [[nodiscard]] std::size_t participants() const { return 1; }
  [[nodiscard]] std::size_t size() const { return 0; }
  void broadcast(std::size_t) {}
  void reduce(std::size_t, crema::reduction) {}
  void allreduce(crema::reduction) {}
};

struct not_reducible {};
struct of_unreducible : minimal_collective<false> {
  using value_type = not_reducible;
};

}  // namespace

TEST_SUITE("tree_collective") {
  TEST_CASE(
      "the host model and a minimal one model the concept, and a type without range "
      "reduction or of elements that cannot be summed does not") {
    static_assert(crema::tree_collective<crema::device_tree_reducer<float>>);
    static_assert(crema::tree_collective<crema::device_tree_reducer<double>>);
    static_assert(crema::tree_collective<minimal_collective<false>>);
    static_assert(!crema::tree_collective<without_ranges>);
    static_assert(!crema::tree_collective<of_unreducible>);
    CHECK(crema::tree_collective<minimal_collective<true>>);
  }

  TEST_CASE("ranges_in_order_v is what a model says, and false where it says nothing") {
    static_assert(crema::ranges_in_order_v<minimal_collective<true>>);
    static_assert(!crema::ranges_in_order_v<minimal_collective<false>>);
    static_assert(!crema::ranges_in_order_v<crema::device_tree_reducer<float>>);
    static_assert(!crema::ranges_in_order_v<without_ranges>);
    CHECK_FALSE(crema::ranges_in_order_v<without_ranges>);
  }
}
