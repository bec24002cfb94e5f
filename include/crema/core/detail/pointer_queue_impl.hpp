#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/detail/pointer_queue.hpp>

#include <cstddef>

// The queues' construction, destruction, enqueues and waits: compiled once in libcrema
// (src/core/), or included by pointer_queue.hpp, inline, where the core is headers alone. Never
// inlined into their callers, either way (pointer_queue.hpp says why).

namespace crema::detail {

CREMA_CORE_INLINE untyped_queue::untyped_queue() = default;
CREMA_CORE_INLINE untyped_queue::untyped_queue(std::size_t capacity) : queue_(capacity) {}
CREMA_CORE_INLINE untyped_queue::~untyped_queue() = default;
[[gnu::noinline]] CREMA_CORE_INLINE bool untyped_queue::enqueue(void* item) {
  return queue_.enqueue(item);
}

CREMA_CORE_INLINE blocking_untyped_queue::blocking_untyped_queue(std::size_t capacity, int spins)
    : queue_(capacity), count_(0, spins) {}
CREMA_CORE_INLINE blocking_untyped_queue::~blocking_untyped_queue() = default;

[[gnu::noinline]] CREMA_CORE_INLINE bool blocking_untyped_queue::enqueue(void* item) {
  if (!queue_.enqueue(item)) return false;
  count_.signal();
  return true;
}

[[gnu::noinline]] CREMA_CORE_INLINE void blocking_untyped_queue::wait_dequeue(void*& item) {
  while (!count_.wait()) {
  }
  take(item);
}

[[gnu::noinline]] CREMA_CORE_INLINE bool blocking_untyped_queue::wait_dequeue_timed(
    void*& item, std::chrono::microseconds timeout) {
  if (!count_.wait(timeout.count())) return false;
  take(item);
  return true;
}

}  // namespace crema::detail
