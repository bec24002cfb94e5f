// The demo's way before device batches (consumers.hpp): the consumer collates each batch on its
// own thread and uploads it to the emulated device.
#include <crema/memory/synced_buffer.hpp>

#include "device_batches/consumers.hpp"
#include "device_batches/shape.hpp"

#include <benchmark/benchmark.h>

#include <semaphore.h>

#include <atomic>
#include <thread>

namespace {

using namespace crema::bench::device_batches;

void device_batches(benchmark::State& state) {
  crema::synced_buffer<float> data(batch_size * pixels);
  crema::synced_buffer<float> labels(batch_size);
  collating_consumer(state, data, labels);
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
