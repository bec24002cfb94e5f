// The baselines, measured in the same run: a raw pointer read, and memcpy of the bytes crema's
// access patterns must move at the least.
#include <benchmark/benchmark.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace {

void raw_read(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  std::vector<float> host(count, 1.0f);
  const float* data = host.data();
  for (auto _ : state) {
    benchmark::DoNotOptimize(data);
    benchmark::DoNotOptimize(std::reduce(data, data + count, 0.0f));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * count * sizeof(float)));
}
BENCHMARK(raw_read)->Name("baseline/host_read_synced")->Arg(1)->Arg(64)->Arg(4096);

void memcpy_once(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  std::vector<float> host(count, 0.0f);
  std::vector<float> device(count, 0.0f);
  for (auto _ : state) {
    host[0] = 1.0f;
    std::memcpy(device.data(), host.data(), count * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * count * sizeof(float)));
}
BENCHMARK(memcpy_once)->Name("baseline/upload_per_step")->Arg(1 << 10)->Arg(1 << 20)->Arg(1 << 24);

void memcpy_twice(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  std::vector<float> host(count, 0.0f);
  std::vector<float> device(count, 0.0f);
  for (auto _ : state) {
    host[0] = 1.0f;
    std::memcpy(device.data(), host.data(), count * sizeof(float));
    device[0] = 2.0f;
    std::memcpy(host.data(), device.data(), count * sizeof(float));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(memcpy_twice)->Name("baseline/blob_step")->Arg(1 << 10)->Arg(1 << 20)->Arg(1 << 24);

}  // namespace
