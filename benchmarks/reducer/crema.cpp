// crema's side: device_tree_reducer::allreduce on host threads (one per core), over one buffer of
// floats per participant, on a flat tree, the buffers placed as users' buffers are.
#include <crema/collective/host/device_tree_reducer.hpp>

#include "reducer/shape.hpp"

#include <benchmark/benchmark.h>

#include <memory>
#include <numeric>
#include <vector>

namespace {

using namespace crema::bench::reducer;

void allreduce(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
  const auto participants = static_cast<std::size_t>(state.range(1));
  const placed_buffers buffers(bytes, participants, state.range(2));
  std::vector<int> ids(participants);
  std::iota(ids.begin(), ids.end(), 0);
  crema::device_tree_reducer<float> reducer(crema::tree_topology::flat(ids), buffers.spans(),
                                            std::make_shared<crema::host_threads>());
  for (auto _ : state) {
    reducer.allreduce(crema::reduction::average);
    benchmark::ClobberMemory();
  }
  report_bus_bandwidth(state, bytes, participants);
}
BENCHMARK(allreduce)
    ->Name("crema/allreduce")
    ->Apply(shape)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
