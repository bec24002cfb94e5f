#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/channel_state.hpp>
#include <crema/pipeline/detail/run_state.hpp>

#include <algorithm>
#include <atomic>
#include <exception>
#include <span>

namespace crema::detail {

// The pipeline's executor hook: idle producer threads poll for released slots.
//
// Waking a sleeping producer is a system call, the dearest thing left on a consumer's thread
// (10 µs and more in a virtual machine, where it wakes a halted processor). So while the
// consumers keep coming back, their releases wake nobody: one idle producer thread wakes by
// itself now and then and hands the slots released meanwhile to the producers waiting for them.
// It polls about as often as slots come back: a poll that finds none makes the interval half as
// long again, one that finds some shortens it by a third, and once none came back for the longest
// interval the consumers are away, polling stops, and releases wake producers again.
//
// The pool calls `on_idle` on one idle thread at a time; the state below is that thread's.
class release_poller final : public idle_hook {
 public:
  static constexpr std::chrono::nanoseconds shortest_poll{20'000};
  static constexpr std::chrono::nanoseconds longest_poll{10'000'000};

  // Starts polling `channels` for `run`; until then an idle thread sleeps at once. Both must
  // outlive the pool's threads.
  void arm(std::span<channel_state* const> channels, run_state& run) noexcept {
    channels_ = channels;
    run_ = &run;
    armed_.store(true, std::memory_order_release);
  }

  std::chrono::nanoseconds on_idle(bool just_idle) noexcept override;

 private:
  std::chrono::nanoseconds interval_after(bool just_idle);
  std::size_t kick_all();
  void end_polling();
  // Linux delays a sleeping thread's timer by up to 50 µs by default, to batch wake-ups; a poll
  // a few tens of microseconds apart needs better: about a microsecond. Once per thread.
  static void tighten_timer_slack() noexcept;

  std::atomic<bool> armed_{false};
  std::span<channel_state* const> channels_;
  run_state* run_ = nullptr;
  bool polling_ = false;  // releases leave waking to this poller
  std::chrono::nanoseconds interval_{shortest_poll};
  std::chrono::nanoseconds learned_{shortest_poll};  // the interval of the last find
};

}  // namespace crema::detail

#if CREMA_CORE_IN_HEADERS
#include <crema/pipeline/detail/release_poller_impl.hpp>
#endif
