#pragma once

#include <crema/collective/cuda/elementwise.cuh>
#include <crema/collective/detail/tree_schedule.hpp>
#include <crema/collective/reduction.hpp>
#include <crema/collective/topology.hpp>
#include <crema/collective/tree_collective.hpp>
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/error.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/device_span.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <vector>

namespace crema::cuda {

/// @brief The CUDA peer-copy model of `tree_collective`: one device buffer per GPU, along a
/// `tree_topology` whose participant numbers are device ordinals; `cudaMemcpyPeerAsync` along the
/// tree's edges, an add kernel (Thrust) on the receiving device's stream, events between levels.
///
/// Sums are taken in the tree's order (each participant's own elements, then each child's subtree
/// sum in the children's order), the same bits as the host reducer gives. `allreduce` adds into
/// the participants' own buffers on the way up; `reduce` and `reduce_range` build subtree sums in
/// a partial buffer per device (one chunk), so the other participants' buffers stay as they were.
/// Edges the topology marks not direct are still copied by `cudaMemcpyPeerAsync`, which stages
/// through the host. Peer access is enabled where the devices allow it. Every operation blocks
/// until done; operations serialize on a mutex (they share the streams and staging buffers).
/// Compiled with nvcc (`.cuh`); its schedules and element-wise code are tested on the CPU.
template <reducible T>
class cuda_p2p_reducer {
 public:
  using value_type = T;
  using scale_type = scale_type_t<T>;

  /// @param tree           participants numbered by device ordinal
  /// @param buffers        one device buffer per participant, on its device, all the same size
  /// @param chunk_elements elements per chunk: chunk c+1 goes up a level while chunk c is added
  ///                       at the next (0: one chunk)
  /// @throws crema::collective_error on a count or size mismatch; crema::cuda_error on CUDA
  ///         failures (no device, for one)
  cuda_p2p_reducer(tree_topology tree, std::vector<device_span<T>> buffers,
                   std::size_t chunk_elements = std::size_t{1} << 20)
      : tree_(std::move(tree)), buffers_(std::move(buffers)), chunk_(chunk_elements) {
    crema::detail::check_buffers(name, buffers_, tree_.size());
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      scoped_device on(tree_.id(i));
      streams_.emplace_back();
      for (auto* list : {&staging_, &partial_}) {
        void* chunk = nullptr;
        CREMA_CUDA_TRY(cudaMalloc(&chunk, std::max<std::size_t>(1, chunk_bytes())));
        list->push_back(static_cast<T*>(chunk));
      }
      if (const auto parent = tree_.parent(i)) enable_peer_access(tree_.id(i), tree_.id(*parent));
    }
  }
  cuda_p2p_reducer(const cuda_p2p_reducer&) = delete;
  cuda_p2p_reducer& operator=(const cuda_p2p_reducer&) = delete;
  ~cuda_p2p_reducer() {
    for (std::size_t i = 0; i < staging_.size(); ++i) {
      (void)cudaSetDevice(tree_.id(i));
      (void)cudaFree(staging_[i]);
      if (i < partial_.size()) (void)cudaFree(partial_[i]);
    }
  }

  /// @return the number of participants
  [[nodiscard]] std::size_t participants() const noexcept { return tree_.size(); }
  /// @return the number of elements in each buffer
  [[nodiscard]] std::size_t size() const noexcept { return buffers_[0].size(); }

  /// @brief Leaves the tree-order sum (times 1/N for `reduction::average`) in every buffer.
  /// Chunks are queued one after the other on per-device streams, so the levels of the tree work
  /// on different chunks at once.
  void allreduce(reduction op = reduction::sum) {
    std::scoped_lock lock(mutex_);
    const std::size_t total = buffers_[0].size();
    for (std::size_t offset = 0; offset < total; offset += chunk_elements()) {
      allreduce_chunk(offset, std::min(chunk_elements(), total - offset), op);
    }
    for (auto& stream : streams_) stream.synchronize();
  }
  /// @brief Copies participant `root`'s buffer into every other participant's.
  void broadcast(std::size_t root) {
    crema::detail::check_participant(name, "broadcast", root, tree_.size());
    std::scoped_lock lock(mutex_);
    for (std::size_t i = 0; i < tree_.size(); ++i) {
      if (i == root) continue;
      scoped_device on(tree_.id(i));
      CREMA_CUDA_TRY(cudaMemcpyPeerAsync(buffers_[i].data(), tree_.id(i), buffers_[root].data(),
                                         tree_.id(root), buffers_[0].size_bytes(),
                                         streams_[i].native_handle()));
    }
    for (auto& stream : streams_) stream.synchronize();
  }

  /// @brief Sums every participant's buffer into participant `root`'s (times 1/N for
  /// `reduction::average`); the others are left as they were.
  void reduce(std::size_t root, reduction op = reduction::sum) {
    reduce_range(root, 0, size(), op);
  }
  /// @brief `reduce` of elements [begin, end) only.
  /// @throws crema::collective_error if `root` is not a participant or the range is not within
  ///         the buffers
  void reduce_range(std::size_t root, std::size_t begin, std::size_t end,
                    reduction op = reduction::sum) {
    crema::detail::check_participant(name, "reduce_range", root, tree_.size());
    crema::detail::check_range(name, "reduce_range", begin, end, size());
    std::scoped_lock lock(mutex_);
    for (std::size_t offset = begin; offset < end; offset += chunk_elements()) {
      reduce_chunk(root, offset, std::min(chunk_elements(), end - offset), op);
    }
    for (auto& stream : streams_) stream.synchronize();
  }

 private:
  static constexpr const char* name = "cuda_p2p_reducer";

  [[nodiscard]] std::size_t chunk_elements() const noexcept {
    return chunk_ != 0 ? chunk_ : std::max<std::size_t>(1, buffers_[0].size());
  }
  [[nodiscard]] std::size_t chunk_bytes() const noexcept {
    return std::min(chunk_elements(), buffers_[0].size()) * sizeof(T);
  }

  void allreduce_chunk(std::size_t offset, std::size_t count, reduction op) {
    const std::size_t bytes = count * sizeof(T);
    crema::detail::tree_allreduce_schedule(
        tree_,
        [&](std::size_t parent, std::size_t child) {
          scoped_device on(tree_.id(parent));
          wait_for(parent, child);
          CREMA_CUDA_TRY(cudaMemcpyPeerAsync(staging_[parent], tree_.id(parent),
                                             buffers_[child].data() + offset, tree_.id(child),
                                             bytes, streams_[parent].native_handle()));
          detail::add_into(thrust::cuda::par.on(streams_[parent].native_handle()),
                           buffers_[parent].data() + offset, staging_[parent], count);
        },
        [&](std::size_t root) {
          if (op != reduction::average) return;
          scoped_device on(tree_.id(root));
          const scale_type scale = scale_for<T>(op, tree_.size());
          detail::scale_into(thrust::cuda::par.on(streams_[root].native_handle()),
                             buffers_[root].data() + offset, count, scale);
        },
        [&](std::size_t parent, std::size_t child) {
          scoped_device on(tree_.id(child));
          wait_for(child, parent);
          CREMA_CUDA_TRY(cudaMemcpyPeerAsync(buffers_[child].data() + offset, tree_.id(child),
                                             buffers_[parent].data() + offset, tree_.id(parent),
                                             bytes, streams_[child].native_handle()));
        });
  }

  // A participant's subtree sum over the chunk: its partial, or a leaf's own elements.
  [[nodiscard]] const T* subtree_sum(std::size_t node, std::size_t offset) const {
    return tree_.children(node).empty() ? buffers_[node].data() + offset : partial_[node];
  }

  void reduce_chunk(std::size_t root, std::size_t offset, std::size_t count, reduction op) {
    const std::size_t bytes = count * sizeof(T);
    crema::detail::tree_reduce_schedule(
        tree_,
        [&](std::size_t node) {
          scoped_device on(tree_.id(node));
          CREMA_CUDA_TRY(cudaMemcpyAsync(partial_[node], buffers_[node].data() + offset, bytes,
                                         cudaMemcpyDeviceToDevice, streams_[node].native_handle()));
        },
        [&](std::size_t parent, std::size_t child) {
          scoped_device on(tree_.id(parent));
          wait_for(parent, child);
          CREMA_CUDA_TRY(cudaMemcpyPeerAsync(staging_[parent], tree_.id(parent),
                                             subtree_sum(child, offset), tree_.id(child), bytes,
                                             streams_[parent].native_handle()));
          detail::add_into(thrust::cuda::par.on(streams_[parent].native_handle()), partial_[parent],
                           staging_[parent], count);
        });
    // The tree-order sum is the top's subtree sum: scaled on the top's device, then delivered.
    const std::size_t top = tree_.root();
    T* sum = tree_.children(top).empty() ? buffers_[top].data() + offset : partial_[top];
    {
      scoped_device on(tree_.id(top));
      if (op == reduction::average && tree_.size() > 1) {
        detail::scale_into(thrust::cuda::par.on(streams_[top].native_handle()), sum, count,
                           scale_for<T>(op, tree_.size()));
      }
    }
    T* destination = buffers_[root].data() + offset;
    if (destination == sum) return;  // a lone participant: already in place
    scoped_device on(tree_.id(root));
    wait_for(root, top);
    CREMA_CUDA_TRY(cudaMemcpyPeerAsync(destination, tree_.id(root), sum, tree_.id(top), bytes,
                                       streams_[root].native_handle()));
  }

  // `waiter`'s stream waits for everything queued so far on `other`'s stream.
  void wait_for(std::size_t waiter, std::size_t other) {
    const cuda_event done = streams_[other].record();
    CREMA_CUDA_TRY(cudaStreamWaitEvent(streams_[waiter].native_handle(), done.native_handle(), 0));
  }

  static void enable_peer_access(int device, int peer) {
    int can = 0;
    CREMA_CUDA_TRY(cudaDeviceCanAccessPeer(&can, device, peer));
    if (can == 0) return;  // copies are staged through the host
    for (const auto [from, to] : {std::pair{device, peer}, std::pair{peer, device}}) {
      scoped_device on(from);
      const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else {
        CREMA_CUDA_TRY(status);
      }
    }
  }

  tree_topology tree_;
  std::vector<device_span<T>> buffers_;
  std::vector<cuda_stream> streams_;
  std::vector<T*> staging_;  // per device: one chunk received from a child
  std::vector<T*> partial_;  // per device: one chunk of its subtree's sum (reduce)
  std::size_t chunk_;
  std::mutex mutex_;
};

static_assert(tree_collective<cuda_p2p_reducer<float>>);

}  // namespace crema::cuda
