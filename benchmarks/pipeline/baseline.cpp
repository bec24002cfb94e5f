// The Caffe-design baseline: producer threads (one per producer, as Caffe's prefetch threads)
// take the next record under the reader's mutex, copy it into a free record from a blocking
// free queue and push it to the blocking full queue: one record per handoff.
#include "common/mutex_queue.hpp"
#include "pipeline/shape.hpp"

#include <benchmark/benchmark.h>

#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using namespace crema::bench::whole_pipeline;

void whole_pipeline(benchmark::State& state) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  const auto producers = static_cast<std::size_t>(state.range(1));
  const std::vector<record> source = make_records(payload);
  std::mutex reader;
  std::size_t next = 0;
  std::vector<record> records(prefetch * batch_size, record(payload));
  crema::bench::mutex_queue<record*> free;
  crema::bench::mutex_queue<record*> full;
  for (auto& slot : records) free.push(&slot);
  std::vector<std::jthread> threads;
  for (std::size_t id = 0; id < producers; ++id) {
    threads.emplace_back([&] {
      for (;;) {
        record* slot = free.pop();
        if (slot == nullptr) return;
        const record* from = nullptr;
        {
          std::scoped_lock lock(reader);
          from = &source[next];
          next = (next + 1) % source.size();
        }
        if (payload != 0) std::memcpy(slot->data(), from->data(), payload);
        full.push(slot);
      }
    });
  }
  for (auto _ : state) {
    for (std::size_t i = 0; i < batch_size; ++i) {
      record* slot = full.pop();
      benchmark::DoNotOptimize(slot->data());
      free.push(slot);
    }
  }
  for (std::size_t id = 0; id < producers; ++id) free.push(nullptr);
  threads.clear();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_size));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch_size * payload));
}
BENCHMARK(whole_pipeline)->Name("baseline/pipeline")->Apply(shape)->UseRealTime();

}  // namespace
