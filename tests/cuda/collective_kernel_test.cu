// Compiled and linked by nvcc in the cuda-compile preset: the peer-copy and NCCL reducers over
// every GPU of the machine. Runs only where there are devices.
#include <crema/collective/cuda/cuda_p2p_reducer.cuh>
#include <crema/collective/nccl/nccl_reducer.hpp>
#include <crema/memory/cuda/synced_buffer.hpp>

#include "common/cuda_skip.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <numeric>
#include <vector>

// Every member of both models of tree_collective compiles under nvcc.
template class crema::cuda::basic_cuda_p2p_reducer<float, crema::cuda::thrust_elementwise>;
template class crema::cuda::nccl_reducer<float>;

namespace {

// One 1000-element buffer per GPU of the machine, participant i's filled with i + 1, and their
// device spans (the device side is the newest).
struct one_buffer_per_gpu {
  std::vector<int> ids;
  std::vector<crema::cuda::synced_buffer<float>> buffers;
  std::vector<crema::device_span<float>> spans;

  one_buffer_per_gpu() : ids(static_cast<std::size_t>(crema::cuda::device_count())) {
    std::iota(ids.begin(), ids.end(), 0);
    for (const int device : ids) {
      crema::cuda::scoped_device on(device);
      buffers.emplace_back(1000, crema::host_pinned_resource{},
                           crema::cuda_device_resource(device));
      spans.emplace_back();
    }
    refill();
  }
  void refill() {
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      std::ranges::fill(buffers[i].mutable_host(), static_cast<float>(i + 1));
      spans[i] = buffers[i].mutable_device();  // uploads
    }
  }
};

}  // namespace

TEST_CASE("the peer-copy and NCCL reducers average one buffer per GPU") {
  if (crema::test::skip_without_cuda_device()) return;
  one_buffer_per_gpu gpus;
  const int devices = static_cast<int>(gpus.ids.size());
  auto& [ids, buffers, spans] = gpus;
  const auto tree = crema::tree_topology::build(ids, [](int a, int b) {
    int can = 0;
    return a == b || (cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess && can != 0);
  });
  crema::cuda::cuda_p2p_reducer<float> peer(tree, spans);
  peer.allreduce(crema::reduction::average);
  const float mean = static_cast<float>(devices + 1) / 2.0f;
  for (auto& buffer : buffers) {
    (void)buffer.mutable_device();  // the reducer wrote the device side
    CHECK(buffer.host()[999] == doctest::Approx(mean));
  }
  crema::cuda::nccl_reducer<float> nccl(ids, spans);
  nccl.allreduce(crema::reduction::sum);
  for (auto& buffer : buffers) {
    (void)buffer.mutable_device();
    CHECK(buffer.host()[0] == doctest::Approx(mean * static_cast<float>(devices)));
  }
}

TEST_CASE("the peer-copy and NCCL reducers reduce into one root and leave the others as they were") {
  if (crema::test::skip_without_cuda_device()) return;
  one_buffer_per_gpu gpus;
  const int devices = static_cast<int>(gpus.ids.size());
  auto& [ids, buffers, spans] = gpus;
  const auto refill = [&] { gpus.refill(); };
  const auto tree = crema::tree_topology::flat(ids);
  const std::size_t root = ids.size() - 1;
  const float sum = static_cast<float>(devices * (devices + 1)) / 2.0f;
  const auto check_root_only = [&](float first_half, float second_half) {
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      (void)buffers[i].mutable_device();
      const auto host = buffers[i].host();
      const float own = static_cast<float>(i + 1);
      CHECK(host[0] == doctest::Approx(i == root ? first_half : own));
      CHECK(host[999] == doctest::Approx(i == root ? second_half : own));
    }
  };
  crema::cuda::cuda_p2p_reducer<float> peer(tree, spans, 256);
  refill();
  peer.reduce(root, crema::reduction::sum);
  check_root_only(sum, sum);
  refill();
  peer.reduce_range(root, 0, 500, crema::reduction::average);
  check_root_only(sum / static_cast<float>(devices), static_cast<float>(root + 1));
  crema::cuda::nccl_reducer<float> nccl(ids, spans);
  refill();
  nccl.reduce_range(root, 500, 1000, crema::reduction::sum);
  check_root_only(static_cast<float>(root + 1), sum);
}

