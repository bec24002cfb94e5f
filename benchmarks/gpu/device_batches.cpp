// The pipeline delivering CUDA device_batches on a GPU, 64 records of 3x224x224 floats a batch:
// producers mark each record in the batch's pinned host memory and the finishing step uploads it
// on a copy stream; the consumer's stream waits for the upload (cudaStreamWaitEvent), runs its
// step, and the slot is released after the step.
//
//   deliver   the step costs nothing, so the uploads are the bottleneck: against a raw pinned
//             cudaMemcpyAsync of the same bytes back to back (target: at least 0.9 of its
//             bandwidth);
//   overlap   the step takes about 1.25 uploads: batch k+1 should upload while the step runs on
//             batch k, so the consumer's stream should wait for uploads less than 5% of its time
//             (measured with CUDA events around each wait); against the same steps alone on data
//             already on the device.
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "gpu/gpu_benchmark.hpp"
#include "gpu/kernels.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

namespace {

namespace gpu = crema::bench::gpu;
using gpu::device_memory;
using gpu::pinned_memory;

using batch_type = crema::cuda::device_batch<float>;
constexpr std::size_t batch_size = 64;
constexpr crema::record_shape shape{3, 224, 224};
constexpr std::size_t record_elements = shape.elements();
constexpr std::size_t data_bytes = batch_size * record_elements * sizeof(float);
constexpr std::size_t label_bytes = batch_size * sizeof(float);
constexpr std::size_t batch_bytes = data_bytes + label_bytes;
constexpr int batches_per_round = 32;  // one benchmark iteration; the host waits once a round

// A CUDA event that keeps time, for the waits on the consumer's stream.
class timing_event {
 public:
  timing_event() { CREMA_CUDA_TRY(cudaEventCreate(&event_)); }
  ~timing_event() { (void)cudaEventDestroy(event_); }
  timing_event(const timing_event&) = delete;
  timing_event& operator=(const timing_event&) = delete;
  void record(const crema::cuda_stream& stream) {
    CREMA_CUDA_TRY(cudaEventRecord(event_, stream.native_handle()));
  }
  // Milliseconds from `earlier` to this event; both must have completed.
  [[nodiscard]] double since(const timing_event& earlier) const {
    float milliseconds = 0;
    CREMA_CUDA_TRY(cudaEventElapsedTime(&milliseconds, earlier.event_, event_));
    return milliseconds;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// The producers' share, kept small so that they are not the bottleneck: one value and the label
// per record; the finishing step uploads the whole batch.
struct mark_records {
  using batch_type = ::batch_type;
  std::shared_ptr<crema::cuda_stream> uploads;

  batch_type make_batch(const crema::batch_context& where) const {
    return batch_type(where.batch_size, shape, uploads);
  }
  void operator()(const int& record, batch_type& batch, const crema::sample_context& sample) const {
    batch.record(sample.index)[0] = static_cast<float>(record);
    batch.set_label(sample.index, static_cast<float>(record));
  }
};

auto make_pipeline() {
  std::vector<int> records(batch_size * 8);
  std::iota(records.begin(), records.end(), 0);
  return crema::double_buffered_pipeline{
      crema::vector_source<int>(std::move(records)),
      mark_records{std::make_shared<crema::cuda_stream>()},
      {.batch_size = batch_size, .prefetch = 4, .producers = 2, .threads = 2}};
}

// The median of `runs` timings of `work` on `stream`, in milliseconds, after one untimed run.
template <class Work>
double median_milliseconds(const crema::cuda_stream& stream, Work work, int runs = 5) {
  timing_event start;
  timing_event stop;
  work();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    start.record(stream);
    work();
    stop.record(stream);
    CREMA_CUDA_TRY(cudaStreamSynchronize(stream.native_handle()));
    times.push_back(stop.since(start));
  }
  std::ranges::sort(times);
  return times[times.size() / 2];
}

// The raw copy of one batch (data and labels) on `stream`.
void copy_batch(const pinned_memory& host, const device_memory& device,
                const crema::cuda_stream& stream) {
  const auto* source = static_cast<const std::byte*>(host.data);
  auto* destination = static_cast<std::byte*>(device.data);
  CREMA_CUDA_TRY(cudaMemcpyAsync(destination, source, data_bytes, cudaMemcpyHostToDevice,
                                 stream.native_handle()));
  CREMA_CUDA_TRY(cudaMemcpyAsync(destination + data_bytes, source + data_bytes, label_bytes,
                                 cudaMemcpyHostToDevice, stream.native_handle()));
}

// The overlap benchmarks' step: about 1.25 uploads of a batch long, in clock cycles of the step's
// multiprocessor, calibrated once by timing a step of a known count.
struct step_length {
  std::int64_t cycles = 0;
  double upload_ms = 0;  // one batch's raw upload
  double step_ms = 0;    // one step of `cycles`
};

const step_length& overlap_step() {
  static const step_length calibrated = [] {
    pinned_memory host(batch_bytes);
    device_memory device(batch_bytes);
    device_memory sink(sizeof(float));
    crema::cuda_stream stream;
    const auto step = [&](std::int64_t cycles) {
      gpu::busy_step(device.floats(), record_elements, batch_size, sink.floats(), cycles,
                     stream.native_handle());
    };
    step_length length;
    length.upload_ms = median_milliseconds(stream, [&] { copy_batch(host, device, stream); });
    constexpr std::int64_t probe = std::int64_t{1} << 22;
    const double probe_ms = median_milliseconds(stream, [&] { step(probe); });
    length.cycles = static_cast<std::int64_t>(static_cast<double>(probe) * 1.25 * length.upload_ms /
                                              std::max(probe_ms, 1e-6));
    length.step_ms = median_milliseconds(stream, [&] { step(length.cycles); });
    return length;
  }();
  return calibrated;
}

void count_batches(benchmark::State& state) {
  const auto batches = static_cast<std::int64_t>(state.iterations()) * batches_per_round;
  state.SetBytesProcessed(batches * static_cast<std::int64_t>(batch_bytes));
  state.counters["batches_per_s"] =
      benchmark::Counter(static_cast<double>(batches), benchmark::Counter::kIsRate);
}

// deliver: crema's pipeline; the step costs nothing.
void crema_deliver(benchmark::State& state) {
  auto pipe = make_pipeline();
  auto consumer = pipe.consumer(0);
  crema::cuda_stream compute;
  device_memory sink(sizeof(float));
  const auto round = [&] {
    for (int i = 0; i < batches_per_round; ++i) {
      auto batch = consumer.pull();
      (void)gpu::touch_and_release(batch, compute, sink.floats());
    }
    compute.synchronize();
  };
  round();  // every slot's pinned and device memory made
  for (auto _ : state) round();
  count_batches(state);
}

// deliver: the same bytes copied from pinned memory back to back, nothing else.
void raw_deliver(benchmark::State& state) {
  pinned_memory host(batch_bytes);
  device_memory device(batch_bytes);
  crema::cuda_stream copies;
  const auto round = [&] {
    for (int i = 0; i < batches_per_round; ++i) copy_batch(host, device, copies);
    copies.synchronize();
  };
  round();
  for (auto _ : state) round();
  count_batches(state);
}

// overlap: crema's pipeline with a step of about 1.25 uploads; the waits for uploads timed.
void crema_overlap(benchmark::State& state) {
  const std::int64_t cycles = overlap_step().cycles;
  auto pipe = make_pipeline();
  auto consumer = pipe.consumer(0);
  crema::cuda_stream compute;
  device_memory sink(sizeof(float));
  std::array<timing_event, batches_per_round> before_wait;
  std::array<timing_event, batches_per_round> after_wait;
  timing_event end;
  double waiting_ms = 0;
  double span_ms = 0;
  const auto round = [&](bool timed) {
    for (int i = 0; i < batches_per_round; ++i) {
      const auto at = static_cast<std::size_t>(i);
      auto batch = consumer.pull();
      before_wait[at].record(compute);
      const auto data = batch->device(compute).data;
      after_wait[at].record(compute);
      gpu::busy_step(data.data(), record_elements, batch->size(), sink.floats(), cycles,
                     compute.native_handle());
      batch.release_after(compute.record());
    }
    end.record(compute);
    compute.synchronize();
    if (!timed) return;
    for (std::size_t i = 0; i < before_wait.size(); ++i) {
      waiting_ms += after_wait[i].since(before_wait[i]);
    }
    span_ms += end.since(before_wait[0]);
  };
  round(false);
  for (auto _ : state) round(true);
  count_batches(state);
  state.counters["stream_wait_fraction"] = span_ms > 0 ? waiting_ms / span_ms : 0.0;
  state.counters["upload_ms"] = overlap_step().upload_ms;
  state.counters["step_ms"] = overlap_step().step_ms;
}

// overlap: the same steps alone, on a batch already on the device.
void raw_overlap(benchmark::State& state) {
  const std::int64_t cycles = overlap_step().cycles;
  device_memory device(batch_bytes);
  device_memory sink(sizeof(float));
  crema::cuda_stream compute;
  const auto round = [&] {
    for (int i = 0; i < batches_per_round; ++i) {
      gpu::busy_step(device.floats(), record_elements, batch_size, sink.floats(), cycles,
                     compute.native_handle());
    }
    compute.synchronize();
  };
  round();
  for (auto _ : state) round();
  count_batches(state);
}

BENCHMARK(crema_deliver)->Name("crema/deliver")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(raw_deliver)->Name("baseline/deliver")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(crema_overlap)->Name("crema/overlap")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(raw_overlap)->Name("baseline/overlap")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  return crema::bench::gpu::run_on_gpu(
      argc, argv, "device_batches on a GPU", [](const crema::bench::ratio_reporter& reporter) {
        const auto bandwidth = [&](const char* name) {
          const double nanoseconds = reporter.nanoseconds(name);
          return nanoseconds > 0
                     ? static_cast<double>(batches_per_round * batch_bytes) / nanoseconds
                     : 0.0;
        };
        const double crema = bandwidth("crema/deliver/real_time");
        const double raw = bandwidth("baseline/deliver/real_time");
        fmt::print(
            "\ndeliver: {:.2f} GB/s through the pipeline, {:.2f} GB/s raw pinned copies: "
            "{:.3f} of raw (target >= 0.9)\n",
            crema, raw, raw > 0 ? crema / raw : 0.0);
        const char* overlap = "crema/overlap/real_time";
        fmt::print(
            "overlap: step {:.3f} ms, upload {:.3f} ms; the consumer's stream waited for uploads "
            "{:.2f}% of its time (target < 5%)\n",
            reporter.counter(overlap, "step_ms"), reporter.counter(overlap, "upload_ms"),
            100.0 * reporter.counter(overlap, "stream_wait_fraction"));
      });
}
