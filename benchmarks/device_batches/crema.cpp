// crema's side: producers fill device_batches (bytes to floats, written into the batch's host
// side) and their finishing step uploads them on the consumer device's stream; the consumer
// pulls a batch that is on its device, runs its step, and releases it.
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "device_batches/shape.hpp"

#include <benchmark/benchmark.h>

#include <memory>
#include <utility>

namespace {

using namespace crema::bench::device_batches;
using batch_type = crema::device_batch<float>;

struct to_device_batch {
  using batch_type = ::batch_type;
  // The emulated copy runs in the producer as it is launched: the CPU stands in for a copy
  // engine without a third busy thread.
  std::shared_ptr<crema::emulated_stream> uploads =
      std::make_shared<crema::emulated_stream>(crema::emulated_stream::run_inline);

  batch_type make_batch(const crema::batch_context& where) const {
    return batch_type(where.batch_size, {channels, side, side}, uploads);
  }
  void operator()(const image& record, batch_type& batch,
                  const crema::sample_context& sample) const {
    const auto out = batch.record(sample.index);
    for (std::size_t i = 0; i < pixels; ++i) out[i] = static_cast<float>(record.bytes[i]) / 255.0f;
    batch.set_label(sample.index, static_cast<float>(record.label));
  }
};

void device_batches(benchmark::State& state) {
  const long step = state.range(0);
  crema::double_buffered_pipeline pipe{
      crema::vector_source<image>(make_images()),
      to_device_batch{},
      {.batch_size = batch_size, .prefetch = prefetch, .producers = producers, .threads = threads}};
  auto consumer = pipe.consumer(0);
  double consumer_ns = 0;
  decltype(consumer.pull()) previous;
  for (auto _ : state) {
    // The consumer's share: release the last batch, take the next, have it on the device (the
    // clock is read twice per batch, as on the baseline's side).
    const double start = thread_cpu_ns();
    previous.reset();
    auto batch = consumer.pull();
    const auto on_device = batch->device();  // on the device: waits if in flight
    benchmark::DoNotOptimize(on_device.data.data());
    benchmark::DoNotOptimize(on_device.labels.data());
    consumer_ns += thread_cpu_ns() - start;
    training_step(step);
    previous = std::move(batch);
  }
  state.counters["consumer_cpu_ns"] =
      benchmark::Counter(consumer_ns / static_cast<double>(state.iterations()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_size));
}
BENCHMARK(device_batches)->Name("crema/device_batches")->Apply(shape);

}  // namespace
