// crema's side: coroutine producers fill 64-record batch slots from a pool of 4 and hand them
// over through a lock-free queue_pair; the consumer takes whole batches.
#include <crema/core/queue_pair.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/producer_task.hpp>

#include "pipeline_handoff/shape.hpp"

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstring>
#include <latch>
#include <vector>

namespace {

using namespace crema::bench::handoff;

struct batch_slot {
  std::vector<std::byte> bytes;
};
using pair_type = crema::queue_pair<batch_slot, crema::thread_pool>;

crema::detail::producer_task produce(crema::thread_pool& pool, pair_type& pair,
                                     const std::vector<std::byte>& source, std::size_t payload,
                                     std::size_t id, std::latch& finished) {
  co_await pool.schedule();
  std::size_t offset = id * records_per_batch * payload;
  for (;;) {
    auto [slot, suspended] = co_await pair.free_slots().acquire();
    if (slot == nullptr) break;
    if (payload != 0) {
      const std::size_t bytes = records_per_batch * payload;
      if (offset + bytes > source.size()) offset = 0;
      std::memcpy(slot->bytes.data(), source.data() + offset, bytes);
      offset += bytes;
    }
    pair.push(slot);
  }
  finished.count_down();
}

void handoff(benchmark::State& state) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  const auto producers = static_cast<std::size_t>(state.range(1));
  const std::vector<std::byte> source(payload == 0 ? 0 : source_bytes, std::byte{1});
  crema::thread_pool pool(producers);
  pair_type pair(
      pool_slots, [&] { return batch_slot{std::vector<std::byte>(records_per_batch * payload)}; },
      pool);
  std::latch finished(static_cast<std::ptrdiff_t>(producers));
  for (std::size_t id = 0; id < producers; ++id) {
    produce(pool, pair, source, payload, id, finished).coroutine.resume();
  }
  for (auto _ : state) {
    batch_slot* slot = pair.pop();
    benchmark::DoNotOptimize(slot->bytes.data());
    pair.release(slot);
  }
  pair.stop();
  finished.wait();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * records_per_batch));
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * records_per_batch * payload));
}
BENCHMARK(handoff)->Name("crema/handoff")->Apply(shape)->UseRealTime();

}  // namespace
