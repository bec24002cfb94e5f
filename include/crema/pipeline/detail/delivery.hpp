#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/deadline.hpp>
#include <crema/core/error.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/channel.hpp>
#include <crema/pipeline/detail/claim_sequencer.hpp>
#include <crema/pipeline/detail/hang_watch.hpp>
#include <crema/pipeline/detail/pipeline_counters.hpp>
#include <crema/pipeline/detail/run_state.hpp>
#include <crema/pipeline/detail/stall_watch.hpp>
#include <crema/pipeline/lease.hpp>
#include <crema/pipeline/pipeline_options.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

namespace crema::detail {

// How long a pull may wait.
enum class wait_kind {
  none,            // try_pull: take what is there
  until_deadline,  // pull_until: wait, then report a timeout
  stall_checked,   // pull: wait for ever, unless another consumer holds this one back
};

// The consumers' side of a pipeline: a pull takes the consumer's next full slot (through the
// reorder window where the pipeline is ordered), waits for one if asked to, and leases it out.
// After a failure the batches finished before it are still delivered; the error comes once
// nothing more can be. Each consumer index is used by one thread at a time.
template <class Slot>
class delivery {
 public:
  using channel_type = channel<Slot>;
  using lease_type = lease<channel_type>;
  using clock = std::chrono::steady_clock;
  // How soon a waiting consumer first looks again for producers held by slots parked in an
  // incomplete group (another consumer's releases, or releases on other threads, may park them
  // while it sleeps); each later look waits twice as long, up to the longest interval. A wait
  // for a batch being made then wakes a few times, not every 2 ms (each wake-up, on a virtual
  // machine, took tens of microseconds of the consumer's CPU and a core from a producer).
  static constexpr std::chrono::milliseconds kick_interval{2};
  static constexpr std::chrono::milliseconds longest_kick_interval{32};

  // The parts it uses; all outlive the consumers' pulls (a pull holds the engine).
  delivery(const pipeline_options& options, std::span<const std::shared_ptr<channel_type>> channels,
           std::span<channel_state* const> states, const claim_sequencer<thread_pool>& claims,
           run_state& run, pipeline_counters& counters, hang_watch& hangs,
           std::string_view source_key) noexcept
      : options_(options),
        channels_(channels),
        states_(states),
        claims_(claims),
        run_(run),
        counters_(counters),
        hangs_(hangs),
        source_key_(source_key) {}

  pull_result<lease_type> pull(std::size_t index, wait_kind kind, clock::time_point deadline) {
    const std::shared_ptr<channel_type>& owner = channels_[index];
    channel_type& target = *owner;
    if constexpr (misuse_checks) {
      if (target.in_pull.exchange(true, std::memory_order_acquire)) {
        fail<state_error>(
            "pipeline: consumer {} is pulled from two threads at once; each consumer index is "
            "used by one thread at a time (give each thread a consumer of its own)",
            index);
      }
      struct pull_ends {
        std::atomic<bool>& in_pull;
        ~pull_ends() { in_pull.store(false, std::memory_order_release); }
      } ends{target.in_pull};
      return pull_on(index, target, owner, kind, deadline);
    } else {
      return pull_on(index, target, owner, kind, deadline);
    }
  }

 private:
  pull_result<lease_type> pull_on(std::size_t index, channel_type& target,
                                  const std::shared_ptr<channel_type>& owner, wait_kind kind,
                                  clock::time_point deadline) {
    for (;;) {
      // After a failure, the batches finished before it are still delivered (in order, where
      // the pipeline is ordered); the error comes once nothing more can be.
      if (run_.stopped_without_failure()) return {pull_status::stopped, {}};
      const bool failing = run_.failed();
      if (options_.ordered) {
        Slot*& waiting = target.reorder[target.next_sequence % options_.prefetch];
        if (waiting != nullptr && waiting->sequence == target.next_sequence) {
          count_in_window(target, false);
          return deliver(owner, std::exchange(waiting, nullptr));
        }
      }
      if (target.total && target.delivered == *target.total) return {pull_status::end, {}};

      Slot* slot = nullptr;
      if (failing) {
        if (!target.try_pop(slot)) run_.rethrow_failure();
      } else if (kind == wait_kind::none) {
        if (!target.try_pop(slot)) {
          kick_for(target);
          return {pull_status::timeout, {}};
        }
      } else {
        if (target.outstanding.load(std::memory_order_relaxed) == options_.prefetch) {
          // Every slot of this consumer is leased: nothing can arrive, waiting would hang.
          fail<pipeline_error>(
              "pipeline: consumer {} holds all {} of its slots; release a lease before pulling "
              "again",
              index, options_.prefetch);
        }
        // A batch that is there is taken without a look at the producers: kicking them costs
        // a wake-up, which a consumer that keeps up should not pay.
        if (!target.try_pop(slot) && !wait_for_slot(index, target, kind, deadline, slot)) {
          return {pull_status::timeout, {}};
        }
      }
      if (slot == nullptr) continue;  // woken by stop: the checks above answer
      if (slot == &target.end_marker) {
        target.total = target.took_end();
        continue;
      }
      if (options_.ordered && slot->sequence != target.next_sequence) {
        // Every undelivered number holds one of this consumer's `prefetch` slots, so the
        // distance is below that. Counted in the window before it leaves the queue's count, so
        // that a snapshot meanwhile still sees it waiting.
        target.reorder[slot->sequence % options_.prefetch] = slot;
        count_in_window(target, true);
        target.took_batch();
        continue;
      }
      target.took_batch();
      return deliver(owner, slot);
    }
  }

  // The count the stats read from other threads; only the consumer's thread writes it.
  static void count_in_window(channel_type& target, bool entered) noexcept {
    std::atomic<std::size_t>& count = target.in_reorder_window;
    const std::size_t now = count.load(std::memory_order_relaxed);
    count.store(entered ? now + 1 : now - 1, std::memory_order_relaxed);
  }

  // Waits for the consumer's next full slot until `deadline`. A plain pull waits for ever, but
  // looks every `stall_timeout` whether another consumer holds it back, and throws if so.
  bool wait_for_slot(std::size_t index, channel_type& target, wait_kind kind,
                     clock::time_point deadline, Slot*& slot) {
    const auto asked = clock::now();
    target.pulling.store(true, std::memory_order_relaxed);
    struct finish_wait {
      pipeline_counters& counters;
      channel_type& target;
      clock::time_point asked;
      ~finish_wait() {
        target.pulling.store(false, std::memory_order_relaxed);
        counters.consumer_wait_ns.fetch_add(pipeline_counters::elapsed_ns(asked),
                                            std::memory_order_relaxed);
      }
    } finishing{counters_, target, asked};
    const bool checks_stalls = kind == wait_kind::stall_checked &&
                               options_.stall_timeout != std::chrono::milliseconds::max();
    // A hang is a producer's state, not the wait's: every wait that may sleep looks for one, so
    // that a consumer polling with short timeouts learns of it as a blocking one does.
    const bool checks_hangs = kind != wait_kind::none && hangs_.watches();
    clock::time_point next_stall_check =
        checks_stalls ? deadline_after(options_.stall_timeout) : clock::time_point::max();
    std::chrono::milliseconds slice = kick_interval;
    for (;;) {
      // Producers may wait for slots released in a group not yet complete, on any consumer's
      // side (the claim this consumer needs may be behind them): let them go before sleeping,
      // and again every slice of the wait, since another consumer may park a slot meanwhile.
      kick_for(target);
      const clock::time_point until = std::min({deadline, next_stall_check, deadline_after(slice)});
      slice = std::min(slice * 2, longest_kick_interval);
      if (target.pop_until(slot, until)) return true;
      const auto now = clock::now();
      if (checks_hangs) {
        if (const auto hung = hangs_.look(now)) {
          fail_hung(*hung, source_key_, options_.hang_timeout);
        }
      }
      if (now >= deadline) return false;
      if (now < next_stall_check) continue;
      next_stall_check = deadline_after(options_.stall_timeout);
      if (const auto holder =
              holder_of(states_, index, run_.producers_alive(), claims_.waiting())) {
        fail_held_back(index, pipeline_counters::elapsed_ns(asked) / 1'000'000, *holder,
                       *states_[*holder]);
      }
    }
  }

  // A consumer's kick, counted: the wake-ups it pays for.
  void kick_for(channel_type& consumer) {
    std::size_t handed = 0;
    for (const auto& each : channels_) handed += each->free_slots().kick();
    if (handed != 0) consumer.wakeups.fetch_add(1, std::memory_order_relaxed);
  }

  pull_result<lease_type> deliver(const std::shared_ptr<channel_type>& target, Slot* slot) {
    ++target->next_sequence;
    ++target->delivered;
    target->outstanding.fetch_add(1, std::memory_order_relaxed);
    target->consumed.fetch_add(1, std::memory_order_relaxed);
    counters_.batches_consumed.fetch_add(1, std::memory_order_relaxed);
    return {pull_status::ready, channel_type::lease_of(target, slot)};
  }

  const pipeline_options options_;  // a copy: read on every pull, one load closer
  std::span<const std::shared_ptr<channel_type>> channels_;
  std::span<channel_state* const> states_;
  const claim_sequencer<thread_pool>& claims_;
  run_state& run_;
  pipeline_counters& counters_;
  hang_watch& hangs_;
  std::string_view source_key_;
};

}  // namespace crema::detail
