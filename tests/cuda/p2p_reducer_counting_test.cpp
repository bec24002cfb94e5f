// The peer-copy reducer (basic_cuda_p2p_reducer) whole, on up to eight devices of the counting
// CUDA runtime (counting_runtime.hpp) and without a GPU: its schedule, chunks, peer copies,
// stream waits and device switches are crema's own code; only the element-wise kernels are host
// loops, each checked to be launched as a GPU requires (on a stream of the current device). What
// a user relies on: the tree-order sum bit for bit in every buffer, averages, a root's reduce of
// a range that leaves everything else as it was, a broadcast, no call a GPU refuses for mixing
// devices, and after a refused copy an error naming the device and a reducer that still works.

#include <crema/collective/cuda/cuda_p2p_reducer.hpp>
#include <crema/collective/reduction.hpp>
#include <crema/collective/topology.hpp>
#include <crema/core/error.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>

#include "collective/reference.hpp"
#include "counting_runtime.hpp"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace counting = crema::test::counting_cuda;

std::atomic<std::uint64_t> misplaced_launches{0};

// The kernels as host loops: device memory is host memory on the counting runtime. A launch on
// a stream of another device than the current one is counted, as a GPU would refuse it.
struct host_elementwise {
  template <class T>
  static void add_into(cudaStream_t stream, T* accumulator, const T* addend, std::size_t count) {
    if (!counting::launchable_on(stream)) misplaced_launches.fetch_add(1);
    for (std::size_t i = 0; i < count; ++i) accumulator[i] = accumulator[i] + addend[i];
  }
  template <class T, class Scale>
  static void scale_into(cudaStream_t stream, T* data, std::size_t count, Scale scale) {
    if (!counting::launchable_on(stream)) misplaced_launches.fetch_add(1);
    for (std::size_t i = 0; i < count; ++i) data[i] = data[i] * scale;
  }
};

using reducer = crema::cuda::basic_cuda_p2p_reducer<float, host_elementwise>;

constexpr std::size_t elements = 101;

// Devices 0-3 and 4-7 as two peer islands, as the GPUs of two switches; participants are the
// first `participants` devices.
crema::tree_topology two_islands(std::size_t participants) {
  std::vector<int> ids(participants);
  std::iota(ids.begin(), ids.end(), 0);
  return crema::tree_topology::build(ids, [](int a, int b) { return (a < 4) == (b < 4); });
}

// One buffer of `elements` floats on each participant's device, filled from `inputs`.
class device_buffers {
 public:
  explicit device_buffers(const std::vector<std::vector<float>>& inputs) {
    for (std::size_t p = 0; p < inputs.size(); ++p) {
      memory_.emplace_back(static_cast<int>(p));
      spans_.emplace_back(static_cast<float*>(memory_.back().allocate(elements * sizeof(float))),
                          elements);
    }
    refill(inputs);
  }
  device_buffers(const device_buffers&) = delete;
  device_buffers& operator=(const device_buffers&) = delete;
  ~device_buffers() {
    for (std::size_t p = 0; p < spans_.size(); ++p) {
      memory_[p].deallocate(spans_[p].data(), elements * sizeof(float));
    }
  }

  void refill(const std::vector<std::vector<float>>& inputs) {
    for (std::size_t p = 0; p < spans_.size(); ++p) {
      std::memcpy(spans_[p].data(), inputs[p].data(), elements * sizeof(float));
    }
  }
  [[nodiscard]] const std::vector<crema::device_span<float>>& spans() const { return spans_; }
  [[nodiscard]] std::vector<float> values(std::size_t participant) const {
    const float* data = spans_[participant].data();
    return {data, data + elements};
  }

 private:
  std::vector<crema::cuda_device_resource> memory_;
  std::vector<crema::device_span<float>> spans_;
};

// Whether `value` has the bits of `expected`: the tree order promises the same bits.
bool same_bits(float value, float expected) {
  return std::memcmp(&value, &expected, sizeof(float)) == 0;
}

// Runs `check(participants, chunk)` for 1 to 8 participants, in chunks of 7 elements and in one.
template <class Check>
void for_every_shape(Check&& check) {
  const counting::devices_for_scope eight_devices(8);
  for (std::size_t participants = 1; participants <= 8; ++participants) {
    for (const std::size_t chunk : {std::size_t{7}, std::size_t{0}}) {
      CAPTURE(participants);
      CAPTURE(chunk);
      const std::uint64_t misplaced = counting::calls_across_devices();
      const std::uint64_t launches = misplaced_launches.load();
      check(participants, chunk);
      CHECK(counting::calls_across_devices() == misplaced);
      CHECK(misplaced_launches.load() == launches);
      CHECK(counting::current_device() == 0);
    }
  }
}

}  // namespace

TEST_SUITE("cuda_p2p_reducer, counted") {
  TEST_CASE("allreduce leaves the tree-order sum, or its average, in every device's buffer") {
    for_every_shape([](std::size_t participants, std::size_t chunk) {
      const crema::tree_topology tree = two_islands(participants);
      const auto inputs = crema::test::make_inputs(participants, elements, 5);
      for (const crema::reduction op : {crema::reduction::sum, crema::reduction::average}) {
        device_buffers buffers(inputs);
        reducer reduce(tree, buffers.spans(), chunk);
        reduce.allreduce(op);
        const float scale = crema::scale_for<float>(op, participants);
        for (std::size_t p = 0; p < participants; ++p) {
          const std::vector<float> got = buffers.values(p);
          for (std::size_t e = 0; e < elements; ++e) {
            float expected = crema::test::tree_order_sum(tree, inputs, tree.root(), e);
            if (op == crema::reduction::average) expected = expected * scale;
            REQUIRE(same_bits(got[e], expected));
          }
        }
      }
    });
  }

  TEST_CASE("reduce_range sums into the root's range only, and every other element stays") {
    for_every_shape([](std::size_t participants, std::size_t chunk) {
      const crema::tree_topology tree = two_islands(participants);
      const auto inputs = crema::test::make_inputs(participants, elements, 9);
      for (std::size_t root = 0; root < participants; ++root) {
        CAPTURE(root);
        device_buffers buffers(inputs);
        reducer reduce(tree, buffers.spans(), chunk);
        reduce.reduce_range(root, 10, 90);
        for (std::size_t p = 0; p < participants; ++p) {
          const std::vector<float> got = buffers.values(p);
          for (std::size_t e = 0; e < elements; ++e) {
            const bool summed = p == root && e >= 10 && e < 90;
            REQUIRE(
                same_bits(got[e], summed ? crema::test::tree_order_sum(tree, inputs, tree.root(), e)
                                         : inputs[p][e]));
          }
        }
      }
    });
  }

  TEST_CASE("broadcast copies the root's buffer into every other device's") {
    for_every_shape([](std::size_t participants, std::size_t chunk) {
      const crema::tree_topology tree = two_islands(participants);
      const auto inputs = crema::test::make_inputs(participants, elements, 3);
      const std::size_t root = participants - 1;
      device_buffers buffers(inputs);
      reducer reduce(tree, buffers.spans(), chunk);
      reduce.broadcast(root);
      for (std::size_t p = 0; p < participants; ++p) CHECK(buffers.values(p) == inputs[root]);
    });
  }

  TEST_CASE("a copy a device refuses is an error naming it, and the next operation works") {
    const counting::devices_for_scope four_devices(4);
    const crema::tree_topology tree = two_islands(4);
    const auto inputs = crema::test::make_inputs(4, elements, 21);
    device_buffers buffers(inputs);
    reducer reduce(tree, buffers.spans(), 7);
    counting::fail_call(counting::call::memcpy_async, 3, cudaErrorInvalidValue, false, 1);
    std::optional<std::string> error;
    try {
      reduce.allreduce();
    } catch (const crema::cuda_error& e) {
      error = e.what();
    }
    CHECK(counting::failed_calls() == 1);
    counting::heal();
    REQUIRE(error.has_value());
    CHECK(error->starts_with("cudaMemcpyPeerAsync("));
    CHECK(error->find("failed on device 1: cudaErrorInvalidValue") != std::string::npos);
    CHECK(counting::current_device() == 0);

    // The reducer is whole: from the same values again, the next allreduce gives the sum.
    buffers.refill(inputs);
    reduce.allreduce();
    for (std::size_t p = 0; p < 4; ++p) {
      const std::vector<float> got = buffers.values(p);
      for (std::size_t e = 0; e < elements; ++e) {
        REQUIRE(same_bits(got[e], crema::test::tree_order_sum(tree, inputs, tree.root(), e)));
      }
    }
  }
}
