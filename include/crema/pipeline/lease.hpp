#pragma once

#include <crema/core/error.hpp>
#include <crema/pipeline/sample_context.hpp>
#include <crema/pipeline/source.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

namespace crema {

namespace detail {

// How many times a slot's lease gave it back: a batch view notes it when made, and in builds with
// `misuse_checks` refuses to show items once it has moved (the slot may be refilled). Movable, so
// that slots can be made and moved into their pool.
struct release_count {
  release_count() = default;
  release_count(release_count&& other) noexcept
      : value(other.value.load(std::memory_order_relaxed)) {}
  release_count& operator=(release_count&&) = delete;
  std::atomic<std::uint64_t> value{0};
};

}  // namespace detail

/// @brief A consumer's view of one batch of per-record items: the items the transform made, and
/// where they came from. Valid while the lease it came from lives; in debug builds (see
/// `detail::misuse_checks`) its items refuse to be read after that with a `crema::state_error`.
template <class Item>
class batch {
 public:
  batch(std::span<Item> items, const batch_info& info) noexcept : items_(items), info_(info) {}
  batch(std::span<Item> items, const batch_info& info,
        const detail::release_count& releases) noexcept
      : items_(items),
        info_(info),
        releases_(&releases),
        seen_(releases.value.load(std::memory_order_relaxed)) {}

  /// @return the items, `size()` of them
  /// @throws crema::state_error (debug builds) once the lease is gone
  [[nodiscard]] std::span<Item> items() const {
    check_held();
    return items_;
  }
  /// @return the number of items: the batch size, or fewer for the last batch of a single pass
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] Item& operator[](std::size_t index) const { return items()[index]; }
  [[nodiscard]] auto begin() const { return items().begin(); }
  [[nodiscard]] auto end() const { return items().end(); }
  /// @return this consumer's batch number (0, 1, 2, ... in the order records were read)
  [[nodiscard]] std::uint64_t sequence() const noexcept { return info_.sequence; }
  /// @return the pass over the source that the first record belongs to (0 for the first)
  [[nodiscard]] std::uint64_t epoch() const noexcept { return info_.epoch; }
  /// @return the source position of the first record in its pass; save it to resume
  [[nodiscard]] record_position first_position() const noexcept { return info_.first_position; }
  /// @return items at the end that repeat the batch's first ones (`partial_batch::pad`)
  [[nodiscard]] std::size_t padding() const noexcept { return info_.padding; }

 private:
  void check_held() const {
    if constexpr (detail::misuse_checks) {
      if (releases_ != nullptr && releases_->value.load(std::memory_order_relaxed) != seen_) {
        detail::fail<state_error>(
            "batch: batch {} of consumer {} was used after its lease gave the slot back (it may "
            "be refilled by now); keep the lease while its batch is used",
            info_.sequence, info_.consumer);
      }
    }
  }

  std::span<Item> items_;
  batch_info info_;
  const detail::release_count* releases_ = nullptr;
  std::uint64_t seen_ = 0;
};

/// @brief Ownership of one full batch slot, taken by a consumer; the slot goes back to its
/// producers when the lease is destroyed, `reset()` or `release_after(event)`.
///
/// Only a pipeline makes leases. Move-only. `*lease` is the batch: a `crema::batch<Item>` view for
/// per-item transforms, or the transform's own batch object (`lease->data`, say) for batch
/// transforms. A lease keeps its slot's memory alive, so it may even outlive its pipeline
/// (releasing into a stopped pipeline is harmless). Destroying it is thread-safe and never
/// blocks. A thread's release allocates at most twice in the pipeline's life: the first time it
/// returns a slot to the free pool, and the first time it wakes a waiting producer (each
/// lock-free queue gives a thread that enqueues a small block of its own); never afterwards. So
/// release on the consumer's own threads, not on a fresh thread per batch.
template <class Channel>
class lease {
  using slot_type = typename Channel::slot_type;

 public:
  lease() noexcept = default;
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

  /// @brief Gives the slot back now, to be refilled only after `event` (recorded on the
  /// consumer's stream after its last use of the batch) has completed: the batch object keeps the
  /// event (`retire_after`) and its next fill waits for it, so the device never reads a batch
  /// that is being rewritten. For batch objects that take such events (`device_batch`).
  template <class Event>
  requires requires(slot_type& slot, Event event) { slot.batch->retire_after(std::move(event)); }
  void release_after(Event event) {
    if (slot_ != nullptr) slot_->batch->retire_after(std::move(event));
    reset();
  }

  /// @return whether the lease holds a batch
  explicit operator bool() const noexcept { return slot_ != nullptr; }

  /// @return the batch: a view of the items, or the batch object. Both may be written: the
  /// lease owns its slot until it gives it back, as a `std::unique_ptr` owns its object (a
  /// consumer may normalise a batch in place, or hand its memory to a framework that writes).
  /// @throws crema::state_error if the lease is empty (released, moved from, or never given)
  [[nodiscard]] decltype(auto) operator*() const {
    if constexpr (slot_type::holds_batch) {
      (void)held();
      return *slot_->batch;
    } else {
      const slot_type& slot = held();
      return batch<typename slot_type::item_type>(
          std::span<typename slot_type::item_type>(slot_->items.data(), slot.size), slot.info(),
          slot.releases);
    }
  }
  /// @return the batch, for `lease->items()` or `lease->data` and the like
  /// @throws crema::state_error if the lease is empty
  [[nodiscard]] auto operator->() const {
    if constexpr (slot_type::holds_batch) {
      (void)held();
      return &*slot_->batch;
    } else {
      struct arrow {
        batch<typename slot_type::item_type> value;
        const batch<typename slot_type::item_type>* operator->() const noexcept { return &value; }
      };
      return arrow{**this};
    }
  }

  /// @return records in the batch (the last batch of a single pass may be short)
  /// @throws crema::state_error if the lease is empty, as every member below
  [[nodiscard]] std::size_t size() const { return held().size; }
  /// @return the batch's number among its consumer's batches (0, 1, 2, ...)
  [[nodiscard]] std::uint64_t sequence() const { return held().sequence; }
  /// @return the pass of its first record
  [[nodiscard]] std::uint64_t epoch() const { return held().epoch; }
  /// @return the position of its first record in that pass; save it to resume
  [[nodiscard]] record_position first_position() const { return held().first_position; }
  /// @return records at the end that repeat the batch's first ones (`partial_batch::pad`)
  [[nodiscard]] std::size_t padding() const { return held().padding; }
  /// @return all of the above, and the consumer
  [[nodiscard]] batch_info info() const { return held().info(); }

 private:
  const slot_type& held() const {
    if (slot_ == nullptr) [[unlikely]] {
      detail::fail<state_error>(
          "lease: empty: its batch was given back (reset, release_after or the end of its "
          "scope), moved to another lease, or never given (a pull that returned nothing)");
    }
    return *slot_;
  }

  friend Channel;
  lease(std::shared_ptr<Channel> channel, slot_type* slot) noexcept
      : channel_(std::move(channel)), slot_(slot) {}

  std::shared_ptr<Channel> channel_;
  slot_type* slot_ = nullptr;
};

}  // namespace crema
