// crema's side: the whole data layer (lmdb_source, caffe_batcher into host batches, the
// pipeline) in repeat mode, as training runs it; one pass of records per iteration; into float
// batches, and into batches of bytes (crema-bytes/: the crop and mirror alone, as a GPU feed of
// bytes makes them). And the pipeline reading alone (each record's value copied into its slot,
// no other work).
#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include "caffe_data_layer/shape.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using namespace crema::bench::data_layer;

// Batch slots per consumer: the pipeline's default, or CREMA_BENCH_PREFETCH.
std::size_t prefetch() {
  const char* text = std::getenv("CREMA_BENCH_PREFETCH");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : crema::pipeline_options{}.prefetch;
}

// `T`: float (the whole transform), or std::uint8_t (the crop and mirror alone, the mean and
// scale left to the device that reads the batch: what a GPU feed of bytes asks of the host).
template <class T>
void data_layer(benchmark::State& state, const dataset& set) {
  const database& db = database_of(set);
  const auto threads = static_cast<std::size_t>(state.range(0));
  crema::caffe_batcher batcher({3, set.side, set.side}, transform_of(set),
                               crema::make_host_batch<T>{});
  crema::double_buffered_pipeline pipe{crema::lmdb_source(db.path()),
                                       batcher,
                                       {.batch_size = set.batch,
                                        .prefetch = prefetch(),
                                        .producers = threads,
                                        .threads = threads,
                                        .seed = 7}};
  auto consumer = pipe.consumer(0);
  std::size_t records = 0;
  for (auto _ : state) {
    for (std::size_t read = 0; read < db.records();) {
      auto batch = consumer.pull();
      benchmark::DoNotOptimize(batch->data.data());
      read += batch->size();
      records += batch->size();
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(records));
}
void float_data_layer(benchmark::State& state, const dataset& set) {
  data_layer<float>(state, set);
}
void byte_data_layer(benchmark::State& state, const dataset& set) {
  data_layer<std::uint8_t>(state, set);
}
BENCHMARK_CAPTURE(float_data_layer, small, small)
    ->Name("crema/data_layer/small")
    ->Apply(by_threads)
    ->UseRealTime();
BENCHMARK_CAPTURE(float_data_layer, large, large)
    ->Name("crema/data_layer/large")
    ->Apply(by_threads)
    ->UseRealTime();
BENCHMARK_CAPTURE(byte_data_layer, small, small)
    ->Name("crema-bytes/data_layer/small")
    ->Apply(by_threads)
    ->UseRealTime();
BENCHMARK_CAPTURE(byte_data_layer, large, large)
    ->Name("crema-bytes/data_layer/large")
    ->Apply(by_threads)
    ->UseRealTime();

// Each record's value copied out of the map into its slot's item (whose capacity is reused).
struct copy_value {
  using item_type = std::vector<std::byte>;
  void operator()(const crema::lmdb_record& record, item_type& item) const {
    item.resize(record.value.size());
    std::memcpy(item.data(), record.value.data(), record.value.size());
  }
};

void read_only(benchmark::State& state, const dataset& set) {
  const database& db = database_of(set);
  crema::double_buffered_pipeline pipe{
      crema::lmdb_source(db.path()),
      copy_value{},
      {.batch_size = 64, .producers = read_threads, .threads = read_threads}};
  auto consumer = pipe.consumer(0);
  std::size_t records = 0;
  for (auto _ : state) {
    for (std::size_t read = 0; read < db.records();) {
      auto batch = consumer.pull();
      benchmark::DoNotOptimize(batch->items().data());
      read += batch->size();
      records += batch->size();
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(records));
}
BENCHMARK_CAPTURE(read_only, small, small)->Name("crema/read_only/small")->UseRealTime();
BENCHMARK_CAPTURE(read_only, large, large)->Name("crema/read_only/large")->UseRealTime();

}  // namespace
