// The CUDA reducer's element-wise code and schedule, run on the CPU: Thrust built with g++ for
// its CPP device system, the same functions the device path calls with thrust::cuda::par.
#include <crema/collective/cuda/elementwise.cuh>
#include <crema/collective/detail/tree_schedule.hpp>
#include <crema/collective/topology.hpp>

#include "collective/reference.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace {

// Trees of 1 to 16 participants in two islands (0-7 and 8-15), as GPUs in two peer groups.
crema::tree_topology two_islands(std::size_t participants) {
  std::vector<int> ids(participants);
  std::iota(ids.begin(), ids.end(), 0);
  return crema::tree_topology::build(ids, [](int a, int b) { return (a < 8) == (b < 8); });
}

}  // namespace

TEST_SUITE("cuda reducer logic on the CPU") {
  TEST_CASE("add_into and scale_into compute element-wise sums and scalings") {
    std::vector<float> accumulator{1, 2, 3};
    const std::vector<float> addend{10, 20, 30};
    crema::cuda::detail::add_into(thrust::cpp::par, accumulator.data(), addend.data(), 3);
    CHECK(accumulator == std::vector<float>{11, 22, 33});
    crema::cuda::detail::scale_into(thrust::cpp::par, accumulator.data(), 3, 0.5f);
    CHECK(accumulator == std::vector<float>{5.5f, 11, 16.5f});
  }

  TEST_CASE("the peer-copy schedule gives the tree-order sum bit for bit on every participant") {
    for (std::size_t participants = 1; participants <= 16; ++participants) {
      CAPTURE(participants);
      const auto tree = two_islands(participants);
      auto buffers = crema::test::make_inputs(participants, 1009, 11);
      const auto inputs = buffers;
      std::vector<float> staging(1009);
      crema::detail::tree_allreduce_schedule(
          tree,
          [&](std::size_t parent, std::size_t child) {
            staging = buffers[child];  // the peer copy into the parent's staging buffer
            crema::cuda::detail::add_into(thrust::cpp::par, buffers[parent].data(), staging.data(),
                                          staging.size());
          },
          [&](std::size_t) {},
          [&](std::size_t parent, std::size_t child) { buffers[child] = buffers[parent]; });
      for (std::size_t i = 0; i < 1009; ++i) {
        const float expected = crema::test::tree_order_sum(tree, inputs, tree.root(), i);
        for (const auto& buffer : buffers) {
          REQUIRE(std::memcmp(&buffer[i], &expected, sizeof(float)) == 0);
        }
      }
    }
  }

  TEST_CASE(
      "the peer-copy reduce schedule gives the tree-order sum and leaves every buffer as it "
      "was") {
    for (std::size_t participants = 1; participants <= 16; ++participants) {
      CAPTURE(participants);
      const auto tree = two_islands(participants);
      const auto buffers = crema::test::make_inputs(participants, 1009, 13);
      std::vector<std::vector<float>> partial(participants, std::vector<float>(1009));
      std::vector<float> staging(1009);
      const auto subtree_sum = [&](std::size_t node) -> const std::vector<float>& {
        return tree.children(node).empty() ? buffers[node] : partial[node];
      };
      crema::detail::tree_reduce_schedule(
          tree, [&](std::size_t node) { partial[node] = buffers[node]; },
          [&](std::size_t parent, std::size_t child) {
            staging = subtree_sum(child);  // the peer copy into the parent's staging buffer
            crema::cuda::detail::add_into(thrust::cpp::par, partial[parent].data(), staging.data(),
                                          staging.size());
          });
      const auto& sum = subtree_sum(tree.root());
      for (std::size_t i = 0; i < 1009; ++i) {
        const float expected = crema::test::tree_order_sum(tree, buffers, tree.root(), i);
        REQUIRE(std::memcmp(&sum[i], &expected, sizeof(float)) == 0);
      }
      CHECK(buffers == crema::test::make_inputs(participants, 1009, 13));  // none was written
    }
  }
}
