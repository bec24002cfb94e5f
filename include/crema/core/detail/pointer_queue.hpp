#pragma once

#include <crema/core/detail/concurrentqueue.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace crema::detail {

/// @brief One of moodycamel's queues of `void*`, its enqueue and waits out of line.
///
/// Those operations are compiled once for each queue type, whatever points into it, and called,
/// not copied into every caller: their bodies are large (a block to allocate, a producer to find,
/// a semaphore), and a copy in each caller would spend the compiler's inlining budget for the
/// unit, which the per-record calls of a producer need more (a source's `next()` left out of line
/// costs every record a call). They come a few times a batch, their calls a few instructions.
/// `try_dequeue`, which spins call over and over, stays inline.
/// @tparam Queue `moodycamel::ConcurrentQueue<void*, Traits>` or its blocking form
template <class Queue>
class untyped_queue {
 public:
  untyped_queue() = default;
  explicit untyped_queue(std::size_t capacity) : queue_(capacity) {}

  [[gnu::noinline]] bool enqueue(void* item) { return queue_.enqueue(item); }
  bool try_dequeue(void*& item) { return queue_.try_dequeue(item); }
  [[gnu::noinline]] void wait_dequeue(void*& item) { queue_.wait_dequeue(item); }
  [[gnu::noinline]] bool wait_dequeue_timed(void*& item, std::chrono::microseconds timeout) {
    return queue_.wait_dequeue_timed(item, timeout);
  }
  [[nodiscard]] std::size_t size_approx() const { return queue_.size_approx(); }

 private:
  Queue queue_;
};

/// @brief One of moodycamel's queues, of `T*` kept as `void*`.
///
/// Every pointer type shares one instantiation of moodycamel's queue, a few thousand functions:
/// a translation unit that makes pipelines of many slot types compiles it once, not once for each.
/// The pointers come out as they went in; what moodycamel does with them is unchanged.
/// @tparam T     what the pointers point to
/// @tparam Queue `moodycamel::ConcurrentQueue<void*, Traits>` or its blocking form; give the
///               traits at namespace scope (a class nested in a template is another type, and
///               another instantiation, for each of the template's arguments)
template <class T, class Queue>
class erased_pointer_queue {
 public:
  erased_pointer_queue() = default;
  explicit erased_pointer_queue(std::size_t capacity) : queue_(capacity) {}

  /// @return false where the queue could not grow (its allocation failed)
  bool enqueue(T* item) { return queue_.enqueue(item); }
  bool try_dequeue(T*& item) {
    return take(item, [this](void*& erased) { return queue_.try_dequeue(erased); });
  }
  /// @brief Blocks until an item comes (the blocking queue only).
  void wait_dequeue(T*& item) {
    take(item, [this](void*& erased) {
      queue_.wait_dequeue(erased);
      return true;
    });
  }
  /// @brief Blocks until an item comes or `timeout` has passed (the blocking queue only). A
  /// timeout below zero waits for nothing, where moodycamel's own would wait for ever.
  template <class Rep, class Period>
  bool wait_dequeue_timed(T*& item, std::chrono::duration<Rep, Period> timeout) {
    const auto micros = std::max(std::chrono::duration_cast<std::chrono::microseconds>(timeout),
                                 std::chrono::microseconds::zero());
    return take(item, [&](void*& erased) { return queue_.wait_dequeue_timed(erased, micros); });
  }
  [[nodiscard]] std::size_t size_approx() const { return queue_.size_approx(); }

 private:
  template <class Dequeue>
  static bool take(T*& item, Dequeue&& dequeue) {
    void* erased = nullptr;
    if (!dequeue(erased)) return false;
    item = static_cast<T*>(erased);
    return true;
  }

  untyped_queue<Queue> queue_;
};

/// @brief A lock-free queue of `T*` (moodycamel's `ConcurrentQueue`).
template <class T, class Traits = moodycamel::ConcurrentQueueDefaultTraits>
using pointer_queue = erased_pointer_queue<T, moodycamel::ConcurrentQueue<void*, Traits>>;

/// @brief A lock-free queue of `T*` whose consumers can block (moodycamel's
/// `BlockingConcurrentQueue`).
template <class T, class Traits = moodycamel::ConcurrentQueueDefaultTraits>
using blocking_pointer_queue =
    erased_pointer_queue<T, moodycamel::BlockingConcurrentQueue<void*, Traits>>;

}  // namespace crema::detail
