#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/concurrentqueue.hpp>
#include <crema/core/detail/library_inline.hpp>

#include <algorithm>
#include <cstddef>

namespace crema::detail {

/// @brief moodycamel's queue of `void*`, the one instantiation of it that crema makes: slot
/// pools, queue pairs and the thread pool all keep their pointers in it, so that a translation
/// unit compiles moodycamel's queue (a few thousand lines of templates) once, whatever it builds.
///
/// Its construction, destruction and enqueue are compiled once (in libcrema, or once per unit
/// header-only) and called, not copied into every caller: their bodies are large (a block to
/// allocate, a producer to find), and a copy in each caller would spend the compiler's inlining
/// budget for the unit, which the per-record calls of a producer need more (a source's `next()`
/// left out of line costs every record a call). They come a few times a batch, their calls a few
/// instructions. `try_dequeue`, which spins call over and over, stays inline.
class untyped_queue {
 public:
  untyped_queue();
  explicit untyped_queue(std::size_t capacity);
  untyped_queue(const untyped_queue&) = delete;
  untyped_queue& operator=(const untyped_queue&) = delete;
  ~untyped_queue();

  bool enqueue(void* item);
  bool try_dequeue(void*& item) { return queue_.try_dequeue(item); }
  [[nodiscard]] std::size_t size_approx() const { return queue_.size_approx(); }

 private:
  moodycamel::ConcurrentQueue<void*> queue_;
};

/// @brief `untyped_queue` with a count of its items that consumers can wait on: what moodycamel's
/// `BlockingConcurrentQueue` does, over the same queue type, the semaphore's spins given at
/// construction instead of by a traits type (which would make another instantiation of the
/// queue). An item is counted once it is in the queue; a consumer takes the count first, then
/// the item, which is there or about to be.
class blocking_untyped_queue {
 public:
  /// @param spins how often a waiting consumer tries again before it sleeps
  explicit blocking_untyped_queue(
      std::size_t capacity = 6 * moodycamel::ConcurrentQueueDefaultTraits::BLOCK_SIZE,
      int spins = 10000);
  blocking_untyped_queue(const blocking_untyped_queue&) = delete;
  blocking_untyped_queue& operator=(const blocking_untyped_queue&) = delete;
  ~blocking_untyped_queue();

  bool enqueue(void* item);
  bool try_dequeue(void*& item) {
    if (!count_.tryWait()) return false;
    take(item);
    return true;
  }
  void wait_dequeue(void*& item);
  bool wait_dequeue_timed(void*& item, std::chrono::microseconds timeout);
  [[nodiscard]] std::size_t size_approx() const {
    return static_cast<std::size_t>(std::max<std::ptrdiff_t>(count_.availableApprox(), 0));
  }

 private:
  void take(void*& item) {
    while (!queue_.try_dequeue(item)) {
    }
  }

  moodycamel::ConcurrentQueue<void*> queue_;
  moodycamel::LightweightSemaphore count_;
};

/// @brief One of moodycamel's queues, of `T*` kept as `void*`.
///
/// Every pointer type shares one instantiation of moodycamel's queue, a few thousand functions:
/// a translation unit that makes pipelines of many slot types compiles it once, not once for each.
/// The pointers come out as they went in; what moodycamel does with them is unchanged.
/// @tparam T     what the pointers point to
/// @tparam Queue `untyped_queue` or `blocking_untyped_queue`
template <class T, class Queue>
class erased_pointer_queue {
 public:
  erased_pointer_queue() = default;
  template <class... Args>
  explicit erased_pointer_queue(std::size_t capacity, Args... args) : queue_(capacity, args...) {}

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

  Queue queue_;
};

/// @brief A lock-free queue of `T*` (moodycamel's `ConcurrentQueue`).
template <class T>
using pointer_queue = erased_pointer_queue<T, untyped_queue>;

/// @brief A lock-free queue of `T*` whose consumers can block (as moodycamel's
/// `BlockingConcurrentQueue`); constructed with a capacity and the semaphore's spins.
template <class T>
using blocking_pointer_queue = erased_pointer_queue<T, blocking_untyped_queue>;

}  // namespace crema::detail

#if CREMA_CORE_IN_HEADERS
#include <crema/core/detail/pointer_queue_impl.hpp>
#endif
