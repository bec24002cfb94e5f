#include <crema/collective/host/device_tree_reducer.hpp>

#include "collective/reference.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

// Every member compiles.
template class crema::device_tree_reducer<float>;
template class crema::device_tree_reducer<double>;

namespace {

std::vector<int> first_ids(std::size_t count) {
  std::vector<int> ids(count);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

crema::tree_topology paired(std::size_t count) {
  return crema::tree_topology::build(first_ids(count), [](int, int) { return true; });
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// A type with + and scaling, and nothing else.
struct vec2 {
  float x = 0;
  float y = 0;
  friend vec2 operator+(vec2 a, vec2 b) { return {a.x + b.x, a.y + b.y}; }
  friend vec2 operator*(vec2 a, double s) {
    return {static_cast<float>(a.x * s), static_cast<float>(a.y * s)};
  }
  friend bool operator==(const vec2&, const vec2&) = default;
};

}  // namespace

TEST_SUITE("device_tree_reducer") {
  TEST_CASE("allreduce equals the tree-order sum bit for bit for 1 to 16 participants") {
    for (std::size_t participants = 1; participants <= 16; ++participants) {
      for (const std::size_t size : {0U, 1U, 1009U}) {
        for (const std::size_t block : {7U, 4096U}) {
          CAPTURE(participants);
          CAPTURE(size);
          CAPTURE(block);
          const auto tree = paired(participants);
          auto buffers = crema::test::make_inputs(participants, size, 42);
          const auto inputs = buffers;
          crema::device_tree_reducer<float> reducer(
              tree, crema::test::spans_of(buffers),
              std::make_shared<crema::host_threads>(1 + participants % 3), block);
          reducer.allreduce();
          for (std::size_t i = 0; i < size; ++i) {
            const float expected = crema::test::tree_order_sum(tree, inputs, tree.root(), i);
            for (std::size_t p = 0; p < participants; ++p)
              REQUIRE(same_bits(buffers[p][i], expected));
          }
        }
      }
    }
  }

  TEST_CASE("a large buffer gives the same bits chunked or not, with any thread count") {
    const std::size_t size = (std::size_t{1} << 20) + 3;
    for (const std::size_t participants : {2U, 5U, 16U}) {
      CAPTURE(participants);
      const auto tree = paired(participants);
      const auto inputs = crema::test::make_inputs(participants, size, 7);
      std::vector<float> first_result;
      for (const std::size_t threads : {1U, 3U}) {
        for (const std::size_t block :
             {std::size_t{1000}, size}) {  // chunked, and one block (unchunked)
          auto buffers = inputs;
          crema::device_tree_reducer<float> reducer(tree, crema::test::spans_of(buffers),
                                                    std::make_shared<crema::host_threads>(threads),
                                                    block);
          reducer.allreduce(crema::reduction::average);
          if (first_result.empty()) {
            first_result = buffers[0];
            for (std::size_t i = 0; i < size; i += 4099) {
              const float sum = crema::test::tree_order_sum(tree, inputs, tree.root(), i);
              REQUIRE(same_bits(first_result[i], sum * (1.0f / static_cast<float>(participants))));
            }
          }
          for (std::size_t p = 0; p < participants; ++p) {
            REQUIRE(std::memcmp(buffers[p].data(), first_result.data(), size * sizeof(float)) == 0);
          }
        }
      }
    }
  }

  TEST_CASE("the tree-order sum agrees with a left-to-right sum within rounding") {
    const std::size_t participants = 9;
    const auto tree = paired(participants);
    auto buffers = crema::test::make_inputs(participants, 5000, 3);
    const auto inputs = buffers;
    crema::device_tree_reducer<float> reducer(tree, crema::test::spans_of(buffers));
    reducer.allreduce();
    for (std::size_t i = 0; i < 5000; ++i) {
      double plain = 0;
      double magnitude = 0;
      for (const auto& input : inputs) {
        plain += static_cast<double>(input[i]);
        magnitude += std::abs(static_cast<double>(input[i]));
      }
      REQUIRE(std::abs(static_cast<double>(buffers[0][i]) - plain) <= 1e-6 * magnitude + 1e-30);
    }
  }

  TEST_CASE("reduce leaves the result at its root only, scaled by 1/N when asked") {
    const std::size_t participants = 6;
    const auto tree = paired(participants);
    auto buffers = crema::test::make_inputs(participants, 100, 5);
    const auto inputs = buffers;
    crema::device_tree_reducer<float> reducer(tree, crema::test::spans_of(buffers));
    reducer.reduce(3, crema::reduction::average);
    for (std::size_t i = 0; i < 100; ++i) {
      const float sum = crema::test::tree_order_sum(tree, inputs, tree.root(), i);
      CHECK(same_bits(buffers[3][i], sum * (1.0f / 6.0f)));
    }
    for (std::size_t p = 0; p < participants; ++p) {
      if (p != 3) CHECK(buffers[p] == inputs[p]);
    }
  }

  TEST_CASE("broadcast copies one participant's buffer into every other") {
    const std::size_t participants = 7;
    auto buffers = crema::test::make_inputs(participants, 333, 9);
    const auto inputs = buffers;
    crema::device_tree_reducer<float> reducer(paired(participants), crema::test::spans_of(buffers),
                                              std::make_shared<crema::host_threads>(2));
    reducer.broadcast(4);
    for (const auto& buffer : buffers) CHECK(buffer == inputs[4]);
  }

  TEST_CASE("double and a user type with + and scaling reduce too") {
    std::vector<std::vector<double>> doubles{{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}};
    crema::device_tree_reducer<double> reduce_doubles(paired(3), crema::test::spans_of(doubles));
    reduce_doubles.allreduce(crema::reduction::average);
    CHECK(doubles[2] == std::vector<double>{3.0, 4.0});

    std::vector<std::vector<vec2>> pairs{{{1, 2}}, {{3, 4}}};
    crema::device_tree_reducer<vec2> reduce_pairs(paired(2), crema::test::spans_of(pairs));
    reduce_pairs.allreduce();
    CHECK(pairs[1][0] == vec2{4, 6});
  }

  TEST_CASE("buffers of different sizes, a wrong count or a root outside are collective_errors") {
    std::vector<std::vector<float>> uneven{std::vector<float>(10), std::vector<float>(9)};
    CHECK_THROWS_WITH_AS(
        crema::device_tree_reducer<float>(paired(2), crema::test::spans_of(uneven)),
        "device_tree_reducer: participant 1 has 9 elements, participant 0 has 10",
        crema::collective_error);
    std::vector<std::vector<float>> three(3, std::vector<float>(4));
    CHECK_THROWS_WITH_AS(crema::device_tree_reducer<float>(paired(2), crema::test::spans_of(three)),
                         "device_tree_reducer: 3 buffers for 2 participants",
                         crema::collective_error);
    std::vector<std::vector<float>> two(2, std::vector<float>(4));
    crema::device_tree_reducer<float> reducer(paired(2), crema::test::spans_of(two));
    CHECK_THROWS_WITH_AS(reducer.reduce(2),
                         "device_tree_reducer::reduce: participant 2 is outside a tree of 2",
                         crema::collective_error);
    CHECK_THROWS_AS(reducer.broadcast(5), crema::collective_error);
  }
}
