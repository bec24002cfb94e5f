#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace crema::detail {

// A lock-free last-in-first-out set of the numbers 0 to capacity - 1: Treiber's stack over an
// array, each number its own node. The head holds the top number and a tag in one word; every
// change of the head bumps the tag, so that a `pop` which read the head, lost the processor
// while others popped that number and pushed it back, fails its exchange instead of installing
// a stale successor (the ABA problem; a tag of 32 bits wraps only after 2^32 changes of the head
// within one such pause).
//
// A number must be pushed at most once between pops of it, and never while it is in the stack.
// `push` releases and `pop` acquires: what a thread wrote before pushing a number, the thread
// that pops it sees. Neither allocates.
class index_stack {
 public:
  explicit index_stack(std::uint32_t capacity)
      : below_(std::make_unique<std::atomic<std::uint32_t>[]>(capacity)) {}

  void push(std::uint32_t index) noexcept {
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    do {
      below_[index].store(top_of(head), std::memory_order_relaxed);
    } while (!head_.compare_exchange_weak(head, packed(index, head), std::memory_order_release,
                                          std::memory_order_relaxed));
  }

  // Takes the most recently pushed number; false if there is none.
  bool pop(std::uint32_t& index) noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      const std::uint32_t top = top_of(head);
      if (top == none) return false;
      // Stale if another thread took `top` meanwhile; the exchange then fails on the tag.
      const std::uint32_t below = below_[top].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(head, packed(below, head), std::memory_order_acquire,
                                      std::memory_order_acquire)) {
        index = top;
        return true;
      }
    }
  }

 private:
  static constexpr std::uint32_t none = UINT32_MAX;

  static std::uint32_t top_of(std::uint64_t head) noexcept {
    return static_cast<std::uint32_t>(head);
  }
  // `top` over the next tag after `head`'s.
  static std::uint64_t packed(std::uint32_t top, std::uint64_t head) noexcept {
    return ((head >> 32) + 1) << 32 | top;
  }

  std::atomic<std::uint64_t> head_{none};
  std::unique_ptr<std::atomic<std::uint32_t>[]> below_;
};

}  // namespace crema::detail
