// Caffe's whole data layer into CUDA device_batches on a GPU: lmdb_source, caffe_batcher (decode,
// random crop, mirror, mean values, scale) into pinned host memory, the upload started by the
// producer that filled the batch, the consumer's stream waiting for it and reading the batch.
// The datasets of benchmarks/caffe_data_layer (50,000 x 3x32x32, crop 28, batch 64; 5,000 x
// 3x256x256, crop 224, batch 32), one pass per iteration, on 2, 4, 8 and 16 producer threads,
// each batch uploading on a stream of its own (crema's default) and, beside it, on one stream
// its consumer's batches share, and through one batch_uploader (a thread that starts every
// batch's upload on its stream, so that the producers make no runtime call to finish a batch).
// Beside them, in the same run: the same pipeline into host batches
// (what the host alone delivers) and a raw pinned cudaMemcpyAsync of the same bytes (what the
// uploads alone would take), and the producers' runtime calls alone (calls/: each thread finishes
// a batch of one float over and over). Samples per second and upload GB/s; the data
// layer is bound by the CPU's work where the ratio is above 1.
#include <crema/core/cuda/device.hpp>
#include <crema/io/caffe_batcher.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/pipeline/batch_uploader.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include "caffe_data_layer/shape.hpp"
#include "gpu/gpu_benchmark.hpp"

#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace {

namespace gpu = crema::bench::gpu;
using crema::bench::data_layer::dataset;
using crema::bench::data_layer::large;
using crema::bench::data_layer::small;

using batch_type = crema::cuda::device_batch<float>;

constexpr std::array<long, 4> thread_counts{2, 4, 8, 16};

void by_threads(benchmark::internal::Benchmark* bench) {
  bench->ArgName("threads");
  for (const long threads : thread_counts) bench->Arg(threads);
  bench->UseRealTime()->Unit(benchmark::kMillisecond);
}

std::size_t output_elements(const dataset& set) { return 3 * set.crop * set.crop; }
// Bytes one pass uploads: every record's floats and its label.
std::size_t pass_bytes(const dataset& set, std::size_t records) {
  return records * (output_elements(set) + 1) * sizeof(float);
}
void count_pass(benchmark::State& state, const dataset& set, std::size_t records) {
  const auto passes = static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(passes * static_cast<std::int64_t>(records));
  state.SetBytesProcessed(passes * static_cast<std::int64_t>(pass_bytes(set, records)));
}

// Who starts a batch's upload, and on which stream.
enum class uploads_on {
  own_stream,     // its producer, on a stream of the batch's own (crema's default)
  shared_stream,  // its producer, on one stream the consumer's batches share
  uploader,       // one batch_uploader's thread, on its stream
};

void data_layer(benchmark::State& state, const dataset& set, uploads_on where) {
  const auto& db = crema::bench::data_layer::database_of(set);
  const auto threads = static_cast<std::size_t>(state.range(0));
  auto shared =
      where == uploads_on::shared_stream ? std::make_shared<crema::cuda_stream>() : nullptr;
  auto uploader = where == uploads_on::uploader
                      ? std::make_shared<crema::batch_uploader<crema::cuda_stream>>(
                            crema::cuda::current_device())
                      : nullptr;
  crema::caffe_batcher batcher(
      {3, set.side, set.side}, crema::bench::data_layer::transform_of(set),
      [shared, uploader](const crema::batch_context& where_to, crema::record_shape shape) {
        if (uploader) return batch_type(where_to.batch_size, shape, uploader);
        if (shared) return batch_type(where_to.batch_size, shape, shared);
        return batch_type(where_to.batch_size, shape);
      });
  crema::double_buffered_pipeline pipe{
      crema::lmdb_source(db.path()),
      batcher,
      {.batch_size = set.batch, .producers = threads, .threads = threads, .seed = 7}};
  auto consumer = pipe.consumer(0);
  crema::cuda_stream compute;
  gpu::device_memory sink(sizeof(float));
  const auto pass = [&] {
    for (std::size_t read = 0; read < db.records();) {
      auto batch = consumer.pull();
      read += gpu::touch_and_release(batch, compute, sink.floats());
    }
    compute.synchronize();
  };
  pass();  // every slot's pinned and device memory made, the database in the page cache
  const gpu::host_cost cost;
  for (auto _ : state) pass();
  count_pass(state, set, db.records());
  cost.count(state, static_cast<double>(state.iterations()) * static_cast<double>(db.records()));
}

// The same pipeline into host batches on the same threads, nothing uploaded: what the host
// alone delivers, the figure a feed of device batches is held to (the GPU-feed issue's target
// is 0.9 of it at every thread count).
void host_data_layer(benchmark::State& state, const dataset& set) {
  const auto& db = crema::bench::data_layer::database_of(set);
  const auto threads = static_cast<std::size_t>(state.range(0));
  crema::caffe_batcher batcher({3, set.side, set.side}, crema::bench::data_layer::transform_of(set),
                               crema::make_host_batch<float>{});
  crema::double_buffered_pipeline pipe{
      crema::lmdb_source(db.path()),
      batcher,
      {.batch_size = set.batch, .producers = threads, .threads = threads, .seed = 7}};
  auto consumer = pipe.consumer(0);
  const auto pass = [&] {
    for (std::size_t read = 0; read < db.records();) {
      auto batch = consumer.pull();
      benchmark::DoNotOptimize(batch->data.data());
      read += batch->size();
    }
  };
  pass();
  const gpu::host_cost cost;
  for (auto _ : state) pass();
  count_pass(state, set, db.records());
  cost.count(state, static_cast<double>(state.iterations()) * static_cast<double>(db.records()));
}

// The same bytes, batch by batch, from pinned memory: the uploads alone.
void raw_uploads(benchmark::State& state, const dataset& set) {
  const auto& db = crema::bench::data_layer::database_of(set);
  const std::size_t batch_bytes = pass_bytes(set, set.batch);
  gpu::pinned_memory host(batch_bytes);
  gpu::device_memory device(batch_bytes);
  crema::cuda_stream copies;
  const auto pass = [&] {
    for (std::size_t read = 0; read < db.records(); read += set.batch) {
      CREMA_CUDA_TRY(cudaMemcpyAsync(device.data, host.data, batch_bytes, cudaMemcpyHostToDevice,
                                     copies.native_handle()));
    }
    copies.synchronize();
  };
  pass();
  for (auto _ : state) pass();
  count_pass(state, set, db.records());
}

// The producer's runtime calls alone: each benchmark thread fills one float into a device batch
// of its own and finishes it, over and over (the wait for the batch's last upload, one copy, one
// event: what a producer of the feed calls for each batch), so that neither records nor bytes
// cost anything. Batches a second on all threads together: where a feed's batches a second come
// near it, its producers' runtime calls are its bound.
// Four batches a thread, taken in turn, so that a batch's last upload is, as in the feed, most
// often done when it is filled again.
void producer_calls(benchmark::State& state) {
  std::vector<batch_type> batches;
  for (int i = 0; i < 4; ++i) batches.emplace_back(1, crema::record_shape{});
  std::size_t next = 0;
  for (auto _ : state) {
    batch_type& batch = batches[next];
    next = (next + 1) % batches.size();
    batch.record(0)[0] = 1.0F;
    batch.set_label(0, 0.0F);
    batch.finish({.size = 1});
  }
  for (const batch_type& batch : batches) (void)batch.device();  // the uploads done
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

BENCHMARK(producer_calls)
    ->Name("calls/data_layer/producer")
    ->Threads(2)
    ->Threads(4)
    ->Threads(8)
    ->Threads(16)
    ->UseRealTime();
BENCHMARK_CAPTURE(data_layer, small, small, uploads_on::own_stream)
    ->Name("crema/data_layer/small")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(data_layer, small_shared, small, uploads_on::shared_stream)
    ->Name("crema-shared-stream/data_layer/small")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(data_layer, small_uploader, small, uploads_on::uploader)
    ->Name("crema-uploader/data_layer/small")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(host_data_layer, small, small)->Name("host/data_layer/small")->Apply(by_threads);
BENCHMARK_CAPTURE(raw_uploads, small, small)->Name("baseline/data_layer/small")->Apply(by_threads);
BENCHMARK_CAPTURE(data_layer, large, large, uploads_on::own_stream)
    ->Name("crema/data_layer/large")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(data_layer, large_shared, large, uploads_on::shared_stream)
    ->Name("crema-shared-stream/data_layer/large")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(data_layer, large_uploader, large, uploads_on::uploader)
    ->Name("crema-uploader/data_layer/large")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(host_data_layer, large, large)->Name("host/data_layer/large")->Apply(by_threads);
BENCHMARK_CAPTURE(raw_uploads, large, large)->Name("baseline/data_layer/large")->Apply(by_threads);

}  // namespace

int main(int argc, char** argv) {
  return gpu::run_on_gpu(
      argc, argv, "the Caffe data layer into CUDA device_batches",
      [](const crema::bench::ratio_reporter& reporter) {
        fmt::print(
            "\nsamples/s and upload GB/s, one pass of each database (the raw uploads "
            "bound what any data layer can deliver)\n");
        for (const dataset* set : {&small, &large}) {
          for (const long threads : thread_counts) {
            const auto name = fmt::format("data_layer/{}/threads:{}/real_time", set->name, threads);
            const double crema_ns = reporter.nanoseconds("crema/" + name);
            const double shared_ns = reporter.nanoseconds("crema-shared-stream/" + name);
            const double uploader_ns = reporter.nanoseconds("crema-uploader/" + name);
            const double host_ns = reporter.nanoseconds("host/" + name);
            const double raw_ns = reporter.nanoseconds("baseline/" + name);
            if (crema_ns <= 0 || raw_ns <= 0) continue;  // not run (a filter)
            const std::size_t records = crema::bench::data_layer::database_of(*set).records();
            const auto bytes = static_cast<double>(pass_bytes(*set, records));
            fmt::print(
                "  {} on {} threads: {:.0f} samples/s, {:.2f} GB/s uploaded; raw pinned "
                "copies {:.2f} GB/s: {:.3f} of raw\n",
                set->name, threads, static_cast<double>(records) / crema_ns * 1e9, bytes / crema_ns,
                bytes / raw_ns, raw_ns / crema_ns);
            if (host_ns > 0) {
              fmt::print(
                  "    host batches on the same threads: {:.0f} samples/s; CUDA batches "
                  "{:.3f} of them (target 0.9)\n",
                  static_cast<double>(records) / host_ns * 1e9, host_ns / crema_ns);
            }
            if (shared_ns > 0) {
              fmt::print(
                  "    one stream shared by the batches: {:.0f} samples/s ({:.3f} of a stream "
                  "each)\n",
                  static_cast<double>(records) / shared_ns * 1e9, crema_ns / shared_ns);
            }
            if (uploader_ns > 0) {
              fmt::print(
                  "    one batch_uploader: {:.0f} samples/s ({:.3f} of a stream each; {:.3f} of "
                  "host batches)\n",
                  static_cast<double>(records) / uploader_ns * 1e9, crema_ns / uploader_ns,
                  host_ns > 0 ? host_ns / uploader_ns : 0.0);
            }
            // The host's cost of a sample (gpu::host_cost): where a feed stops scaling, whether
            // the host works harder for each sample or waits.
            fmt::print("    host CPU a sample (system's share, sleeps a 1,000):");
            for (const char* feed : {"host", "crema", "crema-shared-stream", "crema-uploader"}) {
              const std::string of = fmt::format("{}/{}", feed, name);
              if (reporter.nanoseconds(of) <= 0) continue;
              fmt::print(
                  " {} {:.2f} us ({:.2f}, {:.0f});", feed, reporter.counter(of, "host_cpu_us"),
                  reporter.counter(of, "host_system_share"), reporter.counter(of, "sleeps_per_1k"));
            }
            fmt::print("\n");
            if (set == &small) {
              // The batches a second of the producers' runtime calls alone, on as many threads.
              const double calls = reporter.counter(
                  fmt::format("calls/data_layer/producer/real_time/threads:{}", threads),
                  "items_per_second");
              if (calls > 0) {
                const double batches =
                    static_cast<double>(records) / crema_ns * 1e9 / static_cast<double>(set->batch);
                fmt::print(
                    "    the producers' runtime calls alone: {:.0f} batches/s on {} threads; "
                    "the feed made {:.0f} ({:.3f} of it)\n",
                    calls, threads, batches, batches / calls);
              }
            }
          }
        }
      });
}
