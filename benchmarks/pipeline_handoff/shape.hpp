#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>

namespace crema::bench::handoff {

// The shape both sides share: a pool of 4 batch slots of 64 records (256 single records for the
// baseline), payloads of 0 and 3,072 bytes copied from a 64 MiB source, 1 and 2 producers.
inline constexpr std::size_t records_per_batch = 64;
inline constexpr std::size_t pool_slots = 4;
inline constexpr std::size_t source_bytes = std::size_t{64} << 20;

inline void shape(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"payload", "producers"});
  for (const long payload : {0L, 3072L}) {
    for (const long producers : {1L, 2L}) benchmark->Args({payload, producers});
  }
}

}  // namespace crema::bench::handoff
