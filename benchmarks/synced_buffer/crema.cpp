// crema's side: synced_buffer accessors in the states an engine's hot loop sees.
#include <crema/memory/synced_buffer.hpp>

#include <benchmark/benchmark.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace {

// host() in the synced state: the head check and a span, then the same reads as the baseline.
void host_read(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  crema::synced_buffer<float> buffer(count);
  std::ranges::fill(buffer.mutable_host(), 1.0f);
  (void)buffer.device();  // synced
  for (auto _ : state) {
    const auto host = buffer.host();
    benchmark::DoNotOptimize(std::reduce(host.begin(), host.end(), 0.0f));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * count * sizeof(float)));
}
BENCHMARK(host_read)->Name("crema/host_read_synced")->Arg(1)->Arg(64)->Arg(4096);

// A host write then a device read each step: exactly one upload per step, so the baseline is
// one memcpy of the same bytes.
void write_host_read_device(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  crema::emulated_device device;
  crema::synced_buffer<float> buffer(count, {}, crema::emulated_device_resource{device});
  for (auto _ : state) {
    auto host = buffer.mutable_host();
    host[0] = 1.0f;
    benchmark::DoNotOptimize(buffer.device().data());
    benchmark::ClobberMemory();
  }
  state.counters["uploads_per_step"] = benchmark::Counter(
      static_cast<double>(device.stats().uploads), benchmark::Counter::kAvgIterations);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * count * sizeof(float)));
}
BENCHMARK(write_host_read_device)->Name("crema/upload_per_step")->Arg(1 << 10)->Arg(1 << 20)->Arg(1 << 24);

// Forward and backward of one blob: host write, device read, device write, host read. One
// upload and one download per step; the baseline is two memcpys.
void blob_step(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  crema::emulated_device device;
  crema::synced_buffer<float> buffer(count, {}, crema::emulated_device_resource{device});
  for (auto _ : state) {
    buffer.mutable_host()[0] = 1.0f;
    benchmark::DoNotOptimize(buffer.device().data());
    benchmark::DoNotOptimize(buffer.mutable_device().data());
    benchmark::DoNotOptimize(buffer.host()[0]);
    benchmark::ClobberMemory();
  }
  state.counters["uploads_per_step"] = benchmark::Counter(
      static_cast<double>(device.stats().uploads), benchmark::Counter::kAvgIterations);
  state.counters["downloads_per_step"] = benchmark::Counter(
      static_cast<double>(device.stats().downloads), benchmark::Counter::kAvgIterations);
}
BENCHMARK(blob_step)->Name("crema/blob_step")->Arg(1 << 10)->Arg(1 << 20)->Arg(1 << 24);

}  // namespace
