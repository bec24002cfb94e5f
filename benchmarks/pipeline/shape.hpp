#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <vector>

namespace crema::bench::whole_pipeline {

// Both sides read records of 0 or 3,072 bytes from a 64 MiB source (twice the last-level cache,
// so the copies are memory-bound), batches of 64, 4 batches of prefetch, 1, 2 and 8 producers.
inline constexpr std::size_t batch_size = 64;
inline constexpr std::size_t prefetch = 4;
inline constexpr std::size_t source_bytes = std::size_t{64} << 20;
inline constexpr std::size_t threads = 2;

using record = std::vector<std::byte>;

inline std::vector<record> make_records(std::size_t payload) {
  const std::size_t count = payload == 0 ? 4096 : source_bytes / payload;
  return std::vector<record>(count, record(payload, std::byte{1}));
}

inline void shape(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"payload", "producers"});
  for (const long payload : {0L, 3072L}) {
    for (const long producers : {1L, 2L, 8L}) benchmark->Args({payload, producers});
  }
}

}  // namespace crema::bench::whole_pipeline
