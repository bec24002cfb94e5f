#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/pipeline/detail/checked_options.hpp>
#include <crema/pipeline/pipeline_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

// The options check: compiled once in libcrema (src/core/), or included by checked_options.hpp,
// inline, where the core is headers alone.

namespace crema::detail {

CREMA_CORE_INLINE pipeline_options checked_options(const pipeline_options& chosen,
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
