#pragma once

#include <crema/collective/host/device_tree_reducer.hpp>
#include <crema/collective/reduction.hpp>
#include <crema/collective/topology.hpp>
#include <crema/collective/tree_collective.hpp>
#include <crema/core/detail/checked.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/deadline.hpp>
#include <crema/core/error.hpp>
#include <crema/core/host_threads.hpp>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
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

/// @brief The solver hooks of Caffe's P2PSync, over any `tree_collective`: each participant's
/// own thread calls `on_start` at the start of a step (parameters arrive from the root) and
/// `on_gradients_ready` after its backward pass (gradients go up to the root, which gets their sum
/// or average). The same solver code runs on host threads, GPUs and, through MPI, machines.
///
/// At the root's `on_start` the parameters are broadcast (`parameters.broadcast(root)`), once
/// every participant has finished the previous step, so no buffer is written while it is read;
/// the others wait for that broadcast. Buckets let gradients travel while the backward pass goes
/// on: `on_bucket_ready(p, b)` says participant p's bucket b is final; the last participant to
/// say so for a bucket reduces its range (`gradients.reduce_range(root, begin, end, op)`), on its
/// own thread. For models whose ranges must be reduced in one order everywhere
/// (`Collective::ranges_in_order`, the MPI reducer: ranks finish buckets in different orders), a
/// thread of the sync's own reduces them in index order instead, and the participants go on at
/// once. `on_gradients_ready` marks the buckets not yet marked. The root's
/// `on_gradients_ready` returns once every bucket is reduced, so it can apply the update; the
/// others return at once and wait for the new parameters in their next `on_start`.
///
/// Hooks alternate per participant: `on_start`, then `on_gradients_ready`, then `on_start` of the
/// next step. A hook called twice in one step, a wait longer than the timeout, or `abort()` from
/// a participant that failed, make the hooks throw `crema::collective_error` naming the
/// participants and the step; nothing hangs. Every member is thread-safe.
/// @tparam Collective a `tree_collective`: `device_tree_reducer<T>` (host memory),
///                    `cuda::cuda_p2p_reducer<T>`, `cuda::nccl_reducer<T>`, the MPI reducer
template <tree_collective Collective>
class p2p_sync {
 public:
  using value_type = typename Collective::value_type;

  /// @brief Hooks over two collectives the caller owns (they must outlive the sync).
  /// @param parameters one buffer of parameters per participant; the root's are broadcast
  /// @param gradients  one buffer of gradients per participant; reduced into the root's
  /// @param root       the participant whose parameters are the model's
  /// @throws crema::collective_error if the two have different participants, `root` is not one,
  ///         the timeout is not positive, or the buckets do not cover the gradients exactly
  ///         (naming the bucket that overruns them)
  p2p_sync(Collective& parameters, Collective& gradients, std::size_t root,
           p2p_sync_options options = {})
      : parameters_(&parameters),
        gradients_(&gradients),
        root_(root),
        options_(std::move(options)) {
    set_up();
  }

  /// @brief Hooks over host-memory buffers: makes the two `device_tree_reducer`s itself, on one
  /// team of host threads, with the tree's root as the root.
  /// @param tree       the participants
  /// @param parameters each participant's parameters (the root's are the ones broadcast)
  /// @param gradients  each participant's gradients (summed into the root's)
  /// @throws as the other constructor, and on buffers of different sizes or counts
  p2p_sync(tree_topology tree, std::vector<std::span<value_type>> parameters,
           std::vector<std::span<value_type>> gradients, p2p_sync_options options = {}) requires
      std::same_as<Collective, device_tree_reducer<value_type>> : root_(tree.root()),
                                                                  options_(std::move(options)) {
    auto team = std::make_shared<host_threads>();
    owned_parameters_ = std::make_unique<Collective>(tree, std::move(parameters), team);
    owned_gradients_ = std::make_unique<Collective>(std::move(tree), std::move(gradients), team);
    parameters_ = owned_parameters_.get();
    gradients_ = owned_gradients_.get();
    set_up();
  }

  p2p_sync(const p2p_sync&) = delete;
  p2p_sync& operator=(const p2p_sync&) = delete;
  ~p2p_sync() {
    if (bucket_thread_.joinable()) {
      {
        std::scoped_lock lock(mutex_);
        bucket_thread_.request_stop();
      }
      changed_.notify_all();
    }
  }

  /// @return the number of gradient buckets
  [[nodiscard]] std::size_t buckets() const noexcept { return bucket_begin_.size() - 1; }
  /// @return the number of participants
  [[nodiscard]] std::size_t participants() const noexcept { return gradients_->participants(); }
  /// @return the participants whose hooks this sync serves: all of them, or one rank's
  [[nodiscard]] std::size_t local_participants() const noexcept { return participants_.size(); }
  /// @return the number of the first of them
  [[nodiscard]] std::size_t first_local() const noexcept { return first_; }
  /// @return the root participant
  [[nodiscard]] std::size_t root() const noexcept { return root_; }

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
    if (p == lead_) {
      // Every local participant has finished the previous step: nobody reads the parameters now.
      wait_for(
          lock, [&] { return finished_ == participants_.size() * (me.step - 1); },
          [&] { return unfinished(me.step - 1); });
      lock.unlock();
      parameters_->broadcast(root_);
      lock.lock();
      published_ = me.step;
      changed_.notify_all();
      return;
    }
    wait_for(
        lock, [&] { return published_ >= me.step; },
        [&] {
          return crema::detail::format(
              "participant {} waited for the parameters of step {} from participant {}", p, me.step,
              lead_);
        });
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
    arrive(bucket);
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
      ++finished_;
      changed_.notify_all();
      for (std::size_t b = 0; b < buckets(); ++b) {
        if (me.arrived[b] != me.step) {
          me.arrived[b] = me.step;
          unmarked.push_back(b);
        }
      }
    }
    for (const std::size_t b : unmarked) arrive(b);
    if (p != lead_) return;
    std::unique_lock lock(mutex_);
    wait_for(
        lock, [&] { return summed_ == buckets(); }, [&] { return missing(me.step); });
    summed_ = 0;
    next_bucket_ = 0;
    std::fill(ready_.begin(), ready_.end(), false);
  }

  /// @brief Participant `p` has failed: every hook, waiting or to come, throws a
  /// `collective_error` naming it and `reason`.
  void abort(std::size_t p, const std::string& reason) {
    std::scoped_lock lock(mutex_);
    if (!aborted_)
      aborted_ = crema::detail::format("p2p_sync: participant {} failed: {}", p, reason);
    changed_.notify_all();
  }

 private:
  struct participant_state {
    std::uint64_t step = 0;              // steps started
    bool started = false;                // between on_start and on_gradients_ready
    std::vector<std::uint64_t> arrived;  // per bucket: the last step it was marked in
  };

  void set_up() {
    if (gradients_->participants() != parameters_->participants()) {
      detail::fail<collective_error>(
          "p2p_sync: the parameters have {} participants, the gradients {}",
          parameters_->participants(), gradients_->participants());
    }
    detail::check_participant("p2p_sync", "root", root_, parameters_->participants());
    // A collective across ranks serves this rank's participants here; the others' hooks run in
    // their own processes.
    std::size_t local = parameters_->participants();
    if constexpr (requires(const Collective& c) {
                    { c.local_participants() } -> std::convertible_to<std::size_t>;
                    { c.global(std::size_t{0}) } -> std::convertible_to<std::size_t>;
                  }) {
      local = parameters_->local_participants();
      first_ = parameters_->global(0);
    }
    participants_ = std::vector<participant_state>(local);
    lead_ = root_ >= first_ && root_ < first_ + local ? root_ : first_;
    if (options_.timeout <= std::chrono::milliseconds::zero()) {
      detail::fail<collective_error>(
          "p2p_sync: timeout must be positive (milliseconds::max() waits for ever), got {} ms",
          options_.timeout.count());
    }
    const std::size_t elements = gradients_->size();
    if (options_.bucket_sizes.empty()) options_.bucket_sizes.push_back(elements);
    std::size_t covered = 0;
    bucket_begin_.push_back(0);
    for (std::size_t b = 0; b < options_.bucket_sizes.size(); ++b) {
      const auto next = detail::checked_add(covered, options_.bucket_sizes[b]);
      if (!next || *next > elements) {
        detail::fail<collective_error>(
            "p2p_sync: bucket_sizes[{}] = {} takes the buckets past the {} gradient elements", b,
            options_.bucket_sizes[b], elements);
      }
      covered = *next;
      bucket_begin_.push_back(covered);
    }
    if (covered != elements) {
      detail::fail<collective_error>(
          "p2p_sync: bucket_sizes cover {} elements, the gradients have {}", covered, elements);
    }
    arrivals_ = std::vector<std::atomic<std::size_t>>(buckets());
    for (auto& count : arrivals_) count.store(participants_.size());
    for (auto& state : participants_) state.arrived.assign(buckets(), 0);
    ready_.assign(buckets(), false);
    if constexpr (ranges_in_order) {
      bucket_thread_ = std::jthread([this](std::stop_token stop) { reduce_buckets(stop); });
    }
  }

  participant_state& state_of(const char* hook, std::size_t p) {
    detail::check_participant("p2p_sync", hook, p, participants());
    if (p < first_ || p >= first_ + participants_.size()) {
      detail::fail<collective_error>(
          "p2p_sync::{}: participant {} is not one of participants {} to {} served here", hook, p,
          first_, first_ + participants_.size() - 1);
    }
    return participants_[p - first_];
  }

  // Models whose ranges must be reduced in one order everywhere have their buckets reduced in
  // index order.
  static constexpr bool ranges_in_order = ranges_in_order_v<Collective>;

  // The last local arrival for a bucket reduces it (in index order where the model asks for
  // that), then opens it for the next step.
  void arrive(std::size_t bucket) {
    if (arrivals_[bucket].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    arrivals_[bucket].store(participants_.size(), std::memory_order_release);
    if constexpr (ranges_in_order) {
      reduce_in_order(bucket);
    } else {
      reduce_bucket(bucket);
      std::scoped_lock lock(mutex_);
      ++summed_;
      changed_.notify_all();
    }
  }

  void reduce_bucket(std::size_t bucket) {
    gradients_->reduce_range(root_, bucket_begin_[bucket], bucket_begin_[bucket + 1],
                             options_.gradients);
  }

  // Marks a bucket ready for the bucket thread, which reduces them in index order: the
  // participant that finished it goes on with its backward pass.
  void reduce_in_order(std::size_t bucket) {
    {
      std::scoped_lock lock(mutex_);
      ready_[bucket] = true;
    }
    changed_.notify_all();
  }

  // The bucket thread (models that reduce ranges in one order): reduces the next bucket as soon
  // as it is ready, every step; a failure is kept and raised by the hooks.
  void reduce_buckets(const std::stop_token& stop) {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] {
        return stop.stop_requested() || (next_bucket_ < buckets() && ready_[next_bucket_]);
      });
      if (stop.stop_requested()) return;
      const std::size_t next = next_bucket_++;
      lock.unlock();
      try {
        reduce_bucket(next);
      } catch (...) {
        lock.lock();
        if (!failure_) failure_ = std::current_exception();
        changed_.notify_all();
        return;
      }
      lock.lock();
      ++summed_;
      changed_.notify_all();
    }
  }

  template <class Ready, class Describe>
  void wait_for(std::unique_lock<std::mutex>& lock, Ready ready, Describe describe) {
    const bool done = changed_.wait_until(lock, detail::deadline_after(options_.timeout), [&] {
      return aborted_.has_value() || failure_ != nullptr || ready();
    });
    raise_if_aborted();
    if (!done) {
      detail::fail<collective_error>("p2p_sync: timed out after {} ms: {}",
                                     options_.timeout.count(), describe());
    }
  }

  void raise_if_aborted() const {
    if (failure_) std::rethrow_exception(failure_);
    if (aborted_) throw collective_error(*aborted_);
  }

  // Who the root still waits for in `step`, for the timeout message.
  std::string missing(std::uint64_t step) const {
    std::string who;
    for (std::size_t p = 0; p < participants_.size(); ++p) {
      const auto& arrived = participants_[p].arrived;
      if (std::any_of(arrived.begin(), arrived.end(), [&](auto s) { return s != step; })) {
        const std::string number = std::to_string(first_ + p);
        who += who.empty() ? number : ", " + number;
      }
    }
    return crema::detail::format(
        "the root waited for the gradients of step {} from participants {}", step, who);
  }

  // Who has not finished `step` (called on_gradients_ready), for the timeout message.
  std::string unfinished(std::uint64_t step) const {
    std::string who;
    for (std::size_t p = 0; p < participants_.size(); ++p) {
      const auto& state = participants_[p];
      if (state.step < step || (state.step == step && state.started)) {
        const std::string number = std::to_string(first_ + p);
        who += who.empty() ? number : ", " + number;
      }
    }
    return crema::detail::format(
        "the root waited to broadcast step {} for participants {} to finish step {}", step + 1, who,
        step);
  }

  std::unique_ptr<Collective> owned_parameters_;
  std::unique_ptr<Collective> owned_gradients_;
  Collective* parameters_ = nullptr;
  Collective* gradients_ = nullptr;
  std::size_t root_;
  std::size_t first_ = 0;  // the first participant served here
  std::size_t lead_ = 0;   // the one that makes this process's collective calls
  p2p_sync_options options_;
  std::vector<std::size_t> bucket_begin_;
  std::vector<std::atomic<std::size_t>> arrivals_;
  std::vector<participant_state> participants_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t published_ = 0;  // the last step whose parameters the root broadcast
  std::uint64_t finished_ = 0;   // on_gradients_ready calls so far, every participant's
  std::size_t summed_ = 0;       // buckets reduced in the current step
  std::vector<bool> ready_;      // per bucket, when reduced in order: every local marker is in
  std::size_t next_bucket_ = 0;  // the next bucket to reduce, when in order
  std::exception_ptr failure_;   // what the bucket thread failed with
  std::optional<std::string> aborted_;
  std::jthread bucket_thread_;  // last: stopped and joined before the rest goes
};

/// @brief `p2p_sync` over host-memory buffers (`device_tree_reducer<T>`).
template <reducible T>
using host_p2p_sync = p2p_sync<device_tree_reducer<T>>;

}  // namespace crema
