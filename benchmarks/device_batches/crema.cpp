// crema's side (consumers.hpp): producers fill device_batches and their finishing step uploads
// them on the consumer device's stream; the consumer pulls a batch that is on its device, runs its
// step, and releases it.
#include <crema/memory/emulated_stream.hpp>
#include <crema/pipeline/device_batch.hpp>

#include "device_batches/consumers.hpp"
#include "device_batches/shape.hpp"

#include <benchmark/benchmark.h>

#include <cstddef>
#include <memory>

namespace {

using namespace crema::bench::device_batches;
using batch_type = crema::device_batch<float>;

void device_batches(benchmark::State& state) {
  // The emulated copy runs in the producer as it is launched: the CPU stands in for a copy
  // engine without a third busy thread.
  auto uploads = std::make_shared<crema::emulated_stream>(crema::emulated_stream::run_inline);
  auto make = [uploads](std::size_t size, crema::record_shape shape) {
    return batch_type(size, shape, uploads);
  };
  device_batch_consumer(state, to_device_batch<batch_type, decltype(make)>{make}, [](auto& batch) {
    const auto on_device = batch->device();  // waits if in flight
    benchmark::DoNotOptimize(on_device.data.data());
    benchmark::DoNotOptimize(on_device.labels.data());
  });
}
BENCHMARK(device_batches)->Name("crema/device_batches")->Apply(shape);

}  // namespace
