#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/pipeline/pipeline_options.hpp>

#include <algorithm>
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
pipeline_options checked_options(const pipeline_options& chosen, pipeline_footprint footprint);

}  // namespace crema::detail

#if CREMA_CORE_IN_HEADERS
#include <crema/pipeline/detail/checked_options_impl.hpp>
#endif
