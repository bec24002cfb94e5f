#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>

namespace crema::detail {

// A lock-free first-in-first-out set of the numbers 0 to capacity - 1: a bounded ring of cells
// after Dmitry Vyukov's MPMC queue. Each cell carries a sequence number that says whose turn it
// is: the pusher of ticket t finds t in its cell and leaves t + 1 beside the number; the popper
// of ticket t finds t + 1 and leaves t + ring size, which is the turn of the push one lap later.
// Pushers and poppers claim tickets with one exchange each on their own counter.
//
// A number must be pushed at most once between pops of it, and never while it is in the queue,
// so the ring never holds more than `capacity` and a push always finds its cell free. `pop` may
// miss a number whose push has claimed its ticket but not yet filled the cell, and then says the
// queue is empty. `push` releases and `pop` acquires: what a thread wrote before pushing a
// number, the thread that pops it sees. Neither allocates.
class index_queue {
 public:
  explicit index_queue(std::uint32_t capacity)
      : mask_(std::bit_ceil(std::uint64_t{capacity} | 1) - 1),
        cells_(std::make_unique<cell[]>(mask_ + 1)) {
    for (std::uint64_t i = 0; i <= mask_; ++i) {
      cells_[i].turn.store(i, std::memory_order_relaxed);
    }
  }

  void push(std::uint32_t index) noexcept {
    std::uint64_t ticket = pushed_.load(std::memory_order_relaxed);
    cell* target = nullptr;
    for (;;) {
      target = &cells_[ticket & mask_];
      // Fewer numbers than cells are ever in the ring, so the cell is free or about to be (a
      // popper one lap behind is between its ticket and its store).
      if (target->turn.load(std::memory_order_acquire) == ticket) {
        if (pushed_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_relaxed)) break;
      } else {
        ticket = pushed_.load(std::memory_order_relaxed);
      }
    }
    target->index = index;
    target->turn.store(ticket + 1, std::memory_order_release);
  }

  // Takes the number pushed longest ago; false if there is none (or its push is still filling
  // its cell).
  bool pop(std::uint32_t& index) noexcept {
    std::uint64_t ticket = popped_.load(std::memory_order_relaxed);
    cell* source = nullptr;
    for (;;) {
      source = &cells_[ticket & mask_];
      // 0: filled for this ticket; below: not yet (its push is to come or still filling);
      // above: another popper took this ticket.
      const auto lead =
          static_cast<std::int64_t>(source->turn.load(std::memory_order_acquire) - (ticket + 1));
      if (lead == 0) {
        if (popped_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_relaxed)) break;
      } else if (lead < 0) {
        return false;
      } else {
        ticket = popped_.load(std::memory_order_relaxed);
      }
    }
    index = source->index;
    source->turn.store(ticket + mask_ + 1, std::memory_order_release);
    return true;
  }

 private:
  struct cell {
    std::atomic<std::uint64_t> turn{0};
    std::uint32_t index = 0;
  };

  std::uint64_t mask_;  // ring size - 1
  std::unique_ptr<cell[]> cells_;
  alignas(64) std::atomic<std::uint64_t> pushed_{0};
  alignas(64) std::atomic<std::uint64_t> popped_{0};
};

}  // namespace crema::detail
