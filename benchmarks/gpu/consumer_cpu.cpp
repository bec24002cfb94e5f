// The consumer thread's CPU time per batch on a GPU, the GPU-feed issue's third target: the
// device-batch feeds of crema-bench-device_batches (device_batches/consumers.hpp: batches of 64
// records of 3 x 28 x 28 floats, 2 producers on 2 threads, a training step of 0 or 200 us on the
// consumer's thread) with CUDA batches and pinned memory:
//
//   crema           each batch uploads on a stream of its own; the consumer's stream waits for
//                   the upload (cudaStreamWaitEvent) and the slot goes back after an event
//                   recorded there, the host never waiting;
//   crema-uploader  the same, the uploads started by one batch_uploader's thread;
//   baseline        the consumer collates the items of each batch into pinned memory and uploads
//                   it synchronously on its own thread.
//
// Target: crema's consumer at most 0.10 of the baseline's CPU time per batch where the step lets
// the producers keep up (200 us); where it does not (0 us), the consumer waits for every batch.
#include <crema/core/cuda/device.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/synced_buffer.hpp>
#include <crema/pipeline/batch_uploader.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>

#include "device_batches/consumers.hpp"
#include "device_batches/shape.hpp"
#include "gpu/gpu_benchmark.hpp"

#include <benchmark/benchmark.h>

#include <cstddef>
#include <memory>

namespace {

using namespace crema::bench::device_batches;
using batch_type = crema::cuda::device_batch<float>;

enum class uploads_on {
  own_stream,  // crema's default
  uploader,
};

void device_batches(benchmark::State& state, uploads_on where) {
  auto uploader = where == uploads_on::uploader
                      ? std::make_shared<crema::batch_uploader<crema::cuda_stream>>(
                            crema::cuda::current_device())
                      : nullptr;
  auto make = [uploader](std::size_t size, crema::record_shape shape) {
    if (uploader) return batch_type(size, shape, uploader);
    return batch_type(size, shape);
  };
  crema::cuda_stream compute;
  device_batch_consumer(state, to_device_batch<batch_type, decltype(make)>{make},
                        [&compute](auto& batch) {
                          const auto on_device = batch->device(compute);
                          benchmark::DoNotOptimize(on_device.data.data());
                          batch.release_after(compute.record());
                        });
  compute.synchronize();
}
BENCHMARK_CAPTURE(device_batches, own_stream, uploads_on::own_stream)
    ->Name("crema/consumer_cpu")
    ->Apply(shape);
BENCHMARK_CAPTURE(device_batches, uploader, uploads_on::uploader)
    ->Name("crema-uploader/consumer_cpu")
    ->Apply(shape);

void collate_and_upload(benchmark::State& state) {
  crema::cuda::synced_buffer<float> data(batch_size * pixels);
  crema::cuda::synced_buffer<float> labels(batch_size);
  collating_consumer(state, data, labels);
}
BENCHMARK(collate_and_upload)->Name("baseline/consumer_cpu")->Apply(shape);

}  // namespace

int main(int argc, char** argv) {
  return crema::bench::gpu::run_on_gpu(
      argc, argv, "consumer_cpu on a GPU", [](const crema::bench::ratio_reporter& reporter) {
        print_consumer_ratios(reporter, {"crema", "crema-uploader"}, "consumer_cpu");
      });
}
