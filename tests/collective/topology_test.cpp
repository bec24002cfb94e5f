#include <crema/collective/topology.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <numeric>
#include <set>
#include <vector>

namespace {

std::vector<int> first_ids(int count) {
  std::vector<int> ids(static_cast<std::size_t>(count));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// Every participant is reached from the root exactly once, and parent/children agree.
void check_is_tree(const crema::tree_topology& tree) {
  std::set<std::size_t> seen;
  for (const std::size_t node : tree.bottom_up()) {
    CHECK(seen.insert(node).second);
    for (const std::size_t child : tree.children(node)) {
      CHECK(tree.parent(child) == node);
      CHECK(seen.count(child) == 1);  // children come before their parent
      CHECK(tree.depth(child) == tree.depth(node) + 1);
    }
  }
  CHECK(seen.size() == tree.size());
  CHECK_FALSE(tree.parent(tree.root()).has_value());
  CHECK(tree.bottom_up().back() == tree.root());
}

}  // namespace

TEST_SUITE("tree_topology") {
  TEST_CASE("pairing builds a tree of logarithmic height for 1 to 16 participants") {
    for (int n = 1; n <= 16; ++n) {
      CAPTURE(n);
      const auto ids = first_ids(n);
      const auto tree = crema::tree_topology::build(ids, [](int, int) { return true; });
      CHECK(tree.size() == static_cast<std::size_t>(n));
      check_is_tree(tree);
      // Each level halves the subtrees (a leftover rides up): floor(log2 n) + 1 levels.
      CHECK(tree.height() == std::bit_width(static_cast<unsigned>(n)));
      for (std::size_t i = 0; i < tree.size(); ++i) CHECK(tree.direct(i));
    }
  }

  TEST_CASE("pairs, then pairs of pairs, as Caffe's P2PSync") {
    const auto ids = first_ids(8);
    const auto tree = crema::tree_topology::build(ids, [](int, int) { return true; });
    CHECK(tree.describe() == "0(1 2(3) 4(5 6(7)))");
  }

  TEST_CASE("an odd participant goes up unpaired instead of crashing") {
    const auto ids = first_ids(5);
    const auto tree = crema::tree_topology::build(ids, [](int, int) { return true; });
    check_is_tree(tree);
    CHECK(tree.describe() == "0(1 2(3) 4)");
  }

  TEST_CASE("two islands of four are joined through one non-direct edge") {
    const auto ids = first_ids(8);
    const auto same_island = [](int a, int b) { return (a < 4) == (b < 4); };
    const auto tree = crema::tree_topology::build(ids, same_island);
    check_is_tree(tree);
    std::size_t indirect = 0;
    for (std::size_t i = 0; i < tree.size(); ++i) {
      if (!tree.direct(i)) {
        ++indirect;
        CHECK(same_island(tree.id(i), tree.id(*tree.parent(i))) == false);
      } else if (tree.parent(i)) {
        CHECK(same_island(tree.id(i), tree.id(*tree.parent(i))));
      }
    }
    CHECK(indirect == 1);
  }

  TEST_CASE("isolated participants hang under the root with bounded degree") {
    const auto ids = first_ids(11);
    const auto tree = crema::tree_topology::build(ids, [](int a, int b) { return a == b; });
    check_is_tree(tree);
    for (std::size_t i = 0; i < tree.size(); ++i) {
      CHECK(tree.children(i).size() <= crema::tree_topology::fallback_degree);
    }
  }

  TEST_CASE("an asymmetric reach pairs only participants that reach each other both ways") {
    const auto ids = std::vector<int>{10, 11, 12, 13};
    // 10 reaches 11 but not back; 12 and 13 reach each other; 11 and 12 both ways.
    const auto reach = [](int a, int b) {
      if (a == 10 && b == 11) return true;
      if ((a == 12 && b == 13) || (a == 13 && b == 12)) return true;
      return (a == 11 && b == 12) || (a == 12 && b == 11);
    };
    const auto tree = crema::tree_topology::build(ids, reach);
    check_is_tree(tree);
    for (std::size_t i = 0; i < tree.size(); ++i) {
      if (tree.parent(i) && tree.direct(i)) {
        const int a = tree.id(i);
        const int b = tree.id(*tree.parent(i));
        CHECK((reach(a, b) && reach(b, a)));
      }
    }
  }

  TEST_CASE("a flat tree makes the first participant everyone's parent") {
    const auto ids = std::vector<int>{4, 5, 6};
    const auto tree = crema::tree_topology::flat(ids);
    check_is_tree(tree);
    CHECK(tree.describe() == "4(5 6)");
    CHECK(tree.height() == 2);
  }

  TEST_CASE("an empty list, a participant given twice or an index outside are collective_errors") {
    CHECK_THROWS_WITH_AS(static_cast<void>(crema::tree_topology::flat({})),
                         "tree_topology: no participants", crema::collective_error);
    const auto twice = std::vector<int>{0, 3, 1, 3};
    CHECK_THROWS_WITH_AS(
        static_cast<void>(crema::tree_topology::build(twice, [](int, int) { return true; })),
        "tree_topology: participant 3 appears twice", crema::collective_error);
    const auto tree = crema::tree_topology::flat(first_ids(2));
    CHECK_THROWS_WITH_AS((void)tree.children(2),
                         "tree_topology::children: participant 2 is outside a tree of 2",
                         crema::collective_error);
  }
}
