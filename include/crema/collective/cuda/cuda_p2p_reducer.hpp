#pragma once

#include <crema/collective/cuda/detail/peer_workspace.hpp>
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
#include <utility>
#include <vector>

namespace crema::cuda {

/// @brief The element-wise work of the peer-copy reducer, queued on a stream of the current
/// device: `E::add_into(stream, accumulator, addend, count)` makes
/// `accumulator[i] = accumulator[i] + addend[i]` and `E::scale_into(stream, data, count, scale)`
/// makes `data[i] = data[i] * scale`, for i < count, in device memory of the current device.
template <class E, class T>
concept p2p_elementwise = requires(cudaStream_t stream, T* data, const T* addend, std::size_t count,
                                   scale_type_t<T> scale) {
  E::add_into(stream, data, addend, count);
  E::scale_into(stream, data, count, scale);
};

/// @brief The CUDA peer-copy model of `tree_collective`: one device buffer per GPU, along a
/// `tree_topology` whose participant numbers are device ordinals; `cudaMemcpyPeerAsync` along the
/// tree's edges, an add kernel on the receiving device's stream, events between levels.
///
/// Sums are taken in the tree's order (each participant's own elements, then each child's subtree
/// sum in the children's order), the same bits as the host reducer gives. `allreduce` adds into
/// the participants' own buffers on the way up; `reduce` and `reduce_range` build subtree sums in
/// a partial buffer per device (one chunk), so the other participants' buffers stay as they were.
/// Edges the topology marks not direct are still copied by `cudaMemcpyPeerAsync`, which stages
/// through the host. Peer access is enabled where the devices allow it. Every operation blocks
/// until done; operations serialize on a mutex (they share the streams and staging buffers).
///
/// Host code: the kernels come from `Elementwise` (`p2p_elementwise`). `cuda_p2p_reducer<T>`
/// (`<crema/collective/cuda/cuda_p2p_reducer.cuh>`, compiled with nvcc) gives it Thrust's; an
/// engine built without nvcc can give it its own, and the tests give it host loops over the
/// counting CUDA runtime's emulated devices.
template <reducible T, p2p_elementwise<T> Elementwise>
class basic_cuda_p2p_reducer {
 public:
  using value_type = T;
  using scale_type = scale_type_t<T>;

  /// @param tree           participants numbered by device ordinal
  /// @param buffers        one device buffer per participant, on its device, all the same size
  /// @param chunk_elements elements per chunk: chunk c+1 goes up a level while chunk c is added
  ///                       at the next (0: one chunk)
  /// @throws crema::collective_error on a count or size mismatch; crema::allocation_error
  ///         naming the bytes and the device where a device refuses its two chunks;
  ///         crema::cuda_error on other CUDA failures (no device, for one). What was made before
  ///         a failure is freed.
  basic_cuda_p2p_reducer(tree_topology tree, std::vector<device_span<T>> buffers,
                         std::size_t chunk_elements = std::size_t{1} << 20)
      : tree_(std::move(tree)),
        buffers_(crema::detail::checked_buffers(name, std::move(buffers), tree_.size())),
        chunk_(chunk_elements),
        workspace_(tree_, std::min(this->chunk_elements(), buffers_[0].size())) {}
  basic_cuda_p2p_reducer(const basic_cuda_p2p_reducer&) = delete;
  basic_cuda_p2p_reducer& operator=(const basic_cuda_p2p_reducer&) = delete;

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
    workspace_.synchronize();
  }
  /// @brief Copies participant `root`'s buffer into every other participant's.
  void broadcast(std::size_t root) {
    crema::detail::check_participant(name, "broadcast", root, tree_.size());
    std::scoped_lock lock(mutex_);
    for (std::size_t i = 0; i < tree_.size(); ++i) {
      if (i == root) continue;
      scoped_device on(tree_.id(i));
      CREMA_CUDA_TRY(cudaMemcpyPeerAsync(buffers_[i].data(), tree_.id(i), buffers_[root].data(),
                                         tree_.id(root), buffers_[0].size_bytes(), stream(i)));
    }
    workspace_.synchronize();
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
    workspace_.synchronize();
  }

 private:
  static constexpr const char* name = "cuda_p2p_reducer";

  [[nodiscard]] std::size_t chunk_elements() const noexcept {
    return chunk_ != 0 ? chunk_ : std::max<std::size_t>(1, buffers_[0].size());
  }

  void allreduce_chunk(std::size_t offset, std::size_t count, reduction op) {
    const std::size_t bytes = count * sizeof(T);
    crema::detail::tree_allreduce_schedule(
        tree_,
        [&](std::size_t parent, std::size_t child) {
          scoped_device on(tree_.id(parent));
          wait_for(parent, child);
          CREMA_CUDA_TRY(cudaMemcpyPeerAsync(workspace_.staging(parent), tree_.id(parent),
                                             buffers_[child].data() + offset, tree_.id(child),
                                             bytes, stream(parent)));
          Elementwise::add_into(stream(parent), buffers_[parent].data() + offset,
                                workspace_.staging(parent), count);
        },
        [&](std::size_t root) {
          if (op != reduction::average) return;
          scoped_device on(tree_.id(root));
          const scale_type scale = scale_for<T>(op, tree_.size());
          Elementwise::scale_into(stream(root), buffers_[root].data() + offset, count, scale);
        },
        [&](std::size_t parent, std::size_t child) {
          scoped_device on(tree_.id(child));
          wait_for(child, parent);
          CREMA_CUDA_TRY(cudaMemcpyPeerAsync(buffers_[child].data() + offset, tree_.id(child),
                                             buffers_[parent].data() + offset, tree_.id(parent),
                                             bytes, stream(child)));
        });
  }

  // A participant's subtree sum over the chunk: its partial, or a leaf's own elements.
  [[nodiscard]] const T* subtree_sum(std::size_t node, std::size_t offset) const {
    return tree_.children(node).empty() ? buffers_[node].data() + offset : workspace_.partial(node);
  }

  void reduce_chunk(std::size_t root, std::size_t offset, std::size_t count, reduction op) {
    const std::size_t bytes = count * sizeof(T);
    crema::detail::tree_reduce_schedule(
        tree_,
        [&](std::size_t node) {
          scoped_device on(tree_.id(node));
          CREMA_CUDA_TRY(cudaMemcpyAsync(workspace_.partial(node), buffers_[node].data() + offset,
                                         bytes, cudaMemcpyDeviceToDevice, stream(node)));
        },
        [&](std::size_t parent, std::size_t child) {
          scoped_device on(tree_.id(parent));
          wait_for(parent, child);
          CREMA_CUDA_TRY(cudaMemcpyPeerAsync(workspace_.staging(parent), tree_.id(parent),
                                             subtree_sum(child, offset), tree_.id(child), bytes,
                                             stream(parent)));
          Elementwise::add_into(stream(parent), workspace_.partial(parent),
                                workspace_.staging(parent), count);
        });
    // The tree-order sum is the top's subtree sum: scaled on the top's device, then delivered.
    const std::size_t top = tree_.root();
    T* sum = tree_.children(top).empty() ? buffers_[top].data() + offset : workspace_.partial(top);
    {
      scoped_device on(tree_.id(top));
      if (op == reduction::average && tree_.size() > 1) {
        Elementwise::scale_into(stream(top), sum, count, scale_for<T>(op, tree_.size()));
      }
    }
    T* destination = buffers_[root].data() + offset;
    if (destination == sum) return;  // a lone participant: already in place
    scoped_device on(tree_.id(root));
    wait_for(root, top);
    CREMA_CUDA_TRY(
        cudaMemcpyPeerAsync(destination, tree_.id(root), sum, tree_.id(top), bytes, stream(root)));
  }

  [[nodiscard]] cudaStream_t stream(std::size_t participant) noexcept {
    return workspace_.stream(participant).native_handle();
  }

  // `waiter`'s stream waits for everything queued so far on `other`'s stream.
  void wait_for(std::size_t waiter, std::size_t other) {
    const cuda_event done = workspace_.stream(other).record();
    CREMA_CUDA_TRY(cudaStreamWaitEvent(stream(waiter), done.native_handle(), 0));
  }

  tree_topology tree_;
  std::vector<device_span<T>> buffers_;
  std::size_t chunk_;
  detail::peer_workspace<T> workspace_;  // per device: a stream, a staging and a partial chunk
  std::mutex mutex_;
};

}  // namespace crema::cuda
