#include <crema/pipeline/generator_source.hpp>
#include <crema/pipeline/vector_source.hpp>

#include <doctest/doctest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

namespace {

template <class Source>
std::vector<int> read_pass(Source& source) {
  std::vector<int> seen;
  while (const int* record = source.next()) seen.push_back(*record);
  return seen;
}

crema::generator<int> up_to(int count) {
  for (int i = 0; i < count; ++i) co_yield i;
}

std::vector<int> range(int from, int to, int step = 1) {
  std::vector<int> values;
  for (int i = from; i < to; i += step) values.push_back(i);
  return values;
}

}  // namespace

TEST_SUITE("sources") {
  TEST_CASE_TEMPLATE("a source reads one pass, rewinds, shards and seeks", Source,
                     crema::vector_source<int>, crema::generator_source<int>) {
    auto source = [] {
      if constexpr (std::is_same_v<Source, crema::vector_source<int>>) {
        return Source(range(0, 10), "ten");
      } else {
        return Source([] { return up_to(10); }, "ten");
      }
    }();
    CHECK(read_pass(source) == range(0, 10));
    CHECK(source.next() == nullptr);  // the pass is over until rewound
    source.rewind();
    CHECK(read_pass(source) == range(0, 10));

    source.shard(1, 3);
    CHECK(read_pass(source) == std::vector<int>{1, 4, 7});
    source.shard(0, 3);
    CHECK(read_pass(source) == std::vector<int>{0, 3, 6, 9});

    source.shard(0, 1);
    (void)source.next();
    (void)source.next();
    (void)source.next();
    const auto saved = source.position();
    CHECK(saved == 3);
    source.rewind();
    source.seek(saved);
    CHECK(read_pass(source) == range(3, 10));
  }

  TEST_CASE("a shard outside its world is a config_error") {
    crema::vector_source<int> source(range(0, 4));
    CHECK_THROWS_WITH_AS(source.shard(3, 3), "source shard: rank 3 is outside a world of 3",
                         crema::config_error);
    CHECK_THROWS_WITH_AS(source.shard(0, 0), "source shard: world must be at least 1, got 0",
                         crema::config_error);
  }

  TEST_CASE("sources name their data for the registry") {
    CHECK(crema::vector_source<int>(range(0, 1), "train").key() == "vector:train");
    CHECK(crema::generator_source<int>([] { return up_to(1); }, "val").key() == "generator:val");
    CHECK(crema::vector_source<int>(range(0, 10)).size() == 10);
  }
}
