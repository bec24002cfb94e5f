#pragma once

#include <crema/collective/backends/host_threads.hpp>
#include <crema/collective/device_tree_reducer.hpp>
#include <crema/collective/topology.hpp>
#include <crema/core/detail/checked.hpp>
#include <crema/core/detail/deadline.hpp>
#include <crema/core/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace crema {

/// @brief How a `p2p_sync` is set up.
struct p2p_sync_options {
  /// What the root gets: the average of the gradients (Caffe's 1/N) or their sum.
  reduction gradients = reduction::average;
  /// Bucket sizes in elements, adding up to the gradient size (one per layer, say); empty means
  /// one bucket. `buckets_of(size, bytes)` cuts by byte size.
  std::vector<std::size_t> bucket_sizes = {};
  /// How long a hook waits for the others before it gives up with a `collective_error` naming
  /// who it waited for; positive, and `milliseconds::max()` waits for ever.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

/// @brief Bucket sizes of at most `bytes` bytes each, covering `elements` elements of `T`.
template <class T>
[[nodiscard]] std::vector<std::size_t> buckets_of(std::size_t elements, std::size_t bytes) {
  const std::size_t per_bucket = std::max<std::size_t>(1, bytes / sizeof(T));
  std::vector<std::size_t> sizes;
  for (std::size_t done = 0; done < elements; done += per_bucket) {
    sizes.push_back(std::min(per_bucket, elements - done));
  }
  return sizes;
}

/// @brief The solver hooks of Caffe's P2PSync: each participant's own thread calls `on_start`
/// at the start of a step (parameters arrive from the root) and `on_gradients_ready` after its
/// backward pass (gradients go up to the root, which gets their sum or average).
///
/// Buckets let gradients travel while the backward pass goes on: `on_bucket_ready(p, b)` says
/// participant p's bucket b is final; the last participant to say so for a bucket sums it, on its
/// own thread, in the tree's order, so the result is identical to the unbucketed reduction.
/// `on_gradients_ready` marks the buckets not yet marked. The root's `on_gradients_ready` returns
/// once every bucket is summed, so it can apply the update; the others return at once and wait
/// for the new parameters in their next `on_start`.
///
/// Hooks alternate per participant: `on_start`, then `on_gradients_ready`, then `on_start` of the
/// next step. A hook called twice in one step, a wait longer than the timeout, or `abort()` from
/// a participant that failed, make the hooks throw `crema::collective_error` naming the
/// participants and the step; nothing hangs. Every member is thread-safe.
///
/// In host memory each participant copies the root's parameters directly, and sums read every
/// participant's gradients directly; the tree fixes the order of the sums.
template <reducible T, class Backend = host_threads>
class p2p_sync {
 public:
  /// @param tree       the participants
  /// @param parameters each participant's parameters (the root's are the ones broadcast)
  /// @param gradients  each participant's gradients (summed into the root's)
  /// @throws crema::collective_error on buffers of different sizes, or a bucket list that does
  ///         not cover the gradients exactly (naming the bucket that overruns them)
  p2p_sync(tree_topology tree, std::vector<std::span<T>> parameters,
           std::vector<std::span<T>> gradients, p2p_sync_options options = {})
      : parameters_(tree, std::move(parameters), std::make_shared<Backend>(1)),
        gradients_(tree, std::move(gradients), std::make_shared<Backend>(1)),
        tree_(std::move(tree)),
        options_(std::move(options)),
        participants_(tree_.size()) {
    if (options_.timeout <= std::chrono::milliseconds::zero()) {
      detail::fail<collective_error>(
          "p2p_sync: timeout must be positive (milliseconds::max() waits for ever), got {} ms",
          options_.timeout.count());
    }
    if (options_.bucket_sizes.empty()) options_.bucket_sizes.push_back(gradients_.size());
    std::size_t covered = 0;
    bucket_begin_.push_back(0);
    for (std::size_t b = 0; b < options_.bucket_sizes.size(); ++b) {
      const auto next = detail::checked_add(covered, options_.bucket_sizes[b]);
      if (!next || *next > gradients_.size()) {
        detail::fail<collective_error>(
            "p2p_sync: bucket_sizes[{}] = {} takes the buckets past the {} gradient elements", b,
            options_.bucket_sizes[b], gradients_.size());
      }
      covered = *next;
      bucket_begin_.push_back(covered);
    }
    if (covered != gradients_.size()) {
      detail::fail<collective_error>(
          "p2p_sync: bucket_sizes cover {} elements, the gradients have {}", covered,
          gradients_.size());
    }
    arrivals_ = std::vector<std::atomic<std::size_t>>(buckets());
    for (auto& count : arrivals_) count.store(tree_.size());
    for (auto& state : participants_) {
      state.arrived.assign(buckets(), 0);
      state.scratch.resize(gradients_.scratch_size());
    }
  }

  /// @return the number of gradient buckets
  [[nodiscard]] std::size_t buckets() const noexcept { return bucket_begin_.size() - 1; }
  /// @return the topology
  [[nodiscard]] const tree_topology& topology() const noexcept { return tree_; }

  /// @brief Participant `p` starts a step: the root publishes its parameters; the others wait for
  /// them and copy them into their own.
  /// @throws crema::collective_error if `p` calls it twice in a step, on a timeout, or after an
  ///         abort
  void on_start(std::size_t p) {
    participant_state& me = state_of("on_start", p);
    std::unique_lock lock(mutex_);
    raise_if_aborted();
    if (me.started) {
      detail::fail<collective_error>("p2p_sync: participant {} called on_start twice in step {}", p,
                                     me.step);
    }
    me.started = true;
    ++me.step;
    if (p == tree_.root()) {
      published_ = me.step;
      changed_.notify_all();
      return;
    }
    wait_for(
        lock, [&] { return published_ >= me.step; },
        [&] {
          return fmt::format(
              "participant {} waited for the parameters of step {} from participant {}", p, me.step,
              tree_.root());
        });
    lock.unlock();
    const auto from = parameters_.buffer(tree_.root());
    std::copy(from.begin(), from.end(), parameters_.buffer(p).begin());
  }

  /// @brief Participant `p`'s bucket `bucket` is final for this step. If it is the last to say so,
  /// the bucket is summed into the root's gradients on this thread.
  /// @throws crema::collective_error if the bucket was already marked in this step, if `p` has
  ///         not started the step, or after an abort
  void on_bucket_ready(std::size_t p, std::size_t bucket) {
    participant_state& me = state_of("on_bucket_ready", p);
    if (bucket >= buckets()) {
      detail::fail<collective_error>("p2p_sync: bucket {} of participant {} is outside {} buckets",
                                     bucket, p, buckets());
    }
    {
      std::scoped_lock lock(mutex_);
      raise_if_aborted();
      if (!me.started) {
        detail::fail<collective_error>(
            "p2p_sync: participant {} marked bucket {} before on_start "
            "of step {}",
            p, bucket, me.step + 1);
      }
      if (me.arrived[bucket] == me.step) {
        detail::fail<collective_error>("p2p_sync: participant {} marked bucket {} twice in step {}",
                                       p, bucket, me.step);
      }
      me.arrived[bucket] = me.step;
    }
    arrive(me, bucket);
  }

  /// @brief Participant `p` has all its gradients: marks the buckets not yet marked. The root
  /// then waits until every bucket is summed; the others return at once.
  /// @throws crema::collective_error if `p` calls it twice in a step or before `on_start`, on a
  ///         timeout, or after an abort
  void on_gradients_ready(std::size_t p) {
    participant_state& me = state_of("on_gradients_ready", p);
    std::vector<std::size_t> unmarked;
    {
      std::scoped_lock lock(mutex_);
      raise_if_aborted();
      if (!me.started && me.step == 0) {
        detail::fail<collective_error>(
            "p2p_sync: participant {} called on_gradients_ready before on_start", p);
      }
      if (!me.started) {
        detail::fail<collective_error>(
            "p2p_sync: participant {} called on_gradients_ready twice in step {}", p, me.step);
      }
      me.started = false;
      for (std::size_t b = 0; b < buckets(); ++b) {
        if (me.arrived[b] != me.step) {
          me.arrived[b] = me.step;
          unmarked.push_back(b);
        }
      }
    }
    for (const std::size_t b : unmarked) arrive(me, b);
    if (p != tree_.root()) return;
    std::unique_lock lock(mutex_);
    wait_for(
        lock, [&] { return summed_ == buckets(); }, [&] { return missing(me.step); });
    summed_ = 0;
  }

  /// @brief Participant `p` has failed: every hook, waiting or to come, throws a
  /// `collective_error` naming it and `reason`.
  void abort(std::size_t p, const std::string& reason) {
    std::scoped_lock lock(mutex_);
    if (!aborted_) aborted_ = fmt::format("p2p_sync: participant {} failed: {}", p, reason);
    changed_.notify_all();
  }

 private:
  struct participant_state {
    std::uint64_t step = 0;              // steps started
    bool started = false;                // between on_start and on_gradients_ready
    std::vector<std::uint64_t> arrived;  // per bucket: the last step it was marked in
    std::vector<T> scratch;              // for the buckets this participant sums
  };

  participant_state& state_of(const char* hook, std::size_t p) {
    if (p >= participants_.size()) {
      detail::fail<collective_error>("p2p_sync::{}: participant {} is outside a tree of {}", hook,
                                     p, participants_.size());
    }
    return participants_[p];
  }

  // The last arrival for a bucket sums it, then opens it for the next step.
  void arrive(participant_state& me, std::size_t bucket) {
    if (arrivals_[bucket].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    gradients_.reduce_range_here(tree_.root(), bucket_begin_[bucket], bucket_begin_[bucket + 1],
                                 options_.gradients, me.scratch);
    arrivals_[bucket].store(tree_.size(), std::memory_order_release);
    std::scoped_lock lock(mutex_);
    ++summed_;
    changed_.notify_all();
  }

  template <class Ready, class Describe>
  void wait_for(std::unique_lock<std::mutex>& lock, Ready ready, Describe describe) {
    const bool done = changed_.wait_until(lock, detail::deadline_after(options_.timeout),
                                          [&] { return aborted_.has_value() || ready(); });
    raise_if_aborted();
    if (!done) {
      detail::fail<collective_error>("p2p_sync: timed out after {} ms: {}",
                                     options_.timeout.count(), describe());
    }
  }

  void raise_if_aborted() const {
    if (aborted_) throw collective_error(*aborted_);
  }

  // Who the root still waits for in `step`, for the timeout message.
  std::string missing(std::uint64_t step) const {
    std::string who;
    for (std::size_t p = 0; p < participants_.size(); ++p) {
      const auto& arrived = participants_[p].arrived;
      if (std::any_of(arrived.begin(), arrived.end(), [&](auto s) { return s != step; })) {
        who += who.empty() ? std::to_string(p) : ", " + std::to_string(p);
      }
    }
    return fmt::format("the root waited for the gradients of step {} from participants {}", step,
                       who);
  }

  device_tree_reducer<T, Backend> parameters_;
  device_tree_reducer<T, Backend> gradients_;
  tree_topology tree_;
  p2p_sync_options options_;
  std::vector<std::size_t> bucket_begin_;
  std::vector<std::atomic<std::size_t>> arrivals_;
  std::vector<participant_state> participants_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t published_ = 0;  // the last step whose parameters the root published
  std::size_t summed_ = 0;       // buckets summed in the current step
  std::optional<std::string> aborted_;
};

}  // namespace crema
