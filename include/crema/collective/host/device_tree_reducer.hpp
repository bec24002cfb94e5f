#pragma once

#include <crema/collective/detail/elementwise.hpp>
#include <crema/collective/reduction.hpp>
#include <crema/collective/topology.hpp>
#include <crema/collective/tree_collective.hpp>
#include <crema/core/detail/checked.hpp>
#include <crema/core/error.hpp>
#include <crema/core/host_threads.hpp>

#include <algorithm>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace crema {

namespace detail {

// Tree-ordered sums over element ranges, with one scratch block per tree level: v(p) is p's own
// elements, then plus v(child) for each child in order. The same order for every range, every
// run, whoever computes it: the result is the tree's, bit for bit.
template <class T>
class tree_sum {
 public:
  tree_sum(const tree_topology& tree, std::size_t block) : tree_(&tree), block_(block) {}

  // Sums elements [begin, end) over `buffers` in the tree's order and hands each finished block
  // to `write(offset, values, count)`. `scratch` holds height() * block elements.
  template <class Write>
  void run(std::span<const std::span<T>> buffers, std::size_t begin, std::size_t end,
           std::span<T> scratch, Write&& write) const {
    for (std::size_t offset = begin; offset < end; offset += block_) {
      const std::size_t count = std::min(block_, end - offset);
      sum_subtree(tree_->root(), buffers, offset, count, scratch);
      write(offset, scratch.data(), count);
    }
  }

  [[nodiscard]] std::size_t scratch_size() const noexcept { return tree_->height() * block_; }

 private:
  // v(node) for [offset, offset + count) into the scratch block of the node's depth.
  void sum_subtree(std::size_t node, std::span<const std::span<T>> buffers, std::size_t offset,
                   std::size_t count, std::span<T> scratch) const {
    T* out = scratch.data() + tree_->depth(node) * block_;
    const T* own = buffers[node].data() + offset;
    std::copy(own, own + count, out);
    for (const std::size_t child : tree_->children(node)) {
      const T* from;
      if (tree_->children(child).empty()) {
        from = buffers[child].data() + offset;  // a leaf's value is its own elements
      } else {
        sum_subtree(child, buffers, offset, count, scratch);
        from = scratch.data() + tree_->depth(child) * block_;
      }
      add_into(out, from, count);
    }
  }

  const tree_topology* tree_;
  std::size_t block_;
};

}  // namespace detail

/// @brief Broadcast, reduce and allreduce over one buffer per participant, along a
/// `tree_topology`, in place: the host-memory model of `tree_collective`.
///
/// Caffe's P2PSync as a reusable template: parameters flow down from the root, gradients are
/// summed up the tree and the root scales them by 1/N. Sums are taken in the tree's order (each
/// participant's own elements, then each child's subtree sum in the children's order), so the
/// result is identical bit for bit from run to run for a given tree, whatever the thread count
/// or block size.
///
/// `broadcast`, `reduce` and `allreduce` run one at a time (they serialize on a mutex), on the
/// backend's threads, and block until done. `reduce_range` runs on the calling thread alone and
/// may run at once on disjoint ranges from several threads (scratch comes from a pool made at
/// construction, one area per participant; more callers at once than participants wait for one).
/// `block_elements` is the unit of work: small enough that a block of every buffer stays in
/// cache while it is summed and written back.
///
/// @tparam T       a `reducible` element type: float, double, or any T with + and scaling
/// @tparam Backend who does the work; `host_threads`
template <reducible T, class Backend = host_threads>
class device_tree_reducer {
 public:
  using value_type = T;
  using scale_type = scale_type_t<T>;

  /// The default block: 16 KiB of floats.
  static constexpr std::size_t default_block_elements = 4096;

  /// @param tree           the topology; `buffers[i]` belongs to participant `i`
  /// @param buffers        one buffer per participant, all of the same size, not overlapping
  /// @param backend        does the work (null: a default one); may be shared with other
  ///                       reducers, whose collectives then take turns on it
  /// @param block_elements elements summed per block (0 is taken as the default; a block larger
  ///                       than the buffers is taken as the whole buffer)
  /// @throws crema::collective_error if the buffer count is not the participant count, two
  ///         buffers differ in size or overlap (naming both participants), or the scratch memory
  ///         for `block_elements` overflows
  device_tree_reducer(tree_topology tree, std::vector<std::span<T>> buffers,
                      std::shared_ptr<Backend> backend = nullptr,
                      std::size_t block_elements = default_block_elements)
      : tree_(std::move(tree)),
        buffers_(detail::checked_buffers(name, std::move(buffers), tree_.size())),
        backend_(backend ? std::move(backend) : std::make_shared<Backend>()),
        sum_(tree_, block_for(block_elements, buffers_[0].size())),
        scratch_(scratch_elements(block_elements)),
        range_scratch_(tree_.size(), std::vector<T>(sum_.scratch_size())),
        range_scratch_free_(tree_.size()) {
    for (std::size_t i = 0; i < range_scratch_.size(); ++i) range_scratch_free_[i] = i;
  }

  /// @return the number of participants
  [[nodiscard]] std::size_t participants() const noexcept { return tree_.size(); }
  /// @return the number of elements in each buffer
  [[nodiscard]] std::size_t size() const noexcept { return buffers_[0].size(); }
  /// @return the topology
  [[nodiscard]] const tree_topology& topology() const noexcept { return tree_; }
  /// @return participant `i`'s buffer
  [[nodiscard]] std::span<T> buffer(std::size_t i) const {
    detail::check_participant(name, "buffer", i, tree_.size());
    return buffers_[i];
  }

  /// @brief Copies participant `root`'s buffer into every other participant's.
  /// @throws crema::collective_error if `root` is not a participant
  void broadcast(std::size_t root) {
    detail::check_participant(name, "broadcast", root, tree_.size());
    std::scoped_lock lock(mutex_);
    for_each_share([&](std::size_t begin, std::size_t end, std::span<T>) {
      const T* from = buffers_[root].data();
      for (std::size_t i = 0; i < buffers_.size(); ++i) {
        if (i != root) std::copy(from + begin, from + end, buffers_[i].data() + begin);
      }
    });
  }

  /// @brief Sums every participant's buffer into participant `root`'s (times 1/N for
  /// `reduction::average`); the others are left as they were.
  /// @throws crema::collective_error if `root` is not a participant
  void reduce(std::size_t root, reduction op = reduction::sum) {
    detail::check_participant(name, "reduce", root, tree_.size());
    std::scoped_lock lock(mutex_);
    const scale_type scale = scale_for<T>(op, tree_.size());
    for_each_share([&](std::size_t begin, std::size_t end, std::span<T> scratch) {
      sum_.run(buffers_, begin, end, scratch,
               [&](std::size_t offset, const T* values, std::size_t count) {
                 write_scaled(values, count, scale, op, buffers_[root].data() + offset);
               });
    });
  }

  /// @brief Leaves the sum (times 1/N for `reduction::average`) in every participant's buffer.
  void allreduce(reduction op = reduction::sum) {
    std::scoped_lock lock(mutex_);
    const scale_type scale = scale_for<T>(op, tree_.size());
    for_each_share([&](std::size_t begin, std::size_t end, std::span<T> scratch) {
      sum_.run(buffers_, begin, end, scratch,
               [&](std::size_t offset, const T* values, std::size_t count) {
                 T* first = buffers_[0].data() + offset;
                 write_scaled(values, count, scale, op, first);
                 for (std::size_t i = 1; i < buffers_.size(); ++i) {
                   std::copy(first, first + count, buffers_[i].data() + offset);
                 }
               });
    });
  }

  /// @brief Sums elements [begin, end) into participant `root`'s buffer (times 1/N for
  /// `reduction::average`), on the calling thread alone; calls on disjoint ranges may run at
  /// once (a hook reduces one bucket while the other participants go on).
  /// @throws crema::collective_error if `root` is not a participant or the range is not within
  ///         the buffers
  void reduce_range(std::size_t root, std::size_t begin, std::size_t end,
                    reduction op = reduction::sum) {
    detail::check_participant(name, "reduce_range", root, tree_.size());
    detail::check_range(name, "reduce_range", begin, end, size());
    const scratch_lease scratch(*this);
    const scale_type scale = scale_for<T>(op, tree_.size());
    sum_.run(buffers_, begin, end, scratch.area(),
             [&](std::size_t offset, const T* values, std::size_t count) {
               write_scaled(values, count, scale, op, buffers_[root].data() + offset);
             });
  }

  /// @brief Writes the tree-order sum of elements [begin, end) into `out` (`end - begin`
  /// elements), on the calling thread; no participant's buffer is written. Thread-safe as
  /// `reduce_range` (a reducer across ranks sums its local participants this way).
  /// @throws crema::collective_error if the range is not within the buffers or `out` is not as
  ///         long as it
  void sum_into(std::size_t begin, std::size_t end, std::span<T> out) {
    detail::check_range(name, "sum_into", begin, end, size());
    if (out.size() != end - begin) {
      detail::fail<collective_error>("device_tree_reducer::sum_into: {} elements for a range of {}",
                                     out.size(), end - begin);
    }
    const scratch_lease scratch(*this);
    sum_.run(buffers_, begin, end, scratch.area(),
             [&](std::size_t offset, const T* values, std::size_t count) {
               std::copy(values, values + count, out.data() + (offset - begin));
             });
  }

 private:
  static constexpr const char* name = "device_tree_reducer";

  // A block never needs to be longer than the buffers: the sums do not depend on it.
  static std::size_t block_for(std::size_t requested, std::size_t elements) {
    const std::size_t block = requested != 0 ? requested : default_block_elements;
    return std::min(block, std::max<std::size_t>(elements, 1));
  }

  // One scratch area per backend thread; refused, not wrapped, when it cannot be counted.
  std::size_t scratch_elements(std::size_t requested) const {
    const auto per_thread = detail::checked_mul(tree_.height(), block_for(requested, size()));
    const auto total =
        per_thread ? detail::checked_mul(*per_thread, backend_->size()) : std::nullopt;
    if (!total || !detail::checked_mul(*total, sizeof(T))) {
      detail::fail<collective_error>(
          "device_tree_reducer: block_elements {} x tree height {} x {} threads of scratch "
          "overflows",
          requested, tree_.height(), backend_->size());
    }
    return *total;
  }

  // One of the range reductions' scratch areas, for as long as it lives.
  class scratch_lease {
   public:
    explicit scratch_lease(device_tree_reducer& owner) : owner_(&owner) {
      std::unique_lock lock(owner_->range_mutex_);
      owner_->range_freed_.wait(lock, [&] { return !owner_->range_scratch_free_.empty(); });
      index_ = owner_->range_scratch_free_.back();
      owner_->range_scratch_free_.pop_back();
    }
    scratch_lease(const scratch_lease&) = delete;
    scratch_lease& operator=(const scratch_lease&) = delete;
    ~scratch_lease() {
      {
        std::scoped_lock lock(owner_->range_mutex_);
        owner_->range_scratch_free_.push_back(index_);
      }
      owner_->range_freed_.notify_one();
    }
    [[nodiscard]] std::span<T> area() const { return owner_->range_scratch_[index_]; }

   private:
    device_tree_reducer* owner_;
    std::size_t index_ = 0;
  };

  static void write_scaled(const T* values, std::size_t count, scale_type scale, reduction op,
                           T* out) {
    if (op == reduction::average) {
      detail::scale_into(out, values, count, scale);
    } else {
      std::copy(values, values + count, out);
    }
  }

  // Splits the elements into one contiguous share per backend thread.
  template <class Work>
  void for_each_share(Work&& work) {
    const std::size_t parts = backend_->size();
    const std::size_t total = size();
    const std::size_t share = (total + parts - 1) / parts;
    backend_->parallel([&](std::size_t part) {
      const std::size_t begin = std::min(total, part * share);
      const std::size_t end = std::min(total, begin + share);
      if (begin < end) {
        work(begin, end,
             std::span<T>(scratch_.data() + part * sum_.scratch_size(), sum_.scratch_size()));
      }
    });
  }

  tree_topology tree_;
  std::vector<std::span<T>> buffers_;
  std::shared_ptr<Backend> backend_;
  detail::tree_sum<T> sum_;
  std::vector<T> scratch_;
  std::mutex mutex_;
  // Scratch of the range reductions, one area per participant, handed out under range_mutex_.
  std::vector<std::vector<T>> range_scratch_;
  std::vector<std::size_t> range_scratch_free_;
  std::mutex range_mutex_;
  std::condition_variable range_freed_;
};

static_assert(tree_collective<device_tree_reducer<float>>);

}  // namespace crema
