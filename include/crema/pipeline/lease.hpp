#pragma once

#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

namespace crema {

/// @brief A consumer's view of one batch: the items the transform made, and where they came from.
/// Valid while the lease it came from lives.
template <class Item>
class batch {
 public:
  batch(std::span<Item> items, std::uint64_t sequence, std::uint64_t epoch,
        record_position first_position) noexcept
      : items_(items), sequence_(sequence), epoch_(epoch), first_position_(first_position) {}

  /// @return the items, `size()` of them
  [[nodiscard]] std::span<Item> items() const noexcept { return items_; }
  /// @return the number of items: the batch size, or fewer for the last batch of a single pass
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] Item& operator[](std::size_t index) const noexcept { return items_[index]; }
  [[nodiscard]] auto begin() const noexcept { return items_.begin(); }
  [[nodiscard]] auto end() const noexcept { return items_.end(); }
  /// @return this consumer's batch number (0, 1, 2, ... in the order records were read)
  [[nodiscard]] std::uint64_t sequence() const noexcept { return sequence_; }
  /// @return the pass over the source that the first record belongs to (0 for the first)
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
  /// @return the source position of the first record in its pass; save it to resume
  [[nodiscard]] record_position first_position() const noexcept { return first_position_; }

 private:
  std::span<Item> items_;
  std::uint64_t sequence_;
  std::uint64_t epoch_;
  record_position first_position_;
};

/// @brief Ownership of one full batch slot, taken by a consumer; the slot goes back to the free
/// pool (waking a producer if one waits) when the lease is destroyed or `reset()`.
///
/// Move-only. A lease keeps its slot's memory alive, so it may even outlive its pipeline
/// (releasing into a stopped pipeline is harmless). Destroying it is thread-safe and never
/// blocks. A thread's release allocates at most twice in the pipeline's life: the first time
/// it returns a slot to the free pool, and the first time it wakes a waiting producer (each
/// lock-free queue gives a thread that enqueues a small block of its own); never afterwards.
/// So release on the consumer's own threads, not on a fresh thread per batch.
template <class Channel>
class lease {
 public:
  using item_type = typename Channel::item_type;

  lease() noexcept = default;
  lease(std::shared_ptr<Channel> channel, typename Channel::slot_type* slot) noexcept
      : channel_(std::move(channel)), slot_(slot) {}
  lease(lease&& other) noexcept
      : channel_(std::move(other.channel_)), slot_(std::exchange(other.slot_, nullptr)) {}
  lease& operator=(lease&& other) noexcept {
    if (this != &other) {
      reset();
      channel_ = std::move(other.channel_);
      slot_ = std::exchange(other.slot_, nullptr);
    }
    return *this;
  }
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  ~lease() { reset(); }

  /// @brief Gives the slot back now; as the destructor.
  void reset() noexcept {
    // A lease holds both or neither; testing the channel keeps GCC's -O3 flow analysis from
    // seeing a release through a null channel.
    if (const std::shared_ptr<Channel> channel = std::exchange(channel_, nullptr)) {
      channel->release(std::exchange(slot_, nullptr));
    }
  }

  /// @return whether the lease holds a batch
  explicit operator bool() const noexcept { return slot_ != nullptr; }
  /// @return the batch
  [[nodiscard]] batch<item_type> operator*() const noexcept {
    return {std::span<item_type>(slot_->items.data(), slot_->size), slot_->sequence, slot_->epoch,
            slot_->first_position};
  }
  /// @return the batch, for `lease->items()` and the like
  [[nodiscard]] auto operator->() const noexcept {
    struct arrow {
      batch<item_type> value;
      const batch<item_type>* operator->() const noexcept { return &value; }
    };
    return arrow{**this};
  }

 private:
  std::shared_ptr<Channel> channel_;
  typename Channel::slot_type* slot_ = nullptr;
};

}  // namespace crema
