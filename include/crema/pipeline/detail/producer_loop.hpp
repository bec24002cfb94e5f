#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/error.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/batch_slot.hpp>
#include <crema/pipeline/detail/channel.hpp>
#include <crema/pipeline/detail/claim_sequencer.hpp>
#include <crema/pipeline/detail/hang_watch.hpp>
#include <crema/pipeline/detail/pipeline_counters.hpp>
#include <crema/pipeline/detail/producer_task.hpp>
#include <crema/pipeline/detail/reader.hpp>
#include <crema/pipeline/detail/run_state.hpp>
#include <crema/pipeline/detail/warm_refill.hpp>
#include <crema/pipeline/pipeline_options.hpp>
#include <crema/pipeline/sample_context.hpp>
#include <crema/pipeline/source.hpp>
#include <crema/pipeline/transform.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace crema::detail {

// What each producer coroutine does, again and again: take a free slot of the consumer whose
// turn it is, claim the next `batch_size` records into it (in the order of the batches'
// numbers), transform them outside the reader's lock, finish the batch, hand it on. Whatever
// goes wrong fails the run (`run_state::fail`) naming the record; nothing escapes a producer.
template <class Source, class Transform>
class producer_loop {
 public:
  using record_type = typename Source::record_type;
  using slot_type = batch_slot<Source, Transform>;
  using channel_type = channel<slot_type>;
  using clock = std::chrono::steady_clock;

  // The parts it uses, all outliving the producers; `first_batch` is the number of the first
  // batch it deals (0, or where a resumed pipeline starts).
  producer_loop(const pipeline_options& options, const Transform& prototype,
                reader_body<Source>& reader,
                std::span<const std::shared_ptr<channel_type>> channels,
                claim_sequencer<thread_pool>& claims, run_state& run, pipeline_counters& counters,
                hang_watch& hangs, std::uint64_t first_batch) noexcept
      : options_(options),
        prototype_(prototype),
        reader_(reader),
        channels_(channels),
        claims_(claims),
        run_(run),
        counters_(counters),
        hangs_(hangs),
        stopping_(run.token()),
        turns_(first_batch),
        starts_(channels.size() * options.prefetch) {}

  // Where batch `ticket` starts: noted when its claim began, or, for a batch not yet claimed
  // (claims go in ticket order, so it is the next), where the reader stands. Exact for the
  // lowest batch not yet delivered: a batch of its consumer claimed after it either holds one of
  // that consumer's `prefetch` slots, so too few of them are between to come round to its note,
  // or read nothing it keeps (the pass was over, or the run stopping) and put back the note it
  // replaced when it gave its slot back; for such a batch, the reader's position serves.
  pipeline_position start_of(std::uint64_t ticket) const {
    std::scoped_lock lock(reader_.mutex);
    const claim_start& noted = starts_[ticket % starts_.size()];
    if (noted.ticket == ticket) return {ticket, noted.epoch, noted.position};
    return {ticket, reader_.epoch, reader_.source.position()};
  }

  // Producer `id`'s coroutine; it starts when posted to the pool, and says `run_state` when it
  // ends.
  producer_task produce(std::size_t id) {
    try {
      std::optional<Transform> own;  // each producer's copy; a copy that throws fails the run
      try {
        own.emplace(prototype_);
      } catch (...) {
        run_.fail(std::current_exception(), failure_message([&] {
                    return crema::detail::format(
                        "pipeline: copying the transform for producer {} failed", id);
                  }));
      }
      warm_refill warm(options_.warm_refill_wait);
      producer_progress& progress = hangs_.of(id);
      while (own && !stopping_.stop_requested()) {
        if (reader_.exhausted.load(std::memory_order_acquire)) break;  // a pass that is over
        // Turns deal the consumers in order; the batch's number comes with its slot, so every
        // number that has not been delivered holds a slot of its consumer.
        const std::uint64_t turn = turns_.fetch_add(1, std::memory_order_relaxed);
        const std::size_t consumer = static_cast<std::size_t>(turn % channels_.size());
        channel_type& target = *channels_[consumer];
        if constexpr (slot_type::reuse == slot_reuse::most_recent) {
          if (warm.wait(&target, target.returned, [&] { return stopping_.stop_requested(); })) {
            counters_.warm_refills.fetch_add(1, std::memory_order_relaxed);
          }
        }
        const auto asked = clock::now();
        const acquired_slot<slot_type> acquired = co_await target.free_slots().acquire();
        if (acquired.suspended) {
          counters_.producer_wait_ns.fetch_add(pipeline_counters::elapsed_ns(asked),
                                               std::memory_order_relaxed);
          counters_.suspensions[id].fetch_add(1, std::memory_order_relaxed);
        }
        slot_type* slot = acquired.slot;
        if (slot == nullptr) break;  // stopped
        slot->sequence = target.numbered.fetch_add(1, std::memory_order_relaxed);
        const std::uint64_t ticket = slot->sequence * channels_.size() + consumer;
        if (!co_await claims_.turn(ticket)) {  // stopped
          target.free_slots().release(slot);
          break;
        }
        std::optional<failure_note> failure;
        const auto filling = clock::now();
        const bool handed_on = fill(*slot, ticket, id, *own, progress, failure);
        progress.begin(producer_phase::waiting, ticket);
        if (handed_on) {
          target.handed_on.fetch_add(1, std::memory_order_relaxed);
          counters_.batches_produced.fetch_add(1, std::memory_order_relaxed);
          counters_.records_produced.fetch_add(slot->size, std::memory_order_relaxed);
          if constexpr (slot_type::reuse == slot_reuse::most_recent) {
            warm.handing_on(&target, target.returned.load(std::memory_order_acquire),
                            clock::now() - filling);
          }
          target.push_batch(slot);
        } else {
          target.free_slots().release(slot);
        }
        if (failure) {
          run_.fail(failure->cause, std::move(failure->message));
          break;
        }
        if (!handed_on) break;  // end of a single pass, or stop
      }
    } catch (...) {
      run_.fail(std::current_exception(), failure_message([&] {
                  return crema::detail::format("pipeline: producer {} failed", id);
                }));
    }
    finish_producer();
  }

 private:
  // Where a batch's claim began: the reader's pass and position then.
  struct claim_start {
    std::uint64_t ticket = ~std::uint64_t{0};  // none
    std::uint64_t epoch = 0;
    record_position position = 0;
  };

  // A failure found while filling a slot, reported once the records before it are handed on.
  struct failure_note {
    std::exception_ptr cause;
    std::string message;
  };

  // Whether the transform is given a sample context (else filling one per record is skipped).
  static constexpr bool wants_context =
      slot_type::holds_batch || takes_context<Transform, record_type>();

  // Claims the records of batch `ticket` into `slot` (then lets the next ticket claim),
  // transforms them and finishes the batch; returns whether the slot holds a batch to hand on.
  // It holds none at the end of a single pass or on stop (size 0). On a failure, `failure`
  // says what failed, and the records before the failing one stay in the slot as a short
  // batch: no record read before a failure is lost.
  bool fill(slot_type& slot, std::uint64_t ticket, std::size_t producer, Transform& transform,
            producer_progress& progress, std::optional<failure_note>& failure) {
    try {
      claim(slot, ticket, progress);
    } catch (...) {
      // The origin of the record being read (none if the lock itself failed).
      const record_origin at =
          slot.size < slot.origins.size() ? slot.origins[slot.size] : record_origin{};
      failure = failure_note{std::current_exception(), failure_message([&] {
                               return crema::detail::format(
                                   "pipeline: source {} failed reading record {} (pass {})",
                                   reader_.key, at.position, at.epoch);
                             })};
    }
    claims_.done(ticket);
    std::size_t i = 0;
    try {
      sample_context context = context_for(slot, producer);
      progress.begin(producer_phase::transforming, ticket);
      if constexpr (prefetching_record_source<Source>) {
        if (slot.size > 0) Source::prefetch(slot.record(0));
      }
      for (; i < slot.size; ++i) {
        if constexpr (prefetching_record_source<Source>) {
          // The next record comes from memory while this one is transformed.
          if (i + 1 < slot.size) Source::prefetch(slot.record(i + 1));
        }
        if (stopping_.stop_requested()) {  // stop waits for one record, not a batch
          slot.size = 0;
          return false;
        }
        progress.record(slot.origins[i].epoch, slot.origins[i].position);
        if constexpr (wants_context) {
          context.epoch = slot.origins[i].epoch;
          context.position = slot.origins[i].position;
          context.index = i;
        }
        run_transform(transform, slot, i, context);
      }
    } catch (...) {
      const record_origin at = slot.origins[i];
      const std::string key = record_key(slot, i);  // empty if the key fails too
      failure = failure_note{std::current_exception(), failure_message([&] {
                               return crema::detail::format(
                                   "pipeline: transform failed on record {} (pass {}) of {}{}",
                                   at.position, at.epoch, reader_.key, key);
                             })};
      slot.size = i;
    }
    if (slot.size == 0) return false;
    if constexpr (finishing_batch<typename batch_type_of<Transform, record_type>::type>) {
      try {
        progress.begin(producer_phase::finishing, ticket);
        slot.batch->finish(slot.info());
      } catch (...) {
        if (!failure) {
          failure = failure_note{std::current_exception(), failure_message([&] {
                                   return crema::detail::format(
                                       "pipeline: finishing batch {} of consumer {} ({}, pass {} "
                                       "from record {}) failed",
                                       slot.sequence, slot.consumer, reader_.key, slot.epoch,
                                       slot.first_position);
                                 })};
        }
        return false;  // a batch whose finishing step failed is not handed on
      }
    }
    return true;
  }

  sample_context context_for(const slot_type& slot, std::size_t producer) const noexcept {
    sample_context context;
    context.seed = options_.seed;
    context.producer = producer;
    context.consumer = slot.consumer;
    context.sequence = slot.sequence;
    if constexpr (keyed_record_source<Source>) {
      sample_context_keys::attach(
          context, &reader_.source, [](const void* source, const void* record) {
            return std::string(static_cast<const Source*>(source)->record_key(
                *static_cast<const record_type*>(record)));
          });
    }
    return context;
  }

  static void run_transform(Transform& transform, slot_type& slot, std::size_t i,
                            sample_context& context) {
    const auto& record = slot.record(i);  // a view of the slot's copy lives to the end here
    if constexpr (wants_context) sample_context_keys::point_at(context, &record);
    if constexpr (slot_type::holds_batch) {
      std::invoke(transform, record, *slot.batch, std::as_const(context));
      // A batch that checks its records (device_batch, host_batch: that the transform wrote
      // within record i) does it now, so that a failure names this record.
      if constexpr (requires { slot.batch->after_record(i); }) slot.batch->after_record(i);
    } else {
      transform_item(transform, record, slot.items[i], context);
    }
  }

  // " (key K)" for sources that name their records; empty when the source cannot say, even
  // if asking it throws: the error being reported matters more than its key.
  std::string record_key(const slot_type& slot, std::size_t i) const noexcept {
    if constexpr (keyed_record_source<Source>) {
      try {
        return crema::detail::format(" (key {})", reader_.source.record_key(slot.record(i)));
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
  void claim(slot_type& slot, std::uint64_t ticket, producer_progress& progress) {
    std::scoped_lock lock(reader_.mutex);
    const record_position start = reader_.source.position();
    progress.begin(producer_phase::reading, ticket);
    progress.record(reader_.epoch, start);
    claim_start& note = starts_[ticket % starts_.size()];
    const claim_start replaced = note;
    note = {ticket, reader_.epoch, start};
    slot.size = 0;
    slot.padding = 0;
    slot.epoch = reader_.epoch;
    slot.first_position = start;
    while (slot.size < options_.batch_size) {
      if (stopping_.stop_requested()) {
        if (slot.size == 0) note = replaced;  // nothing read: the reader stands at its start
        slot.size = 0;
        return;
      }
      record_origin& origin = slot.origins[slot.size];
      origin = {reader_.epoch, reader_.source.position()};
      progress.record(origin.position);
      const record_type* record =
          reader_.exhausted.load(std::memory_order_relaxed) ? nullptr : reader_.source.next();
      if (record == nullptr) {
        if (options_.mode == pipeline_mode::single_pass) {
          reader_.exhausted.store(true, std::memory_order_release);
          finish_last_batch(slot);
          // Nothing to hand on (dropped, or claimed past the end): resumed at the reader's
          // position, which is the end, the pass ends at once, as it does here.
          if (slot.size == 0) note = replaced;
          break;
        }
        if (options_.batches_end_with_pass && slot.size > 0) {
          finish_last_batch(slot);
          if (slot.size > 0) {  // the batch ends with its pass; the next starts the next pass
            next_pass();
            break;
          }
          // Dropped: the slot takes the next pass's first records.
        }
        next_pass();
        origin = {reader_.epoch, 0};
        progress.record(origin.epoch, origin.position);
        record = reader_.source.next();
        if (record == nullptr) {
          fail<pipeline_error>("pipeline: source {} has no records to repeat", reader_.key);
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

  // Repeat mode, under the reader's lock: the source's next pass.
  void next_pass() {
    reader_.source.rewind();
    ++reader_.epoch;
    counters_.epochs.fetch_add(1, std::memory_order_relaxed);
  }

  // The last batch of a pass, short of records: kept, dropped or padded, as asked.
  void finish_last_batch(slot_type& slot) {
    if (slot.size == 0 || slot.size == options_.batch_size) return;
    if (options_.last_batch == partial_batch::drop) {
      slot.size = 0;
    } else if (options_.last_batch == partial_batch::pad) {
      const std::size_t records = slot.size;
      while (slot.size < options_.batch_size) {
        const std::size_t repeat = (slot.size - records) % records;
        slot.origins[slot.size] = slot.origins[repeat];
        slot.keep(slot.record(repeat));
        ++slot.size;
      }
      slot.padding = options_.batch_size - records;
    }
  }

  // The last producer out closes a finished single pass: each consumer learns its total, the
  // batches handed to it. Claims are made in ticket order and every claim after the end is
  // empty, so those are its numbers 0 .. total - 1.
  void finish_producer() noexcept {
    run_.producer_ends([&]() noexcept {
      try {
        for (const auto& target : channels_) {
          target->push_end(target->handed_on.load(std::memory_order_relaxed));
        }
      } catch (...) {
        run_.fail(std::current_exception(),
                  failure_message([] { return std::string("pipeline: ending the pass failed"); }));
      }
    });
  }

  const pipeline_options options_;  // a copy: read per record, one load closer
  const Transform& prototype_;
  reader_body<Source>& reader_;
  std::span<const std::shared_ptr<channel_type>> channels_;
  claim_sequencer<thread_pool>& claims_;
  run_state& run_;
  pipeline_counters& counters_;
  hang_watch& hangs_;
  const std::stop_token stopping_;    // the run's, read per record
  std::atomic<std::uint64_t> turns_;  // deals the consumers to producers in turn
  std::vector<claim_start> starts_;   // by ticket modulo its size; under the reader's lock
};

}  // namespace crema::detail
