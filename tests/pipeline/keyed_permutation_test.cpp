// keyed_permutation: the exact, O(1)-memory shuffle that every shuffling crema source uses.

#include <crema/pipeline/keyed_permutation.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

TEST_SUITE("keyed_permutation") {
  TEST_CASE("a keyed permutation is a bijection for every size, and keys choose it") {
    for (std::uint64_t size : {1ULL, 2ULL, 3ULL, 4ULL, 5ULL, 17ULL, 64ULL, 65ULL, 1000ULL,
                               4097ULL}) {
      CAPTURE(size);
      const crema::keyed_permutation permutation(size, 12345);
      std::vector<std::uint64_t> images;
      for (std::uint64_t i = 0; i < size; ++i) images.push_back(permutation(i));
      std::sort(images.begin(), images.end());
      std::vector<std::uint64_t> all(size);
      std::iota(all.begin(), all.end(), std::uint64_t{0});
      CHECK(images == all);
    }
    const crema::keyed_permutation one(1000, 1);
    const crema::keyed_permutation other(1000, 2);
    std::size_t moved = 0;
    std::size_t same = 0;
    for (std::uint64_t i = 0; i < 1000; ++i) {
      moved += one(i) != i ? 1 : 0;
      same += one(i) == other(i) ? 1 : 0;
    }
    CHECK(moved > 950);  // it does shuffle
    CHECK(same < 20);    // another key, another order
  }
}
