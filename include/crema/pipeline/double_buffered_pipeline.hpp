#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/deadline.hpp>
#include <crema/core/error.hpp>
#include <crema/pipeline/detail/delivery.hpp>
#include <crema/pipeline/detail/pipeline_engine.hpp>
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

#include <cstddef>
#include <iterator>
#include <memory>
#include <utility>

namespace crema {

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
/// `pull_status::timeout`, and `stats().held_back_by` names it. A source or transform busy with one
/// record for `hang_timeout` is named by a waiting `pull()`, `pull_for` or `pull_until` the same
/// way (producer and record), however short each wait.
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
  using engine = detail::pipeline_engine<Source, Transform>;
  using clock = std::chrono::steady_clock;
  using wait_kind = detail::wait_kind;

 public:
  using lease_type = typename engine::lease_type;
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
      return with_engine([&](engine& owner) {
        return owner.pull(index_, wait_kind::stall_checked, clock::time_point::max()).batch;
      });
    }
    /// @brief The next batch if one is ready now (else an empty lease); never blocks.
    /// @throws crema::pipeline_error if a source or transform failed
    [[nodiscard]] lease_type try_pull() {
      return with_engine(
          [&](engine& owner) { return owner.pull(index_, wait_kind::none, clock::now()).batch; });
    }
    /// @brief The next batch, waiting for it until `deadline` at most.
    /// @return the status (`ready`, `end`, `stopped` or `timeout`) and the batch if one came
    /// @throws crema::pipeline_error if a source or transform failed or has been busy with one
    ///         record for `hang_timeout`, or if this consumer holds every one of its slots
    template <class Duration>
    [[nodiscard]] pull_result_type pull_until(std::chrono::time_point<clock, Duration> deadline) {
      return with_result([&](engine& owner) {
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
    consumer_ref(std::weak_ptr<engine> owner, std::size_t index) noexcept
        : engine_(std::move(owner)), index_(index) {}

    // The pull keeps the pipeline's state alive while it runs, so a consumer woken by the
    // destructor never touches freed memory.
    template <class Pull>
    lease_type with_engine(Pull&& pull) {
      const std::shared_ptr<engine> owner = engine_.lock();
      return owner ? pull(*owner) : lease_type{};
    }
    template <class Pull>
    pull_result_type with_result(Pull&& pull) {
      const std::shared_ptr<engine> owner = engine_.lock();
      return owner ? pull(*owner) : pull_result_type{pull_status::stopped, {}};
    }

    std::weak_ptr<engine> engine_;
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
      : engine_(std::make_shared<engine>(std::move(source), std::move(transform), options)) {
    engine_->start();
  }
  double_buffered_pipeline(const double_buffered_pipeline&) = delete;
  double_buffered_pipeline& operator=(const double_buffered_pipeline&) = delete;

  /// @brief Stops the pipeline and waits for its producers; outstanding leases stay valid.
  /// Consumers still blocked in a pull return an empty lease.
  ~double_buffered_pipeline() { stop(); }

  /// @return consumer `index`'s handle
  /// @throws crema::config_error if `index` is not below `options().consumers`
  [[nodiscard]] consumer_ref consumer(std::size_t index = 0) {
    if (index >= engine_->consumers()) {
      detail::fail<config_error>("pipeline: consumer {} does not exist, there are {}", index,
                                 engine_->consumers());
    }
    return consumer_ref(engine_, index);
  }

  /// @brief Stops the producers and wakes every consumer (their pulls return nothing), then
  /// waits for the producers to finish their current record. Thread-safe, idempotent; returns
  /// promptly from any state. Called from inside a transform or source (a producer's thread), it
  /// requests the stop and returns without waiting, since the caller is one of those producers.
  void stop() { engine_->stop_and_wait(); }

  /// @brief Where the pipeline stands, to save at a checkpoint and give back as
  /// `pipeline_options::resume_from`: the first batch no consumer has been given yet (records
  /// the producers read ahead are not counted). Call it between pulls, while no consumer pulls.
  /// @throws crema::config_error unless the pipeline is `ordered` and reads its own reader
  [[nodiscard]] pipeline_position position() const { return engine_->position(); }

  /// @return a snapshot of the counters; thread-safe, never blocks
  [[nodiscard]] pipeline_stats stats() const { return engine_->snapshot(); }
  /// @return the options the pipeline was built with
  [[nodiscard]] const pipeline_options& options() const noexcept { return engine_->options(); }

 private:
  std::shared_ptr<engine> engine_;
};

}  // namespace crema
