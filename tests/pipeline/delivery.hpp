#pragma once

// Runs every consumer of a pipeline on a thread of its own until its range ends, and reports
// what each one received, for the delivery tests.

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace crema::test {

struct delivered_to {
  std::vector<int> records;  // in the order received
  std::vector<std::uint64_t> sequences;
  std::size_t short_batches = 0;  // batches smaller than the batch size
};

template <class Pipeline>
std::vector<delivered_to> drain_on_threads(Pipeline& pipe) {
  const std::size_t consumers = pipe.options().consumers;
  std::vector<delivered_to> delivered(consumers);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < consumers; ++i) {
    threads.emplace_back([&pipe, &delivered, i] {
      for (auto batch : pipe.consumer(i)) {
        delivered[i].sequences.push_back(batch->sequence());
        if (batch->size() < pipe.options().batch_size) ++delivered[i].short_batches;
        for (int value : *batch) delivered[i].records.push_back(value);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return delivered;
}

}  // namespace crema::test
