// The baselines: a plain hand-written loop doing the data layer's work on as many threads, with
// no pipeline (each of n threads its own cursor over every n-th record: decode, crop, mirror, mean,
// scale into a batch buffer of its own, every store through the caches); and a raw LMDB cursor
// scan copying each value out of the map, the limit of reading. For reference, the same loop
// prefetching each next record as crema's producers do.
#include "caffe_data_layer/hand_loop.hpp"
#include "caffe_data_layer/shape.hpp"

#include <benchmark/benchmark.h>
#include <lmdb.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace {

using namespace crema::bench::data_layer;

void plain_loop(benchmark::State& state, const dataset& set) { hand_loop<false>(state, set); }
void prefetching_loop(benchmark::State& state, const dataset& set) { hand_loop<true>(state, set); }

BENCHMARK_CAPTURE(plain_loop, small, small)
    ->Name("baseline/data_layer/small")
    ->Apply(by_threads)
    ->UseRealTime();
BENCHMARK_CAPTURE(plain_loop, large, large)
    ->Name("baseline/data_layer/large")
    ->Apply(by_threads)
    ->UseRealTime();
BENCHMARK_CAPTURE(prefetching_loop, small, small)
    ->Name("reference/prefetching_loop/small")
    ->Apply(by_threads)
    ->UseRealTime();
BENCHMARK_CAPTURE(prefetching_loop, large, large)
    ->Name("reference/prefetching_loop/large")
    ->Apply(by_threads)
    ->UseRealTime();

void raw_scan(benchmark::State& state, const dataset& set) {
  const database& db = database_of(set);
  std::vector<std::byte> copy;
  for (auto _ : state) {
    cursor reader(db.path());
    reader.scan([&](std::size_t, const MDB_val&, const MDB_val& value) {
      copy.resize(value.mv_size);
      std::memcpy(copy.data(), value.mv_data, value.mv_size);
      benchmark::DoNotOptimize(copy.data());
    });
  }
  count_records(state, db.records());
}
BENCHMARK_CAPTURE(raw_scan, small, small)->Name("baseline/read_only/small")->UseRealTime();
BENCHMARK_CAPTURE(raw_scan, large, large)->Name("baseline/read_only/large")->UseRealTime();

}  // namespace
