#pragma once

#include <coroutine>
#include <exception>

namespace crema::detail {

// A coroutine that starts suspended, runs to its end once resumed, and frees its own frame.
// The body must catch everything: an exception escaping it ends the program, like one escaping
// a thread.
struct producer_task {
  struct promise_type {
    producer_task get_return_object() noexcept {
      return producer_task{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    [[noreturn]] void unhandled_exception() const noexcept { std::terminate(); }
  };

  std::coroutine_handle<promise_type> coroutine;
};

}  // namespace crema::detail
