// The Caffe-design baseline: producer threads move one record per handoff through a free and a
// full blocking queue (mutex + condition variable + std::queue), 256 records in all.
#include "common/mutex_queue.hpp"
#include "pipeline_handoff/shape.hpp"

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using namespace crema::bench::handoff;

void handoff(benchmark::State& state) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  const auto producers = static_cast<std::size_t>(state.range(1));
  const std::vector<std::byte> source(payload == 0 ? 0 : source_bytes, std::byte{1});
  std::vector<std::vector<std::byte>> records(pool_slots * records_per_batch,
                                              std::vector<std::byte>(payload));
  crema::bench::mutex_queue<std::vector<std::byte>*> free;
  crema::bench::mutex_queue<std::vector<std::byte>*> full;
  for (auto& record : records) free.push(&record);
  std::vector<std::jthread> threads;
  for (std::size_t id = 0; id < producers; ++id) {
    threads.emplace_back([&, id] {
      std::size_t offset = id * records_per_batch * payload;
      for (;;) {
        std::vector<std::byte>* record = free.pop();
        if (record == nullptr) return;
        if (payload != 0) {
          if (offset + payload > source.size()) offset = 0;
          std::memcpy(record->data(), source.data() + offset, payload);
          offset += payload;
        }
        full.push(record);
      }
    });
  }
  for (auto _ : state) {
    for (std::size_t i = 0; i < records_per_batch; ++i) {
      std::vector<std::byte>* record = full.pop();
      benchmark::DoNotOptimize(record->data());
      free.push(record);
    }
  }
  for (std::size_t id = 0; id < producers; ++id) free.push(nullptr);
  threads.clear();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * records_per_batch));
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * records_per_batch * payload));
}
BENCHMARK(handoff)->Name("baseline/handoff")->Apply(shape)->UseRealTime();

}  // namespace
