// The demo's way before device batches: the pipeline's producers make one item per record
// (bytes to floats); the consumer collates the batch's items into a blob and uploads it
// synchronously on its own thread before its step.
#include <crema/memory/synced_buffer.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "device_batches/shape.hpp"

#include <benchmark/benchmark.h>

#include <semaphore.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <thread>

namespace {

using namespace crema::bench::device_batches;

struct to_floats {
  struct item {
    std::array<float, pixels> values;
    float label;
  };
  using item_type = item;
  void operator()(const image& record, item& out) const {
    for (std::size_t i = 0; i < pixels; ++i) {
      out.values[i] = static_cast<float>(record.bytes[i]) / 255.0f;
    }
    out.label = static_cast<float>(record.label);
  }
};

void device_batches(benchmark::State& state) {
  const long step = state.range(0);
  crema::double_buffered_pipeline pipe{
      crema::vector_source<image>(make_images()),
      to_floats{},
      {.batch_size = batch_size, .prefetch = prefetch, .producers = producers, .threads = threads}};
  crema::synced_buffer<float> data(batch_size * pixels);
  crema::synced_buffer<float> labels(batch_size);
  auto consumer = pipe.consumer(0);
  double consumer_ns = 0;
  for (auto _ : state) {
    const double start = thread_cpu_ns();
    auto batch = consumer.pull();
    auto host = data.mutable_host();
    auto host_labels = labels.mutable_host();
    for (std::size_t i = 0; i < batch->size(); ++i) {
      std::copy(batch->items()[i].values.begin(), batch->items()[i].values.end(),
                host.begin() + static_cast<std::ptrdiff_t>(i * pixels));
      host_labels[i] = batch->items()[i].label;
    }
    batch.reset();
    benchmark::DoNotOptimize(data.device().data());  // uploads here, on the consumer's thread
    benchmark::DoNotOptimize(labels.device().data());
    consumer_ns += thread_cpu_ns() - start;
    training_step(step);
  }
  state.counters["consumer_cpu_ns"] =
      benchmark::Counter(consumer_ns / static_cast<double>(state.iterations()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_size));
}
BENCHMARK(device_batches)->Name("baseline/device_batches")->Apply(shape);

// The least a consumer pays that waits for each batch: one sleep in the kernel and one wake-up,
// whatever hands it the batch. A thread posts a POSIX semaphore (what the queues sleep on) a
// batch's making apart; the consumer's CPU time per wait is the floor of the starved case.
void blocking_wait(benchmark::State& state) {
  sem_t ready;
  sem_init(&ready, 0, 0);
  std::atomic<bool> done{false};
  std::jthread producer([&] {
    while (!done.load(std::memory_order_relaxed)) {
      training_step(25);  // about one batch's making on the producers' side here
      sem_post(&ready);
    }
  });
  double consumer_ns = 0;
  for (auto _ : state) {
    const double start = thread_cpu_ns();
    while (sem_wait(&ready) != 0) {
    }
    consumer_ns += thread_cpu_ns() - start;
  }
  done = true;
  producer.join();
  sem_destroy(&ready);
  state.counters["consumer_cpu_ns"] =
      benchmark::Counter(consumer_ns / static_cast<double>(state.iterations()));
}
BENCHMARK(blocking_wait)->Name("floor/blocking_wait")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
