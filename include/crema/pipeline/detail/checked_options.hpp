#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/error.hpp>
#include <crema/pipeline/pipeline_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace crema::detail {

// What one record and one producer of a pipeline cost in memory, its slots aside: known from the
// source's and transform's types.
struct pipeline_footprint {
  std::size_t per_record = 0;    // a record's pointer or copy, its item, its origin
  std::size_t per_producer = 0;  // a producer's transform, coroutine frame and counters
};

// The slots per consumer of `prefetch = 0`: one for every batch being filled at once (a producer
// fills its batch on one thread without suspending), and two more, at least 4.
inline std::size_t default_prefetch(const pipeline_options& chosen) noexcept {
  const std::size_t filling = std::min(chosen.producers, chosen.threads);
  const std::size_t per_consumer = (filling - 1) / chosen.consumers + 1;  // rounded up
  return std::max<std::size_t>(4, per_consumer + 2);
}

// `chosen` with its slot count chosen where it is 0, or a config_error naming the field at fault.
// Counts that cannot fit are refused before anything is allocated: a slip of a digit would
// otherwise end in std::bad_alloc, or in the machine swapping while the slots are made.
inline pipeline_options checked_options(const pipeline_options& chosen,
                                        pipeline_footprint footprint) {
  const auto check = [](const char* field, std::size_t value) {
    if (value == 0) fail<config_error>("pipeline: {} must be at least 1, got 0", field);
  };
  check("batch_size", chosen.batch_size);
  check("producers", chosen.producers);
  check("threads", chosen.threads);
  check("consumers", chosen.consumers);
  if (chosen.stall_timeout <= std::chrono::milliseconds::zero()) {
    fail<config_error>(
        "pipeline: stall_timeout must be positive (milliseconds::max() waits for ever), got {} ms",
        chosen.stall_timeout.count());
  }
  if (chosen.hang_timeout <= std::chrono::milliseconds::zero()) {
    fail<config_error>(
        "pipeline: hang_timeout must be positive (milliseconds::max() never looks), got {} ms",
        chosen.hang_timeout.count());
  }
  if (chosen.warm_refill_wait < std::chrono::microseconds::zero() ||
      chosen.warm_refill_wait > std::chrono::seconds(1)) {
    fail<config_error>(
        "pipeline: warm_refill_wait must be from 0 to 1 s (0 never waits), got {} us",
        chosen.warm_refill_wait.count());
  }
  if (chosen.resume_from && chosen.registry != nullptr) {
    fail<config_error>(
        "pipeline: resume_from positions a pipeline's own reader, not one shared through a "
        "registry; resume without the registry");
  }
  if (chosen.resume_from && chosen.resume_from->batch >= (std::uint64_t{1} << 62)) {
    fail<config_error>(
        "pipeline: resume_from batch {} is past the batches a pipeline numbers (2^62)",
        chosen.resume_from->batch);
  }
  pipeline_options resolved = chosen;
  if (resolved.prefetch == 0) resolved.prefetch = default_prefetch(chosen);
  const auto slots = checked_mul(resolved.consumers, resolved.prefetch);
  const auto records = slots ? checked_mul(*slots, resolved.batch_size) : std::nullopt;
  const auto slot_bytes = records ? checked_mul(*records, footprint.per_record) : std::nullopt;
  const auto producer_bytes = checked_mul(resolved.producers, footprint.per_producer);
  const auto total =
      slot_bytes && producer_bytes ? checked_add(*slot_bytes, *producer_bytes) : std::nullopt;
  const auto memory = physical_memory_bytes();
  if (total && (!memory || *total <= *memory)) return resolved;
  const std::string need = total ? crema::detail::format("{} bytes", *total)
                                 : std::string("more bytes than a size_t holds");
  const std::string have = memory ? crema::detail::format("the {} bytes of memory here", *memory)
                                  : std::string("any machine");
  fail<config_error>(
      "pipeline: consumers {} x prefetch {} x batch_size {} records of {} bytes, and producers {} "
      "of {} bytes, need {}, more than {}",
      resolved.consumers, resolved.prefetch, resolved.batch_size, footprint.per_record,
      resolved.producers, footprint.per_producer, need, have);
}

}  // namespace crema::detail
