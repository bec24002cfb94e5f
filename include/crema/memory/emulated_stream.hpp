#pragma once

#include <crema/core/error.hpp>
#include <crema/memory/resource.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace crema {
namespace detail {

// What a stream and the events recorded on it share: the queue, and how far the work has got.
// Tickets count launched work; an event is ready once `completed` reaches its ticket.
struct emulated_stream_state {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> work;
  std::uint64_t launched = 0;
  std::uint64_t completed = 0;
  std::exception_ptr failure;  // the first exception a piece of work threw
  bool stopping = false;

  void wait_for(std::uint64_t ticket) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return completed >= ticket; });
    if (failure) std::rethrow_exception(failure);
  }
};

}  // namespace detail

/// @brief An event recorded on an `emulated_stream`.
///
/// Copies are cheap and refer to the same point in the stream; the event stays valid after the
/// stream is gone (it is ready then). `ready()` and `wait()` are thread-safe; `wait()` blocks.
class emulated_event {
 public:
  /// @brief An event with nothing to wait for: always ready.
  emulated_event() = default;

  /// @return whether the work queued before the event has finished; never blocks
  [[nodiscard]] bool ready() const {
    if (!state_) return true;
    std::scoped_lock lock(state_->mutex);
    return state_->completed >= ticket_;
  }
  /// @brief Blocks until the work queued before the event has finished.
  /// @throws whatever that work threw, if it threw
  void wait() const {
    if (state_) state_->wait_for(ticket_);
  }
  /// @return whether the work queued before the event has finished and none of it failed;
  ///         never blocks
  [[nodiscard]] bool ready_without_failure() const {
    if (!state_) return true;
    std::scoped_lock lock(state_->mutex);
    return state_->completed >= ticket_ && !state_->failure;
  }

 private:
  friend class emulated_stream;
  emulated_event(std::shared_ptr<detail::emulated_stream_state> state, std::uint64_t ticket)
      : state_(std::move(state)), ticket_(ticket) {}

  std::shared_ptr<detail::emulated_stream_state> state_;
  std::uint64_t ticket_ = 0;
};

/// @brief The emulated twin of a CUDA stream: an ordered queue of host work.
///
/// By default a worker thread runs the work in launch order, so an "asynchronous" copy really
/// is in flight while the caller goes on, as on a GPU;
/// `emulated_stream{emulated_stream::run_inline}` runs each piece of work in the caller at launch
/// instead. Neither copyable nor movable, like the thread it owns. `launch`, `record` and
/// `synchronize` may be called from several threads; `launch` allocates. The destructor finishes
/// the queued work, then joins the worker.
class emulated_stream {
 public:
  using event_type = emulated_event;

  struct run_inline_t {
    explicit run_inline_t() = default;
  };
  /// @brief Selects the stream that runs work in the caller.
  static constexpr run_inline_t run_inline{};

  /// @brief A stream whose work runs on a worker thread of its own.
  /// @throws crema::thread_error if the worker thread cannot be started
  emulated_stream() : state_(std::make_shared<detail::emulated_stream_state>()) {
    try {
      worker_ = std::jthread([state = state_] { run(*state); });
    } catch (const std::system_error& e) {
      detail::fail_with_code<thread_error>(e.code().value(),
                                           "emulated_stream: cannot start its worker thread: {}",
                                           e.code().message());
    }
  }
  /// @brief A stream whose work runs in the caller of `launch`, before `launch` returns.
  explicit emulated_stream(run_inline_t)
      : state_(std::make_shared<detail::emulated_stream_state>()) {}

  emulated_stream(const emulated_stream&) = delete;
  emulated_stream& operator=(const emulated_stream&) = delete;

  ~emulated_stream() {
    {
      std::scoped_lock lock(state_->mutex);
      state_->stopping = true;
    }
    state_->changed.notify_all();
  }

  /// @brief Queues `work` after everything launched before it (`cudaLaunchHostFunc`).
  /// An exception it throws is kept and rethrown by `synchronize()` and by `wait()` on the
  /// events recorded after it.
  void launch(std::function<void()> work) {
    if (!worker_.joinable()) {
      std::uint64_t ticket = 0;
      {
        std::scoped_lock lock(state_->mutex);
        ticket = ++state_->launched;
      }
      std::exception_ptr failure;
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
      finish(*state_, ticket, failure);
      return;
    }
    {
      std::scoped_lock lock(state_->mutex);
      state_->work.push_back(std::move(work));
      ++state_->launched;
    }
    state_->changed.notify_all();
  }

  /// @return an event that becomes ready when the work launched so far has finished
  [[nodiscard]] event_type record() {
    std::scoped_lock lock(state_->mutex);
    return event_type(state_, state_->launched);
  }

  /// @brief Blocks until the work launched so far has finished.
  /// @throws whatever that work threw, if it threw
  void synchronize() { record().wait(); }

  /// @brief Makes the work launched from now on wait for `event` (`cudaStreamWaitEvent`): the
  /// worker waits, not the caller. An inline stream waits in the caller, as it runs its work
  /// there. A failure of the work `event` waits for fails this stream's next work too.
  void wait(const event_type& event) {
    if (event.ready_without_failure()) return;
    launch([event] { event.wait(); });
  }

  /// @return whether this stream runs its work in the caller
  [[nodiscard]] bool is_inline() const noexcept { return !worker_.joinable(); }

 private:
  static void finish(detail::emulated_stream_state& state, std::uint64_t ticket,
                     std::exception_ptr failure) {
    {
      std::scoped_lock lock(state.mutex);
      state.completed = std::max(state.completed, ticket);
      if (failure && !state.failure) state.failure = failure;
    }
    state.changed.notify_all();
  }

  static void run(detail::emulated_stream_state& state) {
    for (;;) {
      std::function<void()> work;
      std::uint64_t ticket = 0;
      {
        std::unique_lock lock(state.mutex);
        state.changed.wait(lock, [&] { return !state.work.empty() || state.stopping; });
        if (state.work.empty()) return;  // stopping, and everything queued has run
        work = std::move(state.work.front());
        state.work.pop_front();
        ticket = state.completed + 1;
      }
      std::exception_ptr failure;
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
      finish(state, ticket, failure);
    }
  }

  std::shared_ptr<detail::emulated_stream_state> state_;
  std::jthread worker_;  // last: joined before state_ goes
};

static_assert(stream_policy<emulated_stream>);

}  // namespace crema
