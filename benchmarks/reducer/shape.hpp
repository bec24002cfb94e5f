#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>

namespace crema::bench::reducer {

// 16 and 64 MiB of floats per participant, 2 and 4 participants.
inline void shape(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"MiB", "participants"});
  for (const long mib : {16L, 64L}) {
    for (const long participants : {2L, 4L}) benchmark->Args({mib, participants});
  }
}

// NCCL's bus bandwidth: S bytes per participant in t seconds, times 2(n-1)/n.
inline double bus_bandwidth(double bytes, double seconds, double participants) {
  return bytes / seconds * 2.0 * (participants - 1.0) / participants;
}

inline void report_bus_bandwidth(benchmark::State& state, std::size_t bytes,
                                 std::size_t participants) {
  state.counters["busbw_GBps"] = benchmark::Counter(
      bus_bandwidth(static_cast<double>(bytes), 1.0, static_cast<double>(participants)) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace crema::bench::reducer
