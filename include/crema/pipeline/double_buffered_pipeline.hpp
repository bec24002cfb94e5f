#pragma once

#include <crema/core/error.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/batch_slot.hpp>
#include <crema/pipeline/detail/producer_task.hpp>
#include <crema/pipeline/lease.hpp>
#include <crema/pipeline/queue_pair.hpp>
#include <crema/pipeline/source.hpp>
#include <crema/pipeline/source_registry.hpp>
#include <crema/pipeline/stats.hpp>

#include <atomic>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace crema {

/// @brief What a pipeline does at the end of the source.
enum class pipeline_mode {
  repeat,       ///< training: rewind and go on, forever
  single_pass,  ///< evaluation: every record once across all consumers, then each range ends
};

/// @brief How a pipeline is built. Every count must be at least 1.
struct pipeline_options {
  std::size_t batch_size = 1;  ///< records per batch (1 moves single records, as Caffe's reader)
  std::size_t prefetch = 4;    ///< preallocated batch slots per consumer
  std::size_t producers = 1;   ///< producer coroutines (each with its own copy of the transform)
  std::size_t threads = 1;     ///< threads the producers run on (may be fewer than producers)
  std::size_t consumers = 1;   ///< consumers, one per device or solver; batches are dealt in turn
  pipeline_mode mode = pipeline_mode::repeat;
  bool ordered = false;  ///< each consumer sees its batches in source order, whatever the producers
  source_registry* registry = nullptr;  ///< share one reader with pipelines of the same source key
};

/// @brief A transform that fills a preallocated item in place: `transform(record, item)`.
/// It names its item type as `Transform::item_type`.
template <class Transform, class Record>
concept in_place_transform = requires {
  typename Transform::item_type;
}
&&std::invocable<Transform&, const Record&, typename Transform::item_type&>;

/// @brief A transform a pipeline can run on records of `Record`: in place, or returning the item.
template <class Transform, class Record>
concept transform_for = std::copy_constructible<Transform> &&
    (in_place_transform<Transform, Record> ||
     (std::invocable<Transform&, const Record&> &&
      std::is_move_assignable_v<std::invoke_result_t<Transform&, const Record&>>));

namespace detail {

template <class Transform, class Record>
struct item_type_of {
  using type = std::remove_cvref_t<std::invoke_result_t<Transform&, const Record&>>;
};
template <class Transform, class Record>
requires in_place_transform<Transform, Record>
struct item_type_of<Transform, Record> {
  using type = typename Transform::item_type;
};

// The reader a pipeline pulls records from; shared through a source_registry by pipelines whose
// sources have the same key. Its lock serializes pulls: producers take whole batches under it.
template <class Source>
struct reader_body {
  explicit reader_body(Source&& from) : source(std::move(from)), key(source.key()) {}
  std::mutex mutex;
  Source source;
  std::string key;
  std::uint64_t epoch = 0;
  std::atomic<bool> exhausted{false};  // a single pass has reached the end; read without the lock
};

template <class Source>
concept source_with_record_keys = requires(const Source& source,
                                           const typename Source::record_type& record) {
  { source.record_key(record) } -> std::convertible_to<std::string>;
};

}  // namespace detail

/// @brief A prefetching producer/consumer pipeline: coroutine producers read records from a
/// source, transform them into preallocated batch slots, and hand the batches to one or several
/// consumers through lock-free free/full queue pairs.
///
/// Caffe's data reader without its thread classes and its hangs. Each consumer has `prefetch`
/// slots; a producer awaiting a free slot is suspended, not blocking a thread, so `producers`
/// coroutines share `threads` threads. A producer first takes a slot, then claims the next
/// `batch_size` records under the reader's lock, then runs its transform outside the lock.
/// Batches are dealt to consumers in turn.
///
/// Consumers pull on their own threads: `for (auto batch : pipe.consumer(i)) use(*batch);`; the
/// lease returns the slot when it dies. In `single_pass` mode each consumer's range ends once
/// every record has been delivered exactly once across all consumers. An exception from the
/// source or a transform stops the pipeline and reaches every consumer's next pull as a
/// `crema::pipeline_error` naming the record, with the original nested. `stop()` (and the
/// destructor) return promptly from any state, after every producer has finished.
///
/// `stats()` and `stop()` are thread-safe. Each consumer index is used by one thread at a time.
/// @tparam Source    a `record_source`, owned by the pipeline (or the shared reader)
/// @tparam Transform a `transform_for<Source::record_type>`: `item = transform(record)`, or
///                   `transform(record, item)` with `Transform::item_type`
template <record_source Source, transform_for<typename Source::record_type> Transform>
class double_buffered_pipeline {
 public:
  using record_type = typename Source::record_type;
  using item_type = typename detail::item_type_of<Transform, record_type>::type;

 private:
  using slot_type = detail::batch_slot<record_type, item_type>;
  struct core;

 public:
  /// @brief What a consumer receives from the pipeline.
  class channel : public queue_pair<slot_type, thread_pool> {
   public:
    using item_type = double_buffered_pipeline::item_type;
    using queue_pair<slot_type, thread_pool>::queue_pair;

    /// @brief Takes back a slot a lease held.
    void release(slot_type* slot) {
      outstanding.fetch_sub(1, std::memory_order_relaxed);
      this->free_slots().release(slot);
    }

   private:
    friend class double_buffered_pipeline;
    friend struct double_buffered_pipeline::core;
    // Claimed under the reader's lock (several producers), read by the consumer afterwards.
    std::uint64_t claimed = 0;
    std::atomic<std::size_t> outstanding{0};  // leases the consumer holds
    // The consumer's own state: one thread at a time.
    std::vector<slot_type*> reorder;
    std::uint64_t next_sequence = 0;
    std::uint64_t delivered = 0;
    std::optional<std::uint64_t> total;
    slot_type end_marker{0, false};  // pushed once every batch is out; `sequence` is the total
  };
  using lease_type = lease<channel>;

  /// @brief One consumer's handle: pull batches, or iterate over them. Cheap to copy; valid while
  /// the pipeline lives. One thread at a time per consumer index.
  class consumer_ref {
   public:
    /// @brief The next batch, waiting for it if need be:
    /// `while (auto batch = consumer.pull()) use(*batch);`
    /// @return a lease on the batch; an empty lease at the end of a single pass or after `stop()`
    /// @throws crema::pipeline_error if a source or transform failed, or if this consumer holds
    ///         every one of its slots (waiting would never end)
    [[nodiscard]] lease_type pull() { return core_->pull(index_, true); }
    /// @brief The next batch if one is ready now (else an empty lease); never blocks.
    /// @throws crema::pipeline_error if a source or transform failed
    [[nodiscard]] lease_type try_pull() { return core_->pull(index_, false); }

    class iterator {
     public:
      using value_type = lease_type;
      using difference_type = std::ptrdiff_t;
      iterator() = default;
      explicit iterator(consumer_ref* owner) : owner_(owner) { ++*this; }
      /// @brief Moves the lease out (range-for: `for (auto batch : pipe.consumer(0))`).
      lease_type operator*() noexcept { return std::move(current_); }
      iterator& operator++() {
        current_ = owner_->pull();
        return *this;
      }
      void operator++(int) { ++*this; }
      friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept {
        return !it.current_;
      }

     private:
      consumer_ref* owner_ = nullptr;
      lease_type current_;
    };
    /// @brief Pulls the first batch; iteration ends where `pull()` returns nothing.
    [[nodiscard]] iterator begin() { return iterator{this}; }
    [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

   private:
    friend class double_buffered_pipeline;
    consumer_ref(core* owner, std::size_t index) noexcept : core_(owner), index_(index) {}
    core* core_;
    std::size_t index_;
  };

  /// @brief Builds the pipeline and starts its producers.
  /// @param source    the records; sharded and positioned as the caller left it
  /// @param transform copied once per producer
  /// @throws crema::config_error naming the field if a count is 0, or if the registry holds the
  ///         source's key for another type of source
  double_buffered_pipeline(Source source, Transform transform, pipeline_options options)
      : core_(std::make_unique<core>(std::move(source), std::move(transform), options)) {
    core_->start();
  }
  double_buffered_pipeline(const double_buffered_pipeline&) = delete;
  double_buffered_pipeline& operator=(const double_buffered_pipeline&) = delete;

  /// @brief Stops the pipeline and waits for its producers; outstanding leases stay valid.
  ~double_buffered_pipeline() { stop(); }

  /// @return consumer `index`'s handle
  /// @throws crema::config_error if `index` is not below `options().consumers`
  [[nodiscard]] consumer_ref consumer(std::size_t index = 0) {
    if (index >= core_->channels.size()) {
      detail::fail<config_error>("pipeline: consumer {} does not exist, there are {}", index,
                                 core_->channels.size());
    }
    return consumer_ref(core_.get(), index);
  }

  /// @brief Stops the producers and wakes every consumer (their pulls return nothing), then
  /// waits for the producers to finish their current batch. Thread-safe, idempotent; returns
  /// promptly from any state (a transform already running is waited for).
  void stop() { core_->stop_and_wait(); }

  /// @return a snapshot of the counters; thread-safe, never blocks
  [[nodiscard]] pipeline_stats stats() const { return core_->snapshot(); }
  /// @return the options the pipeline was built with
  [[nodiscard]] const pipeline_options& options() const noexcept { return core_->options; }
  /// @return the producers' suspension counts so far, one per producer
  [[nodiscard]] std::vector<std::uint64_t> producer_suspensions() const {
    std::vector<std::uint64_t> counts;
    for (const auto& count : core_->suspensions) counts.push_back(count.load());
    return counts;
  }

 private:
  using clock = std::chrono::steady_clock;

  struct core {
    core(Source&& from, Transform&& prototype_transform, const pipeline_options& chosen)
        : options(validated(chosen)),
          prototype(std::move(prototype_transform)),
          suspensions(options.producers),
          pool(options.threads) {
      body = make_body(std::move(from));
      channels.reserve(options.consumers);
      for (std::size_t i = 0; i < options.consumers; ++i) {
        auto made = std::make_shared<channel>(
            options.prefetch,
            [&] { return slot_type(options.batch_size, !Source::records_are_stable); }, pool);
        made->reorder.assign(options.prefetch, nullptr);
        channels.push_back(std::move(made));
      }
    }

    static pipeline_options validated(const pipeline_options& chosen) {
      const auto check = [](const char* field, std::size_t value) {
        if (value == 0) detail::fail<config_error>("pipeline: {} must be at least 1, got 0", field);
      };
      check("batch_size", chosen.batch_size);
      check("prefetch", chosen.prefetch);
      check("producers", chosen.producers);
      check("threads", chosen.threads);
      check("consumers", chosen.consumers);
      return chosen;
    }

    std::shared_ptr<detail::reader_body<Source>> make_body(Source&& from) {
      using body_type = detail::reader_body<Source>;
      if (options.registry == nullptr) return std::make_shared<body_type>(std::move(from));
      const std::string key = from.key();
      return options.registry->template find_or_make<body_type>(
          key, [&] { return std::make_shared<body_type>(std::move(from)); });
    }

    void start() {
      running = options.producers;
      for (std::size_t id = 0; id < options.producers; ++id) {
        pool.post(produce(id).coroutine);
      }
    }

    // -- producers ------------------------------------------------------------------------

    detail::producer_task produce(std::size_t id) {
      {
        std::optional<Transform> own;  // each producer's copy; a copy that throws fails the run
        try {
          own.emplace(prototype);
        } catch (...) {
          fail(fmt::format("pipeline: copying the transform for producer {} failed", id));
        }
        std::size_t turn = id;
        while (own && !stop_source.stop_requested()) {
          Transform& transform = *own;
          if (body->exhausted.load(std::memory_order_acquire)) break;  // a pass that is over
          channel& target = *channels[turn++ % channels.size()];
          const auto asked = clock::now();
          const acquired_slot<slot_type> acquired = co_await target.free_slots().acquire();
          if (acquired.suspended) {
            producer_wait_ns.fetch_add(elapsed_ns(asked), std::memory_order_relaxed);
            suspensions[id].fetch_add(1, std::memory_order_relaxed);
          }
          slot_type* slot = acquired.slot;
          if (slot == nullptr) break;  // stopped
          if (!fill(*slot, target, transform)) {
            target.free_slots().release(slot);
            break;
          }
          batches_produced.fetch_add(1, std::memory_order_relaxed);
          records_produced.fetch_add(slot->size, std::memory_order_relaxed);
          target.push(slot);
        }
      }
      finish_producer();
    }

    // Claims the next records into `slot` and transforms them. Returns false, leaving the slot
    // to be released, when there is nothing more to do: end of a single pass, stop, or failure.
    bool fill(slot_type& slot, channel& target, Transform& transform) {
      try {
        claim(slot, target);
      } catch (...) {
        fail(fmt::format("pipeline: source {} failed after position {}", body->key,
                         slot.first_position + slot.size));
        return false;
      }
      if (slot.size == 0) return false;
      std::size_t i = 0;
      try {
        for (; i < slot.size; ++i) {
          if (stop_source.stop_requested()) return false;  // stop waits for one record, not a batch
          if constexpr (in_place_transform<Transform, record_type>) {
            std::invoke(transform, *slot.records[i], slot.items[i]);
          } else {
            slot.items[i] = std::invoke(transform, *slot.records[i]);
          }
        }
      } catch (...) {
        fail(fmt::format("pipeline: transform failed on record {} of {}{}", slot.first_position + i,
                         body->key, record_key(*slot.records[i])));
        return false;
      }
      return true;
    }

    std::string record_key(const record_type& record) const {
      if constexpr (detail::source_with_record_keys<Source>) {
        return fmt::format(" (key {})", body->source.record_key(record));
      } else {
        (void)record;
        return {};
      }
    }

    // Under the reader's lock: the next `batch_size` records, rewinding in repeat mode. The
    // consumer's batch number is taken here too, so numbers follow the source order.
    void claim(slot_type& slot, channel& target) {
      std::scoped_lock lock(body->mutex);
      slot.size = 0;
      slot.epoch = body->epoch;
      slot.first_position = body->source.position();
      if (stop_source.stop_requested()) return;
      while (slot.size < options.batch_size) {
        const record_type* record =
            body->exhausted.load(std::memory_order_relaxed) ? nullptr : body->source.next();
        if (record == nullptr) {
          if (options.mode == pipeline_mode::single_pass) {
            body->exhausted.store(true, std::memory_order_release);
            break;
          }
          body->source.rewind();
          ++body->epoch;
          epochs.fetch_add(1, std::memory_order_relaxed);
          record = body->source.next();
          if (record == nullptr) {
            detail::fail<pipeline_error>("pipeline: source {} has no records to repeat", body->key);
          }
          if (slot.size == 0) {
            slot.epoch = body->epoch;
            slot.first_position = 0;
          }
        }
        if constexpr (Source::records_are_stable) {
          slot.records[slot.size] = record;
        } else {
          slot.copies[slot.size] = *record;
          slot.records[slot.size] = &slot.copies[slot.size];
        }
        ++slot.size;
      }
      if (slot.size > 0) slot.sequence = target.claimed++;
    }

    // The last producer out closes a finished single pass: each consumer learns its total.
    void finish_producer() {
      std::unique_lock lock(done_mutex);
      if (--running == 0 && !stop_source.stop_requested()) {
        for (auto& target : channels) {
          target->end_marker.sequence = target->claimed;
          target->push(&target->end_marker);
        }
      }
      done.notify_all();  // under the lock: the pipeline may be destroyed once it is released
    }

    // Called in a catch block: keeps the first error, nested in a pipeline_error, and stops.
    void fail(const std::string& message) noexcept {
      try {
        std::throw_with_nested(pipeline_error(message));
      } catch (...) {
        std::scoped_lock lock(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_release);
      }
      signal_stop();
    }

    void signal_stop() {
      if (!stop_source.request_stop()) return;
      for (auto& target : channels) target->stop();
    }

    void stop_and_wait() {
      signal_stop();
      std::unique_lock lock(done_mutex);
      done.wait(lock, [&] { return running == 0; });
    }

    // -- consumers ------------------------------------------------------------------------

    lease_type pull(std::size_t index, bool wait) {
      const std::shared_ptr<channel>& source_channel = channels[index];
      channel& target = *source_channel;
      for (;;) {
        rethrow_error();
        if (stop_source.stop_requested()) return {};
        if (options.ordered) {
          slot_type*& waiting = target.reorder[target.next_sequence % options.prefetch];
          if (waiting != nullptr && waiting->sequence == target.next_sequence) {
            return deliver(source_channel, std::exchange(waiting, nullptr));
          }
        }
        if (target.total && target.delivered == *target.total) return {};

        slot_type* slot = nullptr;
        if (wait && target.outstanding.load(std::memory_order_relaxed) == options.prefetch) {
          // Every slot of this consumer is leased: nothing can arrive, waiting would hang.
          detail::fail<pipeline_error>(
              "pipeline: consumer {} holds all {} of its slots; release a lease before pulling "
              "again",
              index, options.prefetch);
        }
        if (wait) {
          const auto asked = clock::now();
          slot = target.pop();
          consumer_wait_ns.fetch_add(elapsed_ns(asked), std::memory_order_relaxed);
        } else if (!target.try_pop(slot)) {
          return {};
        }
        if (slot == nullptr) continue;  // woken by stop: the checks above answer
        if (slot == &target.end_marker) {
          target.total = slot->sequence;
          continue;
        }
        if (options.ordered && slot->sequence != target.next_sequence) {
          // At most `prefetch` slots exist for this consumer, so the distance is below that.
          target.reorder[slot->sequence % options.prefetch] = slot;
          continue;
        }
        return deliver(source_channel, slot);
      }
    }

    lease_type deliver(const std::shared_ptr<channel>& target, slot_type* slot) {
      ++target->next_sequence;
      ++target->delivered;
      target->outstanding.fetch_add(1, std::memory_order_relaxed);
      batches_consumed.fetch_add(1, std::memory_order_relaxed);
      return lease_type(target, slot);
    }

    void rethrow_error() {
      if (!failed.load(std::memory_order_acquire)) return;
      std::scoped_lock lock(error_mutex);
      std::rethrow_exception(error);
    }

    pipeline_stats snapshot() const {
      pipeline_stats stats;
      stats.batches_produced = batches_produced.load(std::memory_order_relaxed);
      stats.records_produced = records_produced.load(std::memory_order_relaxed);
      stats.batches_consumed = batches_consumed.load(std::memory_order_relaxed);
      stats.epochs = epochs.load(std::memory_order_relaxed);
      stats.consumer_wait =
          std::chrono::nanoseconds(consumer_wait_ns.load(std::memory_order_relaxed));
      stats.producer_wait =
          std::chrono::nanoseconds(producer_wait_ns.load(std::memory_order_relaxed));
      for (const auto& count : suspensions) stats.producer_suspensions += count.load();
      for (const auto& target : channels) {
        stats.queued_batches += target->full_count();
        const auto free_now = target->free_slots().available();
        if (free_now > 0) stats.free_slots += static_cast<std::size_t>(free_now);
        if (free_now < 0) stats.waiting_producers += static_cast<std::size_t>(-free_now);
      }
      return stats;
    }

    static std::uint64_t elapsed_ns(clock::time_point since) {
      return static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - since).count());
    }

    const pipeline_options options;
    const Transform prototype;
    std::shared_ptr<detail::reader_body<Source>> body;
    std::vector<std::shared_ptr<channel>> channels;
    std::stop_source stop_source;

    std::mutex done_mutex;
    std::condition_variable done;
    std::size_t running = 0;  // producers not finished; under done_mutex

    std::mutex error_mutex;
    std::exception_ptr error;  // the first failure; under error_mutex
    std::atomic<bool> failed{false};

    std::atomic<std::uint64_t> batches_produced{0};
    std::atomic<std::uint64_t> records_produced{0};
    std::atomic<std::uint64_t> batches_consumed{0};
    std::atomic<std::uint64_t> epochs{0};
    std::atomic<std::uint64_t> consumer_wait_ns{0};
    std::atomic<std::uint64_t> producer_wait_ns{0};
    std::vector<std::atomic<std::uint64_t>> suspensions;

    thread_pool pool;  // last: its threads stop before anything they use goes
  };

  std::unique_ptr<core> core_;
};

}  // namespace crema
