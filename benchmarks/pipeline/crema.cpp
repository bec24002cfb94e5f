// crema's side: the whole double_buffered_pipeline, with a transform that copies each record into
// its preallocated item, producers on 2 threads.
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "pipeline/shape.hpp"

#include <benchmark/benchmark.h>

#include <cstring>

namespace {

using namespace crema::bench::whole_pipeline;

struct copy_record {
  using item_type = record;
  void operator()(const record& from, record& to) const {
    to.resize(from.size());  // allocates on a slot's first use only
    if (!from.empty()) std::memcpy(to.data(), from.data(), from.size());
  }
};

void whole_pipeline(benchmark::State& state) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  const auto producers = static_cast<std::size_t>(state.range(1));
  crema::double_buffered_pipeline pipe{
      crema::vector_source<record>(make_records(payload)),
      copy_record{},
      {.batch_size = batch_size, .prefetch = prefetch, .producers = producers, .threads = threads}};
  auto consumer = pipe.consumer(0);
  for (auto _ : state) {
    auto batch = consumer.pull();
    benchmark::DoNotOptimize(batch->items().data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_size));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch_size * payload));
}
BENCHMARK(whole_pipeline)->Name("crema/pipeline")->Apply(shape)->UseRealTime();

// memcpy bandwidth on 64 MiB buffers, the bound for 3,072-byte records.
void memcpy_bandwidth(benchmark::State& state) {
  std::vector<std::byte> from(source_bytes, std::byte{1});
  std::vector<std::byte> to(source_bytes);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), source_bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * source_bytes));
}
BENCHMARK(memcpy_bandwidth)->Name("reference/memcpy_64MiB")->UseRealTime();

}  // namespace
