// The bound: an allreduce must read every participant's buffer once and write it once. The same
// traffic as plain copies (n buffers of S bytes, each copied once), split over the same threads,
// turned into the bus bandwidth it would give.
#include <crema/core/host_threads.hpp>

#include "reducer/shape.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

using namespace crema::bench::reducer;

void copy_bound(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
  const auto participants = static_cast<std::size_t>(state.range(1));
  const placed_buffers from_buffers(bytes, participants, state.range(2));
  const placed_buffers to_buffers(bytes, participants, state.range(2));
  const auto& from = from_buffers.spans();
  const auto& to = to_buffers.spans();
  crema::host_threads team;
  const std::size_t elements = bytes / sizeof(float);
  for (auto _ : state) {
    team.parallel([&](std::size_t part) {
      const std::size_t share = (elements + team.size() - 1) / team.size();
      const std::size_t begin = std::min(elements, part * share);
      const std::size_t end = std::min(elements, begin + share);
      for (std::size_t p = 0; p < participants; ++p) {
        std::memcpy(to[p].data() + begin, from[p].data() + begin, (end - begin) * sizeof(float));
      }
    });
    benchmark::ClobberMemory();
  }
  report_bus_bandwidth(state, bytes, participants);
}
BENCHMARK(copy_bound)
    ->Name("baseline/allreduce")
    ->Apply(shape)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
