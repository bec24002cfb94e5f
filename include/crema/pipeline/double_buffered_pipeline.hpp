#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/detail/deadline.hpp>
#include <crema/core/error.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/batch_slot.hpp>
#include <crema/pipeline/detail/channel.hpp>
#include <crema/pipeline/detail/claim_sequencer.hpp>
#include <crema/pipeline/detail/producer_task.hpp>
#include <crema/pipeline/detail/warm_refill.hpp>
#include <crema/pipeline/generator_source.hpp>
#include <crema/pipeline/indexed_source.hpp>
#include <crema/pipeline/lease.hpp>
#include <crema/pipeline/pipeline_options.hpp>
#include <crema/pipeline/sample_context.hpp>
#include <crema/pipeline/source.hpp>
#include <crema/pipeline/source_registry.hpp>
#include <crema/pipeline/stats.hpp>
#include <crema/pipeline/transform.hpp>
#include <crema/pipeline/vector_source.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace crema {
namespace detail {

// The reader a pipeline pulls records from; shared through a source_registry by pipelines whose
// sources have the same key. Its lock serializes claims. Pipelines that share a reader share its
// passes, so they must agree on what a pass is: the mode is fixed by the first one.
template <class Source>
struct reader_body {
  reader_body(Source&& from, pipeline_mode chosen)
      : source(std::move(from)), key(source.key()), mode(chosen) {}
  std::mutex mutex;
  Source source;
  std::string key;
  const pipeline_mode mode;
  std::uint64_t epoch = 0;
  std::atomic<bool> exhausted{false};  // a single pass has reached the end; read without the lock
};

}  // namespace detail

/// @brief A prefetching producer/consumer pipeline: coroutine producers read records from a
/// source, transform them into preallocated batch slots, and hand the batches to one or several
/// consumers through lock-free free/full queue pairs.
///
/// Caffe's data reader without its thread classes and its hangs. Each consumer has `prefetch`
/// slots; a producer awaiting a free slot is suspended, not blocking a thread, so `producers`
/// coroutines share `threads` threads. A producer takes a slot, then claims the next
/// `batch_size` records (claims are made in the order of the batches' numbers, whatever the
/// schedule), then transforms them outside the reader's lock, then runs the batch's finishing
/// step (an upload, say) and hands it on.
///
/// Batches are the same on every run, whatever the producer, thread and consumer counts: the
/// source is cut into batches in order (batch g holds the records after those of batch g - 1),
/// and batch g goes to consumer g mod `consumers` as that consumer's batch g / `consumers`. Every
/// transform call gets a `sample_context` whose `rng()` is keyed by (seed, epoch, position), so
/// augmentations drawn from it are the same too. In `ordered` mode each consumer receives its
/// batches in that order; otherwise as they are finished.
///
/// Dealing in turn suits data-parallel solvers: each gets the same number of batches. So the
/// consumers of one pipeline must pull at about the same rate. One that stops pulling (or holds
/// its leases) holds the others back once its slots are full: `pull()` then throws a
/// `pipeline_error` naming it after `stall_timeout`, `pull_for` / `pull_until` return
/// `pull_status::timeout`, and `stats().held_back_by` names it.
///
/// Consumers pull on their own threads: `for (auto batch : pipe.consumer(i)) use(*batch);`; the
/// lease returns the slot when it dies. In `single_pass` mode each consumer's range ends once
/// every record has been delivered exactly once across all consumers. An exception from the
/// source, a transform or a finishing step stops the pipeline and reaches every consumer as a
/// `crema::pipeline_error` naming the record (its position in the pass, the pass, and the
/// source's key for it where the source has keys), with the original nested. The consumer first
/// gets the batches finished before the failure, the records before the failing one among them
/// (as a short batch), so with one producer no record read before the failure is lost; batches
/// other producers were still transforming are dropped. `stop()` (and the destructor) return
/// promptly from any state; a consumer blocked in a pull when the pipeline is destroyed gets an
/// empty lease.
///
/// `stats()` and `stop()` are thread-safe. Each consumer index is used by one thread at a time.
/// @tparam Source    a `record_source`, owned by the pipeline (or the shared reader)
/// @tparam Transform a `transform_for<Source::record_type>`: per item, returning it or filling
///                   it in place, or per batch object (`batch_transform`)
template <class Source, class Transform>
class double_buffered_pipeline {
  static_assert(record_source<Source>,
                "crema: a pipeline's Source must model crema::record_source: record_type, "
                "records_are_stable, next(), rewind(), shard(), position(), seek() and key()");
  static_assert(std::copy_constructible<Transform>,
                "crema: a pipeline's Transform must be copyable: each producer runs a copy");
  static_assert(transform_for<Transform, typename Source::record_type> ||
                    detail::names_unmakeable_item<Transform>,
                "crema: a pipeline's Transform must take the source's records: item = t(record), "
                "item = t(record, context), t(record, item&) or t(record, item&, context) with "
                "item_type, or t(record, batch&, context) with batch_type and make_batch");
  static_assert(!detail::names_unmakeable_item<Transform> ||
                    batch_transform<Transform, typename Source::record_type>,
                "crema: a per-item transform's item_type must be default-constructible, since "
                "items are made once per slot; give the transform a batch_type and a make_batch "
                "factory instead");

 public:
  using record_type = typename Source::record_type;
  using item_type = typename detail::item_type_of<Transform, record_type>::type;

 private:
  using slot_type = detail::batch_slot<Source, Transform>;
  using channel_type = detail::channel<slot_type>;
  using clock = std::chrono::steady_clock;
  struct core;

 public:
  using lease_type = lease<channel_type>;
  using pull_result_type = pull_result<lease_type>;

  /// @brief One consumer's handle: pull batches, or iterate over them. Cheap to copy. It refers
  /// to the pipeline weakly: once the pipeline is gone, pulls return nothing.
  /// One thread at a time per consumer index.
  class consumer_ref {
   public:
    /// @brief The next batch, waiting for it if need be:
    /// `while (auto batch = consumer.pull()) use(*batch);`. May block; allocates nothing in the
    /// steady state.
    /// @return a lease on the batch; an empty lease at the end of a single pass or after `stop()`
    /// @throws crema::pipeline_error if a source or transform failed, if this consumer holds
    ///         every one of its slots (waiting would never end), or if another consumer has held
    ///         this one back for `stall_timeout` (the message names it)
    [[nodiscard]] lease_type pull() {
      return with_core([&](core& owner) {
        return owner.pull(index_, wait_kind::stall_checked, clock::time_point::max()).batch;
      });
    }
    /// @brief The next batch if one is ready now (else an empty lease); never blocks.
    /// @throws crema::pipeline_error if a source or transform failed
    [[nodiscard]] lease_type try_pull() {
      return with_core(
          [&](core& owner) { return owner.pull(index_, wait_kind::none, clock::now()).batch; });
    }
    /// @brief The next batch, waiting for it until `deadline` at most.
    /// @return the status (`ready`, `end`, `stopped` or `timeout`) and the batch if one came
    /// @throws crema::pipeline_error if a source or transform failed, or if this consumer holds
    ///         every one of its slots
    template <class Duration>
    [[nodiscard]] pull_result_type pull_until(std::chrono::time_point<clock, Duration> deadline) {
      return with_result([&](core& owner) {
        return owner.pull(index_, wait_kind::until_deadline,
                          std::chrono::time_point_cast<clock::duration>(deadline));
      });
    }
    /// @brief The next batch, waiting for it for `timeout` at most; as `pull_until`.
    template <class Rep, class Period>
    [[nodiscard]] pull_result_type pull_for(std::chrono::duration<Rep, Period> timeout) {
      return pull_until(detail::deadline_after(timeout));
    }

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
    consumer_ref(std::weak_ptr<core> owner, std::size_t index) noexcept
        : core_(std::move(owner)), index_(index) {}

    // The pull keeps the pipeline's state alive while it runs, so a consumer woken by the
    // destructor never touches freed memory.
    template <class Pull>
    lease_type with_core(Pull&& pull) {
      const std::shared_ptr<core> owner = core_.lock();
      return owner ? pull(*owner) : lease_type{};
    }
    template <class Pull>
    pull_result_type with_result(Pull&& pull) {
      const std::shared_ptr<core> owner = core_.lock();
      return owner ? pull(*owner) : pull_result_type{pull_status::stopped, {}};
    }

    std::weak_ptr<core> core_;
    std::size_t index_;
  };

  /// @brief Builds the pipeline, makes its slots (and batch objects) and starts its producers.
  /// @param source    the records; sharded and positioned as the caller left it
  /// @param transform copied once per producer; a batch transform's `make_batch` is called on it
  ///                  once per slot, here
  /// @throws crema::config_error naming the field if a count is 0 or `stall_timeout` is not
  ///         positive, naming the counts and the bytes if the slots they make do not fit in this
  ///         machine's memory, or if the registry holds the source's key for another type of
  ///         source or another mode
  /// @throws crema::thread_error if the threads cannot be started (naming how many were made)
  double_buffered_pipeline(Source source, Transform transform, pipeline_options options)
      : core_(std::make_shared<core>(std::move(source), std::move(transform), options)) {
    core_->start();
  }
  double_buffered_pipeline(const double_buffered_pipeline&) = delete;
  double_buffered_pipeline& operator=(const double_buffered_pipeline&) = delete;

  /// @brief Stops the pipeline and waits for its producers; outstanding leases stay valid.
  /// Consumers still blocked in a pull return an empty lease.
  ~double_buffered_pipeline() { stop(); }

  /// @return consumer `index`'s handle
  /// @throws crema::config_error if `index` is not below `options().consumers`
  [[nodiscard]] consumer_ref consumer(std::size_t index = 0) {
    if (index >= core_->channels.size()) {
      detail::fail<config_error>("pipeline: consumer {} does not exist, there are {}", index,
                                 core_->channels.size());
    }
    return consumer_ref(core_, index);
  }

  /// @brief Stops the producers and wakes every consumer (their pulls return nothing), then
  /// waits for the producers to finish their current record. Thread-safe, idempotent; returns
  /// promptly from any state. Called from inside a transform or source (a producer's thread), it
  /// requests the stop and returns without waiting, since the caller is one of those producers.
  void stop() { core_->stop_and_wait(); }

  /// @return a snapshot of the counters; thread-safe, never blocks
  [[nodiscard]] pipeline_stats stats() const { return core_->snapshot(); }
  /// @return the options the pipeline was built with
  [[nodiscard]] const pipeline_options& options() const noexcept { return core_->options; }

 private:
  // How often a waiting consumer looks for producers held by slots parked in an incomplete group.
  static constexpr std::chrono::milliseconds kick_interval{2};

  enum class wait_kind {
    none,            // try_pull: take what is there
    until_deadline,  // pull_until: wait, then report a timeout
    stall_checked,   // pull: wait for ever, unless another consumer holds this one back
  };

  struct core {
    core(Source&& from, Transform&& prototype_transform, const pipeline_options& chosen)
        : options(validated(chosen)),
          prototype(std::move(prototype_transform)),
          suspensions(options.producers),
          claims(pool, options.producers),
          pool(options.threads) {
      body = make_body(std::move(from));
      channels.reserve(options.consumers);
      for (std::size_t consumer = 0; consumer < options.consumers; ++consumer) {
        std::size_t slot_index = 0;
        auto& made = channels.emplace_back(std::make_shared<channel_type>(
            options.prefetch,
            [&] {
              slot_type slot(options.batch_size, [&] {
                if constexpr (slot_type::holds_batch) {
                  return prototype.make_batch(
                      batch_context{consumer, slot_index, options.batch_size});
                }
              });
              slot.consumer = consumer;
              ++slot_index;
              return slot;
            },
            pool));
        // A consumer's release wakes a waiting producer once per half its slots, not once per
        // slot: the wake-up (a system call when the producer's thread sleeps) is the largest
        // cost left on the consumer's thread. Consumers kick before they wait.
        made->free_slots().wake_in_groups(std::max<std::size_t>(1, options.prefetch / 2));
      }
      pool.poll_when_idle([this](bool just_idle) { return poll_released_slots(just_idle); });
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
      if (chosen.stall_timeout <= std::chrono::milliseconds::zero()) {
        detail::fail<config_error>(
            "pipeline: stall_timeout must be positive (milliseconds::max() waits for ever), got "
            "{} ms",
            chosen.stall_timeout.count());
      }
      if (chosen.warm_refill_wait < std::chrono::microseconds::zero() ||
          chosen.warm_refill_wait > std::chrono::seconds(1)) {
        detail::fail<config_error>(
            "pipeline: warm_refill_wait must be from 0 to 1 s (0 never waits), got {} us",
            chosen.warm_refill_wait.count());
      }
      check_memory(chosen);
      return chosen;
    }

    // Counts that cannot fit are refused before anything is allocated: a slip of a digit would
    // otherwise end in std::bad_alloc, or in the machine swapping while the slots are made.
    static void check_memory(const pipeline_options& chosen) {
      constexpr std::size_t per_item = [] {
        if constexpr (slot_type::holds_batch) {
          return std::size_t{0};  // a batch object's own memory is its business
        } else {
          return sizeof(item_type);
        }
      }();
      constexpr std::size_t per_record =
          sizeof(const record_type*) + per_item + sizeof(detail::record_origin) +
          (Source::records_are_stable ? 0 : sizeof(typename slot_type::storage_type));
      // A producer: its transform, its coroutine frame and its counters.
      constexpr std::size_t per_producer = sizeof(Transform) + 1024;
      const auto slots = detail::checked_mul(chosen.consumers, chosen.prefetch);
      const auto records = slots ? detail::checked_mul(*slots, chosen.batch_size) : std::nullopt;
      const auto slot_bytes = records ? detail::checked_mul(*records, per_record) : std::nullopt;
      const auto producer_bytes = detail::checked_mul(chosen.producers, per_producer);
      const auto total = slot_bytes && producer_bytes
                             ? detail::checked_add(*slot_bytes, *producer_bytes)
                             : std::nullopt;
      const auto memory = detail::physical_memory_bytes();
      if (total && (!memory || *total <= *memory)) return;
      const std::string need =
          total ? fmt::format("{} bytes", *total) : std::string("more bytes than a size_t holds");
      const std::string have =
          memory ? fmt::format("the {} bytes of memory here", *memory) : std::string("any machine");
      detail::fail<config_error>(
          "pipeline: consumers {} x prefetch {} x batch_size {} records of {} bytes, and "
          "producers {} of {} bytes, need {}, more than {}",
          chosen.consumers, chosen.prefetch, chosen.batch_size, per_record, chosen.producers,
          per_producer, need, have);
    }

    std::shared_ptr<detail::reader_body<Source>> make_body(Source&& from) {
      using body_type = detail::reader_body<Source>;
      if (options.registry == nullptr) {
        return std::make_shared<body_type>(std::move(from), options.mode);
      }
      const std::string key = from.key();
      auto shared = options.registry->template find_or_make<body_type>(
          key, [&] { return std::make_shared<body_type>(std::move(from), options.mode); });
      if (shared->mode != options.mode) {
        detail::fail<config_error>(
            "pipeline: source {} is read by a {} pipeline; a {} pipeline cannot share its reader "
            "(give it another key or registry)",
            key, mode_name(shared->mode), mode_name(options.mode));
      }
      return shared;
    }

    static const char* mode_name(pipeline_mode mode) noexcept {
      return mode == pipeline_mode::repeat ? "repeating" : "single-pass";
    }

    void start() {
      {
        std::scoped_lock lock(done_mutex);
        running = options.producers;
        alive.store(options.producers, std::memory_order_relaxed);
      }
      for (std::size_t id = 0; id < options.producers; ++id) {
        pool.post(produce(id).coroutine);
      }
    }

    // -- producers ------------------------------------------------------------------------

    // A failure found while filling a slot, reported once the records before it are handed on.
    struct failure_note {
      std::exception_ptr cause;
      std::string message;
    };

    // Nothing escapes a producer: whatever goes wrong fails the run and reaches the consumers.
    detail::producer_task produce(std::size_t id) {
      try {
        std::optional<Transform> own;  // each producer's copy; a copy that throws fails the run
        try {
          own.emplace(prototype);
        } catch (...) {
          fail(std::current_exception(), describe([&] {
                 return fmt::format("pipeline: copying the transform for producer {} failed", id);
               }));
        }
        detail::warm_refill warm(options.warm_refill_wait);
        while (own && !stop_source.stop_requested()) {
          if (body->exhausted.load(std::memory_order_acquire)) break;  // a pass that is over
          // Turns deal the consumers in order; the batch's number comes with its slot, so every
          // number that has not been delivered holds a slot of its consumer.
          const std::uint64_t turn = turns.fetch_add(1, std::memory_order_relaxed);
          const std::size_t consumer = static_cast<std::size_t>(turn % channels.size());
          channel_type& target = *channels[consumer];
          if constexpr (slot_type::reuse == slot_reuse::most_recent) {
            if (warm.wait(&target, target.returned, [&] { return stop_source.stop_requested(); })) {
              warm_refills.fetch_add(1, std::memory_order_relaxed);
            }
          }
          const auto asked = clock::now();
          const acquired_slot<slot_type> acquired = co_await target.free_slots().acquire();
          if (acquired.suspended) {
            producer_wait_ns.fetch_add(elapsed_ns(asked), std::memory_order_relaxed);
            suspensions[id].fetch_add(1, std::memory_order_relaxed);
          }
          slot_type* slot = acquired.slot;
          if (slot == nullptr) break;  // stopped
          slot->sequence = target.numbered.fetch_add(1, std::memory_order_relaxed);
          const std::uint64_t ticket = slot->sequence * channels.size() + consumer;
          if (!co_await claims.turn(ticket)) {  // stopped
            target.free_slots().release(slot);
            break;
          }
          std::optional<failure_note> failure;
          const auto filling = clock::now();
          const bool handed_on = fill(*slot, ticket, id, *own, failure);
          if (handed_on) {
            target.handed_on.fetch_add(1, std::memory_order_relaxed);
            batches_produced.fetch_add(1, std::memory_order_relaxed);
            records_produced.fetch_add(slot->size, std::memory_order_relaxed);
            if constexpr (slot_type::reuse == slot_reuse::most_recent) {
              warm.handing_on(&target, target.returned.load(std::memory_order_acquire),
                              clock::now() - filling);
            }
            target.push(slot);
          } else {
            target.free_slots().release(slot);
          }
          if (failure) {
            fail(failure->cause, std::move(failure->message));
            break;
          }
          if (!handed_on) break;  // end of a single pass, or stop
        }
      } catch (...) {
        fail(std::current_exception(),
             describe([&] { return fmt::format("pipeline: producer {} failed", id); }));
      }
      finish_producer();
    }

    // Claims the records of batch `ticket` into `slot` (then lets the next ticket claim),
    // transforms them and finishes the batch; returns whether the slot holds a batch to hand on.
    // It holds none at the end of a single pass or on stop (size 0). On a failure, `failure`
    // says what failed, and the records before the failing one stay in the slot as a short
    // batch: no record read before a failure is lost.
    bool fill(slot_type& slot, std::uint64_t ticket, std::size_t producer, Transform& transform,
              std::optional<failure_note>& failure) {
      try {
        claim(slot);
      } catch (...) {
        // The origin of the record being read (none if the lock itself failed).
        const detail::record_origin at =
            slot.size < slot.origins.size() ? slot.origins[slot.size] : detail::record_origin{};
        failure = failure_note{std::current_exception(), describe([&] {
                                 return fmt::format(
                                     "pipeline: source {} failed reading record {} (pass {})",
                                     body->key, at.position, at.epoch);
                               })};
      }
      claims.done(ticket);
      std::size_t i = 0;
      try {
        sample_context context = context_for(slot, producer);
        if constexpr (prefetching_record_source<Source>) {
          if (slot.size > 0) Source::prefetch(slot.record(0));
        }
        for (; i < slot.size; ++i) {
          if constexpr (prefetching_record_source<Source>) {
            // The next record comes from memory while this one is transformed.
            if (i + 1 < slot.size) Source::prefetch(slot.record(i + 1));
          }
          if (stop_source.stop_requested()) {  // stop waits for one record, not a batch
            slot.size = 0;
            return false;
          }
          if constexpr (wants_context) {
            context.epoch = slot.origins[i].epoch;
            context.position = slot.origins[i].position;
            context.index = i;
          }
          run_transform(transform, slot, i, context);
        }
      } catch (...) {
        const detail::record_origin at = slot.origins[i];
        const std::string key = record_key(slot, i);  // empty if the key fails too
        failure = failure_note{std::current_exception(), describe([&] {
                                 return fmt::format(
                                     "pipeline: transform failed on record {} (pass {}) of {}{}",
                                     at.position, at.epoch, body->key, key);
                               })};
        slot.size = i;
      }
      if (slot.size == 0) return false;
      if constexpr (detail::finishing_batch<
                        typename detail::batch_type_of<Transform, record_type>::type>) {
        try {
          slot.batch->finish(slot.info());
        } catch (...) {
          if (!failure) {
            failure = failure_note{std::current_exception(), describe([&] {
                                     return fmt::format(
                                         "pipeline: finishing batch {} of consumer {} ({}, pass "
                                         "{} from record {}) failed",
                                         slot.sequence, slot.consumer, body->key, slot.epoch,
                                         slot.first_position);
                                   })};
          }
          return false;  // a batch whose finishing step failed is not handed on
        }
      }
      return true;
    }

    // Whether the transform is given a sample context (else filling one per record is skipped).
    static constexpr bool wants_context =
        slot_type::holds_batch || detail::takes_context<Transform, record_type>();

    sample_context context_for(const slot_type& slot, std::size_t producer) const noexcept {
      sample_context context;
      context.seed = options.seed;
      context.producer = producer;
      context.consumer = slot.consumer;
      context.sequence = slot.sequence;
      if constexpr (keyed_record_source<Source>) {
        detail::sample_context_keys::attach(
            context, &body->source, [](const void* source, const void* record) {
              return std::string(static_cast<const Source*>(source)->record_key(
                  *static_cast<const record_type*>(record)));
            });
      }
      return context;
    }

    void run_transform(Transform& transform, slot_type& slot, std::size_t i,
                       sample_context& context) {
      const auto& record = slot.record(i);  // a view of the slot's copy lives to the end here
      if constexpr (wants_context) detail::sample_context_keys::point_at(context, &record);
      if constexpr (slot_type::holds_batch) {
        std::invoke(transform, record, *slot.batch, std::as_const(context));
      } else {
        detail::transform_item(transform, record, slot.items[i], context);
      }
    }

    // " (key K)" for sources that name their records; empty when the source cannot say, even
    // if asking it throws: the error being reported matters more than its key.
    std::string record_key(const slot_type& slot, std::size_t i) const noexcept {
      if constexpr (keyed_record_source<Source>) {
        try {
          return fmt::format(" (key {})", body->source.record_key(slot.record(i)));
        } catch (...) {
          return {};
        }
      } else {
        (void)slot;
        (void)i;
        return {};
      }
    }

    // Under the reader's lock: the next `batch_size` records, rewinding in repeat mode. Each
    // record's origin is noted before it is read, so a failure names the record being read; a
    // source whose records do not stay valid has each copied into the slot before the next is
    // read. A stop is seen between records: a slow source holds a stop up by one record at most.
    void claim(slot_type& slot) {
      std::scoped_lock lock(body->mutex);
      slot.size = 0;
      slot.padding = 0;
      slot.epoch = body->epoch;
      slot.first_position = body->source.position();
      while (slot.size < options.batch_size) {
        if (stop_source.stop_requested()) {
          slot.size = 0;
          return;
        }
        detail::record_origin& origin = slot.origins[slot.size];
        origin = {body->epoch, body->source.position()};
        const record_type* record =
            body->exhausted.load(std::memory_order_relaxed) ? nullptr : body->source.next();
        if (record == nullptr) {
          if (options.mode == pipeline_mode::single_pass) {
            body->exhausted.store(true, std::memory_order_release);
            finish_last_batch(slot);
            break;
          }
          body->source.rewind();
          ++body->epoch;
          epochs.fetch_add(1, std::memory_order_relaxed);
          origin = {body->epoch, 0};
          record = body->source.next();
          if (record == nullptr) {
            detail::fail<pipeline_error>("pipeline: source {} has no records to repeat", body->key);
          }
        }
        if (slot.size == 0) {
          slot.epoch = origin.epoch;
          slot.first_position = origin.position;
        }
        slot.keep(*record);
        ++slot.size;
      }
    }

    // The last batch of a single pass, short of records: kept, dropped or padded, as asked.
    void finish_last_batch(slot_type& slot) {
      if (slot.size == 0 || slot.size == options.batch_size) return;
      if (options.last_batch == partial_batch::drop) {
        slot.size = 0;
      } else if (options.last_batch == partial_batch::pad) {
        const std::size_t records = slot.size;
        while (slot.size < options.batch_size) {
          const std::size_t repeat = (slot.size - records) % records;
          slot.origins[slot.size] = slot.origins[repeat];
          slot.keep(slot.record(repeat));
          ++slot.size;
        }
        slot.padding = options.batch_size - records;
      }
    }

    // The last producer out closes a finished single pass: each consumer learns its total, the
    // batches handed to it. Claims are made in ticket order and every claim after the end is
    // empty, so those are its numbers 0 .. total - 1.
    void finish_producer() noexcept {
      std::unique_lock lock(done_mutex);
      alive.fetch_sub(1, std::memory_order_relaxed);
      if (--running == 0 && !stop_source.stop_requested()) {
        try {
          for (auto& target : channels) {
            target->end_marker.sequence = target->handed_on.load(std::memory_order_relaxed);
            target->push(&target->end_marker);
          }
        } catch (...) {
          fail(std::current_exception(),
               describe([] { return std::string("pipeline: ending the pass failed"); }));
        }
      }
      done.notify_all();  // under the lock: the pipeline may be destroyed once it is released
    }

    // The message `make()` builds, or a plainer one should building it fail: describing an
    // error must never raise another.
    template <class Make>
    static std::string describe(Make&& make) noexcept {
      try {
        return make();
      } catch (...) {
      }
      try {
        return "pipeline: a producer failed";
      } catch (...) {
        return {};
      }
    }

    // Keeps the first error, a pipeline_error with `message` and `cause` nested in it, and stops.
    void fail(std::exception_ptr cause, std::string message) noexcept {
      std::exception_ptr wrapped;
      try {
        try {
          std::rethrow_exception(cause);
        } catch (...) {
          std::throw_with_nested(pipeline_error(message));
        }
      } catch (...) {
        wrapped = std::current_exception();  // the pipeline_error, or what stopped its making
      }
      {
        std::scoped_lock lock(error_mutex);
        if (!error) error = wrapped;
        failed.store(true, std::memory_order_release);
      }
      signal_stop();
    }

    void signal_stop() noexcept {
      if (!stop_source.request_stop()) return;
      claims.stop();
      for (auto& target : channels) target->stop();
    }

    void stop_and_wait() {
      signal_stop();
      if (pool.runs_this_thread()) return;  // a producer stopping its own pipeline
      std::unique_lock lock(done_mutex);
      done.wait(lock, [&] { return running == 0; });
    }

    // -- consumers ------------------------------------------------------------------------

    pull_result_type pull(std::size_t index, wait_kind kind, clock::time_point deadline) {
      const std::shared_ptr<channel_type>& owner = channels[index];
      channel_type& target = *owner;
      for (;;) {
        // After a failure, the batches finished before it are still delivered (in order, where
        // the pipeline is ordered); the error comes once nothing more can be.
        const bool failing = failed.load(std::memory_order_acquire);
        if (!failing && stop_source.stop_requested()) return {pull_status::stopped, {}};
        if (options.ordered) {
          slot_type*& waiting = target.reorder[target.next_sequence % options.prefetch];
          if (waiting != nullptr && waiting->sequence == target.next_sequence) {
            return deliver(owner, std::exchange(waiting, nullptr));
          }
        }
        if (target.total && target.delivered == *target.total) return {pull_status::end, {}};

        slot_type* slot = nullptr;
        if (failing) {
          if (!target.try_pop(slot)) rethrow_error();
        } else if (kind == wait_kind::none) {
          if (!target.try_pop(slot)) {
            kick_for(target);
            return {pull_status::timeout, {}};
          }
        } else {
          if (target.outstanding.load(std::memory_order_relaxed) == options.prefetch) {
            // Every slot of this consumer is leased: nothing can arrive, waiting would hang.
            detail::fail<pipeline_error>(
                "pipeline: consumer {} holds all {} of its slots; release a lease before pulling "
                "again",
                index, options.prefetch);
          }
          // A batch that is there is taken without a look at the producers: kicking them costs
          // a wake-up, which a consumer that keeps up should not pay.
          if (!target.try_pop(slot) && !wait_for_slot(index, target, kind, deadline, slot)) {
            return {pull_status::timeout, {}};
          }
        }
        if (slot == nullptr) continue;  // woken by stop: the checks above answer
        if (slot == &target.end_marker) {
          target.total = slot->sequence;
          continue;
        }
        if (options.ordered && slot->sequence != target.next_sequence) {
          // Every undelivered number holds one of this consumer's `prefetch` slots, so the
          // distance is below that.
          target.reorder[slot->sequence % options.prefetch] = slot;
          continue;
        }
        return deliver(owner, slot);
      }
    }

    // Waits for the consumer's next full slot until `deadline`. A plain pull waits for ever, but
    // looks every `stall_timeout` whether another consumer holds it back, and throws if so.
    bool wait_for_slot(std::size_t index, channel_type& target, wait_kind kind,
                       clock::time_point deadline, slot_type*& slot) {
      const auto asked = clock::now();
      target.pulling.store(true, std::memory_order_relaxed);
      struct finish_wait {
        core& owner;
        channel_type& target;
        clock::time_point asked;
        ~finish_wait() {
          target.pulling.store(false, std::memory_order_relaxed);
          owner.consumer_wait_ns.fetch_add(elapsed_ns(asked), std::memory_order_relaxed);
        }
      } finishing{*this, target, asked};
      const bool checks_stalls = kind == wait_kind::stall_checked &&
                                 options.stall_timeout != std::chrono::milliseconds::max();
      clock::time_point next_stall_check =
          checks_stalls ? detail::deadline_after(options.stall_timeout) : clock::time_point::max();
      for (;;) {
        // Producers may wait for slots released in a group not yet complete, on any consumer's
        // side (the claim this consumer needs may be behind them): let them go before sleeping,
        // and again every slice of the wait, since another consumer may park a slot meanwhile.
        kick_for(target);
        const clock::time_point until =
            std::min({deadline, next_stall_check, detail::deadline_after(kick_interval)});
        if (target.pop_until(slot, until)) return true;
        const auto now = clock::now();
        if (now >= deadline) return false;
        if (now < next_stall_check) continue;
        next_stall_check = detail::deadline_after(options.stall_timeout);
        if (const auto holder = holder_of(index)) {
          detail::fail<pipeline_error>(
              "pipeline: consumer {} waited {} ms for a batch while the producers wait for a "
              "free slot of consumer {} ({} queued, {} leased); the consumers of a pipeline must "
              "pull in turn, or stop it",
              index, elapsed_ns(asked) / 1'000'000, *holder, channels[*holder]->full_count(),
              channels[*holder]->outstanding.load(std::memory_order_relaxed));
        }
      }
    }

    // A consumer's kick, counted: the wake-ups it pays for.
    void kick_for(channel_type& consumer) {
      if (kick_all() != 0) consumer.wakeups.fetch_add(1, std::memory_order_relaxed);
    }

    std::size_t kick_all() {
      std::size_t handed = 0;
      for (const auto& each : channels) handed += each->free_slots().kick();
      return handed;
    }

    // -- idle producers poll for released slots --------------------------------------------

    // Waking a sleeping producer is a system call, the dearest thing left on a consumer's thread
    // (10 µs and more in a virtual machine, where it wakes a halted processor). So while the
    // consumers keep coming back, their releases wake nobody: one idle producer thread wakes by
    // itself now and then and hands the slots released meanwhile to the producers waiting for
    // them. It polls about as often as slots come back: a poll that finds none doubles the
    // interval, one that finds several shortens it, and once none came back for the longest
    // interval the consumers are away, polling stops, and releases wake producers again.
    static constexpr std::chrono::nanoseconds shortest_poll{20'000};
    static constexpr std::chrono::nanoseconds longest_poll{10'000'000};

    // Runs on one idle producer thread at a time (the pool's poller); the state below is its.
    std::chrono::nanoseconds poll_released_slots(bool just_idle) noexcept {
      try {
        return poll_interval_after(just_idle);
      } catch (...) {  // a queue that could not grow: the slots it held are lost, so stop
        fail(std::current_exception(),
             "pipeline: handing released slots to waiting producers failed");
        return std::chrono::nanoseconds::zero();
      }
    }

    std::chrono::nanoseconds poll_interval_after(bool just_idle) {
      if (stop_source.stop_requested()) {
        if (polling) end_polling();
        return std::chrono::nanoseconds::zero();
      }
      if (!polling) {
        polling = true;
        for (const auto& each : channels) each->free_slots().start_polling();
      }
      if (kick_all() != 0) {
        poll_learned = poll_interval;
        poll_interval = std::max(shortest_poll, poll_interval * 2 / 3);
      } else if (just_idle) {
        poll_interval = poll_learned;
      } else if (poll_interval * 3 / 2 > longest_poll) {
        end_polling();
        return std::chrono::nanoseconds::zero();
      } else {
        poll_interval = poll_interval * 3 / 2;
      }
      return poll_interval;
    }

    void end_polling() {
      polling = false;
      for (const auto& each : channels) each->free_slots().stop_polling();
    }

    // The consumer that holds consumer `waiting` back, if one does: every running producer
    // waits (for a slot, or for its turn to claim behind one that does), none waits for a slot
    // of `waiting`, and this one has the most producers waiting for its slots.
    std::optional<std::size_t> holder_of(std::size_t waiting) const {
      const std::size_t running_now = alive.load(std::memory_order_relaxed);
      if (running_now == 0 || channels[waiting]->full_count() != 0) return std::nullopt;
      if (waiting_producers(*channels[waiting]) != 0) return std::nullopt;
      std::size_t waiting_on_others = 0;
      std::optional<std::size_t> holder;
      std::size_t most = 0;
      for (std::size_t j = 0; j < channels.size(); ++j) {
        if (j == waiting) continue;
        const std::size_t count = waiting_producers(*channels[j]);
        waiting_on_others += count;
        if (count > most) {
          most = count;
          holder = j;
        }
      }
      if (!holder || waiting_on_others + claims.waiting() < running_now) return std::nullopt;
      return holder;
    }

    static std::size_t waiting_producers(channel_type& target) {
      return target.free_slots().waiting();
    }

    pull_result_type deliver(const std::shared_ptr<channel_type>& target, slot_type* slot) {
      ++target->next_sequence;
      ++target->delivered;
      target->outstanding.fetch_add(1, std::memory_order_relaxed);
      target->consumed.fetch_add(1, std::memory_order_relaxed);
      batches_consumed.fetch_add(1, std::memory_order_relaxed);
      return {pull_status::ready, channel_type::lease_of(target, slot)};
    }

    [[noreturn]] void rethrow_error() {
      std::scoped_lock lock(error_mutex);
      std::rethrow_exception(error);
    }

    pipeline_stats snapshot() const {
      pipeline_stats stats;
      stats.batches_produced = batches_produced.load(std::memory_order_relaxed);
      stats.records_produced = records_produced.load(std::memory_order_relaxed);
      stats.batches_consumed = batches_consumed.load(std::memory_order_relaxed);
      stats.epochs = epochs.load(std::memory_order_relaxed);
      stats.warm_refills = warm_refills.load(std::memory_order_relaxed);
      stats.consumer_wait =
          std::chrono::nanoseconds(consumer_wait_ns.load(std::memory_order_relaxed));
      stats.producer_wait =
          std::chrono::nanoseconds(producer_wait_ns.load(std::memory_order_relaxed));
      stats.suspensions_by_producer.reserve(suspensions.size());
      for (const auto& count : suspensions) {
        stats.suspensions_by_producer.push_back(count.load(std::memory_order_relaxed));
        stats.producer_suspensions += stats.suspensions_by_producer.back();
      }
      stats.consumers.reserve(channels.size());
      for (std::size_t i = 0; i < channels.size(); ++i) {
        channel_type& target = *channels[i];
        consumer_stats one;
        one.batches_consumed = target.consumed.load(std::memory_order_relaxed);
        one.queued_batches = target.full_count();
        one.leased_batches = target.outstanding.load(std::memory_order_relaxed);
        const std::int64_t free_now = target.free_slots().available();
        one.free_slots = free_now > 0 ? static_cast<std::size_t>(free_now) : 0;
        one.waiting_producers = waiting_producers(target);
        one.pulling = target.pulling.load(std::memory_order_relaxed);
        one.producer_wakeups = target.wakeups.load(std::memory_order_relaxed);
        stats.producer_wakeups += one.producer_wakeups;
        stats.queued_batches += one.queued_batches;
        stats.free_slots += one.free_slots;
        stats.waiting_producers += one.waiting_producers;
        if (one.pulling && !stats.held_back_by) stats.held_back_by = holder_of(i);
        stats.consumers.push_back(one);
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
    std::vector<std::shared_ptr<channel_type>> channels;
    std::stop_source stop_source;
    std::atomic<std::uint64_t> turns{0};  // deals the consumers to producers in turn

    std::mutex done_mutex;
    std::condition_variable done;
    std::size_t running = 0;            // producers not finished; under done_mutex
    std::atomic<std::size_t> alive{0};  // the same, readable without the lock

    std::mutex error_mutex;
    std::exception_ptr error;  // the first failure; under error_mutex
    std::atomic<bool> failed{false};

    std::atomic<std::uint64_t> batches_produced{0};
    std::atomic<std::uint64_t> records_produced{0};
    std::atomic<std::uint64_t> batches_consumed{0};
    std::atomic<std::uint64_t> epochs{0};
    std::atomic<std::uint64_t> warm_refills{0};
    std::atomic<std::uint64_t> consumer_wait_ns{0};
    std::atomic<std::uint64_t> producer_wait_ns{0};
    std::vector<std::atomic<std::uint64_t>> suspensions;

    bool polling = false;  // the poller's: releases leave waking to it
    std::chrono::nanoseconds poll_interval{shortest_poll};
    std::chrono::nanoseconds poll_learned{shortest_poll};  // the interval of the last find

    detail::claim_sequencer<thread_pool> claims;  // resumes its waiters on the pool
    thread_pool pool;  // last: its threads stop before anything they use goes
  };

  std::shared_ptr<core> core_;
};

}  // namespace crema
