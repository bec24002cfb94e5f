// Caffe's whole data layer into CUDA device_batches on a GPU: lmdb_source, caffe_batcher (decode,
// random crop, mirror, mean values, scale) into pinned host memory, the upload started by the
// producer that filled the batch, the consumer's stream waiting for it and reading the batch.
// The datasets of benchmarks/caffe_data_layer (50,000 x 3x32x32, crop 28, batch 64; 5,000 x
// 3x256x256, crop 224, batch 32), one pass per iteration, on 2, 4, 8 and 16 producer threads,
// each batch uploading on a stream of its own (crema's default) and, beside it, on one stream
// its consumer's batches share, and through one batch_uploader (a thread that starts every
// batch's upload on its stream, so that the producers make no runtime call to finish a batch),
// and as batches of bytes (crema-bytes/: the crop and mirror on the host, a quarter of the
// bytes uploaded, the mean and scale by a kernel on the consumer's stream).
// Beside them, in the same run: the same pipeline into host batches of floats and of bytes
// (what the host alone delivers), the hand-written loop of crema-bench-caffe_data_layer on as
// many threads (hand/: the same work with no pipeline), and a raw pinned cudaMemcpyAsync of the
// same bytes (what the uploads alone would take), the producers' runtime calls alone (calls/: each
// thread finishes a batch of one float over and over, and then whole small batches that it barely
// writes), and where the small feed's producers spend a batch (profile/). Samples per second and
// upload GB/s, the host's CPU a sample, and who waited (the consumer for batches, the producers for
// slots); the data layer is bound by the CPU's work where the ratio is above 1.
#include <crema/core/cuda/device.hpp>
#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/caffe/caffe_normalization.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/pipeline/batch_uploader.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>
#include <crema/pipeline/stats.hpp>

#include "caffe_data_layer/hand_loop.hpp"
#include "caffe_data_layer/shape.hpp"
#include "gpu/gpu_benchmark.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <type_traits>
#include <vector>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

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
// Bytes one pass uploads: every record's values (floats, or bytes) and its float label.
std::size_t pass_bytes(const dataset& set, std::size_t records,
                       std::size_t value_bytes = sizeof(float)) {
  return records * (output_elements(set) * value_bytes + sizeof(float));
}
void count_pass(benchmark::State& state, const dataset& set, std::size_t records,
                std::size_t value_bytes = sizeof(float)) {
  const auto passes = static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(passes * static_cast<std::int64_t>(records));
  state.SetBytesProcessed(passes *
                          static_cast<std::int64_t>(pass_bytes(set, records, value_bytes)));
}

// Who starts a batch's upload, and on which stream.
enum class uploads_on {
  own_stream,     // its producer, on a stream of the batch's own (crema's default)
  shared_stream,  // its producer, on one stream the consumer's batches share
  uploader,       // one batch_uploader's thread, on its stream
};

// Where the feed waited over the timed passes (its pipeline_stats): the consumer for a batch (the
// producers are the bound) or the producers for a free slot (the consumer, or the uploads, are).
class feed_waits {
 public:
  explicit feed_waits(const crema::pipeline_stats& start) noexcept
      : start_(start), begun_(std::chrono::steady_clock::now()) {}

  // Counters: consumer_wait_share (of the wall time), producer_wait_share (of the producers'
  // wall time together).
  void count(benchmark::State& state, const crema::pipeline_stats& end,
             std::size_t producers) const {
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - begun_;
    if (wall.count() <= 0) return;
    const std::chrono::duration<double> consumer = end.consumer_wait - start_.consumer_wait;
    const std::chrono::duration<double> producer = end.producer_wait - start_.producer_wait;
    state.counters["consumer_wait_share"] = consumer / wall;
    state.counters["producer_wait_share"] = producer / (wall * static_cast<double>(producers));
  }

 private:
  crema::pipeline_stats start_;
  std::chrono::steady_clock::time_point begun_;
};

// One pipeline of `batcher` over `set`'s database on state.range(0) producers and threads, a pass
// per iteration: `step(batch, compute)` is the consumer's step for each batch (it returns the
// records it read; device work goes on `compute`, waited for at the end of each pass). One
// untimed pass first (every slot's memory made, the database in the page cache), then
// `before_timing`, then the timed ones; counts samples and bytes (`value_bytes` a value), the
// host's cost (gpu::host_cost) and who waited (feed_waits) over the timed passes. `prefetch`:
// the pipeline's slots (0: its default).
template <class Batcher, class Step>
void feed_passes(
    benchmark::State& state, const dataset& set, Batcher batcher, Step step,
    std::size_t value_bytes = sizeof(float), void (*before_timing)() = [] {},
    std::size_t prefetch = 0) {
  const auto& db = crema::bench::data_layer::database_of(set);
  const auto threads = static_cast<std::size_t>(state.range(0));
  crema::double_buffered_pipeline pipe{crema::lmdb_source(db.path()),
                                       std::move(batcher),
                                       {.batch_size = set.batch,
                                        .prefetch = prefetch,
                                        .producers = threads,
                                        .threads = threads,
                                        .seed = 7}};
  auto consumer = pipe.consumer(0);
  crema::cuda_stream compute;
  const auto pass = [&] {
    for (std::size_t read = 0; read < db.records();) {
      auto batch = consumer.pull();
      read += step(batch, compute);
    }
    compute.synchronize();
  };
  pass();
  before_timing();
  const gpu::host_cost cost;
  const feed_waits waits(pipe.stats());
  for (auto _ : state) pass();
  count_pass(state, set, db.records(), value_bytes);
  cost.count(state, static_cast<double>(state.iterations()) * static_cast<double>(db.records()));
  waits.count(state, pipe.stats(), threads);
}

void data_layer(benchmark::State& state, const dataset& set, uploads_on where) {
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
  gpu::device_memory sink(sizeof(float));
  feed_passes(state, set, std::move(batcher), [&](auto& batch, crema::cuda_stream& compute) {
    return gpu::touch_and_release(batch, compute, sink.floats());
  });
}

// The same data layer into CUDA batches of bytes (the crop and mirror on the host, a quarter of
// the floats' bytes uploaded), the consumer's stream making them floats (the mean and scale:
// crema::cuda::caffe_normalize) before its step reads them: what the consumer gets is the float
// feed's, bit for bit.
void byte_data_layer(benchmark::State& state, const dataset& set) {
  using byte_batch = crema::cuda::device_batch<std::uint8_t>;
  crema::caffe_batcher batcher({3, set.side, set.side}, crema::bench::data_layer::transform_of(set),
                               [](const crema::batch_context& where, crema::record_shape shape) {
                                 return byte_batch(where.batch_size, shape);
                               });
  const crema::caffe_normalization normalization = batcher.transform().normalization();
  const crema::record_shape shape = batcher.shape();
  gpu::device_memory sink(sizeof(float));
  gpu::device_memory floats(set.batch * shape.elements() * sizeof(float));
  const auto step = [&](auto& batch, crema::cuda_stream& compute) {
    const auto bytes = batch->device(compute).data;
    gpu::normalize_bytes(bytes.data(), bytes.size(), floats.floats(), shape, normalization,
                         compute.native_handle());
    const std::size_t records = batch->size();
    gpu::touch_records(floats.floats(), shape.elements(), records, sink.floats(),
                       compute.native_handle());
    batch.release_after(compute.record());
    return records;
  };
  feed_passes(state, set, std::move(batcher), step, 1);
}

// The same pipeline into host batches on the same threads, nothing uploaded: what the host
// alone delivers, the figure a feed of device batches is held to (the GPU-feed issue's target
// is 0.9 of it at every thread count). Of floats (host/), and of bytes (host-bytes/: the crop and
// mirror alone, the host's share of crema-bytes/).
template <class T>
void host_data_layer(benchmark::State& state, const dataset& set) {
  crema::caffe_batcher batcher({3, set.side, set.side}, crema::bench::data_layer::transform_of(set),
                               crema::make_host_batch<T>{});
  feed_passes(
      state, set, std::move(batcher),
      [](auto& batch, crema::cuda_stream&) {
        benchmark::DoNotOptimize(batch->data.data());
        return batch->size();
      },
      sizeof(T));
}

// The hand-written loop on the same threads: each its own cursor over every n-th record, the
// float transform into a batch buffer of its own (crema::bench::data_layer::hand_loop).
void hand_data_layer(benchmark::State& state, const dataset& set) {
  crema::bench::data_layer::hand_loop<false>(state, set);
}

void float_host_data_layer(benchmark::State& state, const dataset& set) {
  host_data_layer<float>(state, set);
}
void byte_host_data_layer(benchmark::State& state, const dataset& set) {
  host_data_layer<std::uint8_t>(state, set);
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
// With `set`, each batch is one of that set's and uploads all its bytes, while the host still
// writes one float a record: the runtime calls and the copies, without the producers' work.
void producer_calls(benchmark::State& state, const dataset* set) {
  const std::size_t size = set != nullptr ? set->batch : 1;
  const crema::record_shape shape =
      set != nullptr ? crema::record_shape{3, set->crop, set->crop} : crema::record_shape{};
  std::vector<batch_type> batches;
  for (int i = 0; i < 4; ++i) batches.emplace_back(size, shape);
  std::size_t next = 0;
  for (auto _ : state) {
    batch_type& batch = batches[next];
    next = (next + 1) % batches.size();
    for (std::size_t i = 0; i < size; ++i) {
      batch.record(i)[0] = 1.0F;
      batch.set_label(i, 0.0F);
    }
    batch.finish({.size = size});
  }
  for (const batch_type& batch : batches) (void)batch.device();  // the uploads done
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// Where a producer's time goes in the small feed (profile/): each batch type below is timed by
// `timed`, and a feed of it reports, per batch, how long its first record() took (for a CUDA batch,
// the wait for the slot's last upload), the transform's time a sample (from record(i) to
// set_label(i)), and how long finish() took (the upload started). Beside the default CUDA batch
// and the host batch: the CUDA batch of bytes (the crop and mirror alone, a quarter of the bytes
// written and uploaded; its consumer's stream waits for the upload, and the slot goes back),
// the CUDA batch that never uploads (pinned memory, slots refilled oldest
// first, no runtime call, no copy), alone and beside raw uploads of another buffer at the link's
// rate: whether the memory, the link's traffic or the uploads of what the producers have just
// written cost them their time. (Write-combined and huge-page pinned memory, newest-first refills
// and streamed stores were tried too: docs/performance.md.) And the default CUDA batch with twice
// the slots a thread (cuda-more-slots/): whether a refill waits for its slot's last upload because
// the slot went back to the producers too recently (the default leaves two free beside those being
// filled, so a refill most often takes one whose upload was started a batch or two before).
// And the default CUDA batch whose producer evicts the slot from the caches before it writes it
// again (cuda-evict/, x86 only): whether the copy engine's reads of the lines the producer has
// just written leave them where its next stores into them are slow, and stores into memory that
// no cache holds cost it less, eviction included.
struct fill_totals {
  std::atomic<std::int64_t> first_record_ns{0};
  std::atomic<std::int64_t> transform_ns{0};
  std::atomic<std::int64_t> finish_ns{0};
  std::atomic<std::int64_t> batches{0};
  std::atomic<std::int64_t> records{0};

  void reset() {
    for (auto* total : {&first_record_ns, &transform_ns, &finish_ns, &batches, &records}) {
      total->store(0);
    }
  }
  void count(benchmark::State& state) const {
    const double batch_count = static_cast<double>(batches.load());
    const double record_count = static_cast<double>(records.load());
    if (batch_count <= 0 || record_count <= 0) return;
    state.counters["first_record_us"] =
        static_cast<double>(first_record_ns.load()) / batch_count / 1e3;
    state.counters["transform_us"] = static_cast<double>(transform_ns.load()) / record_count / 1e3;
    state.counters["finish_us"] = static_cast<double>(finish_ns.load()) / batch_count / 1e3;
  }
};
fill_totals fill_time;

// `Batch`, its fill timed: a producer's totals go into fill_time when it finishes the batch.
template <class Batch>
class timed : public Batch {
 public:
  using Batch::Batch;
  using clock = std::chrono::steady_clock;

  auto record(std::size_t i) {
    const auto asked = clock::now();
    const auto out = Batch::record(i);
    started_ = clock::now();
    if (i == 0) first_record_ += started_ - asked;
    return out;
  }
  void set_label(std::size_t i, typename Batch::label_type label) {
    transform_ += clock::now() - started_;
    ++records_;
    Batch::set_label(i, label);
  }
  void finish(const crema::batch_info& info) {
    const auto asked = clock::now();
    Batch::finish(info);
    const auto finish = clock::now() - asked;
    const auto ns = [](clock::duration time) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(time).count();
    };
    fill_time.first_record_ns.fetch_add(ns(first_record_), std::memory_order_relaxed);
    fill_time.transform_ns.fetch_add(ns(transform_), std::memory_order_relaxed);
    fill_time.finish_ns.fetch_add(ns(finish), std::memory_order_relaxed);
    fill_time.batches.fetch_add(1, std::memory_order_relaxed);
    fill_time.records.fetch_add(records_, std::memory_order_relaxed);
    first_record_ = transform_ = clock::duration::zero();
    records_ = 0;
  }

 private:
  clock::time_point started_{};
  clock::duration first_record_{};
  clock::duration transform_{};
  std::int64_t records_ = 0;
};

// A CUDA batch that never uploads: pinned memory, refilled oldest first (it retires after device
// work), no runtime call.
class no_upload_batch : public batch_type {
 public:
  using batch_type::batch_type;
  void finish(const crema::batch_info& info) noexcept { size_ = info.size; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  std::size_t size_ = 0;
};

#if defined(__x86_64__)
// Writes back and evicts the lines of `bytes` from every cache (CLFLUSHOPT, or CLFLUSH where the
// CPU lacks it), the evictions ordered before the stores that follow.
[[gnu::target("clflushopt")]] void evict_unordered(const std::byte* line, const std::byte* end) {
  // GCC's intrinsic takes a pointer to non-const; the instruction writes nothing.
  for (; line < end; line += 64) _mm_clflushopt(const_cast<std::byte*>(line));
}
void evict_from_caches(std::span<const std::byte> bytes) {
  static const bool optimized = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ebx & (1U << 23)) != 0;
  }();
  // From the start of the first line (64 bytes on x86).
  const std::byte* const line = bytes.data() - reinterpret_cast<std::uintptr_t>(bytes.data()) % 64;
  const std::byte* const end = bytes.data() + bytes.size();
  if (optimized) {
    evict_unordered(line, end);
  } else {
    for (const std::byte* at = line; at < end; at += 64) _mm_clflush(at);
  }
  _mm_sfence();
}

// A CUDA batch whose producer evicts its whole block from the caches once the slot's last upload
// is done (its first record() waits for it), before it writes the first record.
class evicting_batch : public batch_type {
 public:
  using batch_type::batch_type;
  std::span<float> record(std::size_t i) {
    const std::span<float> out = batch_type::record(i);
    if (!evicted_) {
      evict_from_caches(std::as_bytes(buffer().host()));
      evicted_ = true;
    }
    return out;
  }
  void finish(const crema::batch_info& info) {
    evicted_ = false;
    batch_type::finish(info);
  }

 private:
  bool evicted_ = false;
};
#endif

enum class profiled {
  cuda,
  cuda_more_slots,
  cuda_bytes,
  cuda_evict,
  host,
  no_upload,
  no_upload_beside_copies
};

// Raw pinned uploads of a buffer of their own, back to back on a thread of their own while it
// lives: the link's traffic without the feed's bytes, beside a feed that uploads nothing.
class background_copies {
 public:
  background_copies() : thread_([this] { run(); }) {}
  background_copies(const background_copies&) = delete;
  background_copies& operator=(const background_copies&) = delete;
  ~background_copies() { stop(); }

  // Stops the copies; throws their error, if one stopped them, on the caller's thread.
  void finish() {
    stop();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void run() {
    try {
      constexpr std::size_t bytes = std::size_t{64} << 20;
      gpu::pinned_memory host(bytes);
      gpu::device_memory device(bytes);
      crema::cuda_stream copies;
      while (!stop_) {
        for (int i = 0; i < 4; ++i) {
          CREMA_CUDA_TRY(cudaMemcpyAsync(device.data, host.data, bytes, cudaMemcpyHostToDevice,
                                         copies.native_handle()));
        }
        copies.synchronize();
      }
    } catch (...) {
      error_ = std::current_exception();  // read once the thread is joined
    }
  }

  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::thread thread_;
};

// `beside_copies`: raw uploads of another buffer run meanwhile; `more_slots`: twice the slots a
// producer thread, and two more.
template <class Batch>
void profiled_feed(benchmark::State& state, bool uploads, bool beside_copies = false,
                   bool more_slots = false) {
  const dataset& set = small;
  std::optional<background_copies> copies;
  if (beside_copies) copies.emplace();
  crema::caffe_batcher batcher({3, set.side, set.side}, crema::bench::data_layer::transform_of(set),
                               [](const crema::batch_context& where, crema::record_shape shape) {
                                 return timed<Batch>(where.batch_size, shape);
                               });
  gpu::device_memory sink(sizeof(float));
  const auto step = [&](auto& batch, crema::cuda_stream& compute) -> std::size_t {
    if constexpr (std::is_same_v<typename Batch::value_type, std::uint8_t>) {
      (void)batch->device(compute);  // the stream waits for the upload
      batch.release_after(compute.record());
      return batch->size();
    } else if constexpr (requires { batch->device(compute); }) {
      if (uploads) return gpu::touch_and_release(batch, compute, sink.floats());
    }
    benchmark::DoNotOptimize(&*batch);
    return batch->size();
  };
  const auto threads = static_cast<std::size_t>(state.range(0));
  feed_passes(
      state, set, std::move(batcher), step, sizeof(typename Batch::value_type),
      [] { fill_time.reset(); }, more_slots ? 2 * threads + 2 : 0);
  if (copies) copies->finish();
  fill_time.count(state);
}
void profiled_data_layer(benchmark::State& state, profiled what) {
  switch (what) {
    case profiled::cuda:
      return profiled_feed<batch_type>(state, true);
    case profiled::cuda_more_slots:
      return profiled_feed<batch_type>(state, true, false, true);
    case profiled::cuda_bytes:
      return profiled_feed<crema::cuda::device_batch<std::uint8_t>>(state, true);
    case profiled::cuda_evict:
#if defined(__x86_64__)
      return profiled_feed<evicting_batch>(state, true);
#else
      state.SkipWithError("cuda-evict/ evicts with x86's CLFLUSHOPT");
      return;
#endif
    case profiled::host:
      return profiled_feed<crema::host_batch<float>>(state, false);
    case profiled::no_upload:
      return profiled_feed<no_upload_batch>(state, false);
    case profiled::no_upload_beside_copies:
      return profiled_feed<no_upload_batch>(state, false, true);
  }
}
void profile_threads(benchmark::internal::Benchmark* bench) {
  bench->ArgName("threads")->Arg(4)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(profiled_data_layer, cuda, profiled::cuda)
    ->Name("profile/cuda/data_layer/small")
    ->Apply(profile_threads);
BENCHMARK_CAPTURE(profiled_data_layer, cuda_more_slots, profiled::cuda_more_slots)
    ->Name("profile/cuda-more-slots/data_layer/small")
    ->Apply(profile_threads);
BENCHMARK_CAPTURE(profiled_data_layer, cuda_bytes, profiled::cuda_bytes)
    ->Name("profile/cuda-bytes/data_layer/small")
    ->Apply(profile_threads);
BENCHMARK_CAPTURE(profiled_data_layer, cuda_evict, profiled::cuda_evict)
    ->Name("profile/cuda-evict/data_layer/small")
    ->Apply(profile_threads);
BENCHMARK_CAPTURE(profiled_data_layer, host, profiled::host)
    ->Name("profile/host/data_layer/small")
    ->Apply(profile_threads);
BENCHMARK_CAPTURE(profiled_data_layer, no_upload, profiled::no_upload)
    ->Name("profile/cuda-no-upload/data_layer/small")
    ->Apply(profile_threads);
BENCHMARK_CAPTURE(profiled_data_layer, no_upload_beside_copies, profiled::no_upload_beside_copies)
    ->Name("profile/cuda-no-upload-beside-copies/data_layer/small")
    ->Apply(profile_threads);
BENCHMARK_CAPTURE(producer_calls, one_float, nullptr)
    ->Name("calls/data_layer/producer")
    ->Threads(2)
    ->Threads(4)
    ->Threads(8)
    ->Threads(16)
    ->UseRealTime();
BENCHMARK_CAPTURE(producer_calls, small, &small)
    ->Name("calls/data_layer/producer_copies/small")
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
BENCHMARK_CAPTURE(byte_data_layer, small, small)
    ->Name("crema-bytes/data_layer/small")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(float_host_data_layer, small, small)
    ->Name("host/data_layer/small")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(byte_host_data_layer, small, small)
    ->Name("host-bytes/data_layer/small")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(hand_data_layer, small, small)->Name("hand/data_layer/small")->Apply(by_threads);
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
BENCHMARK_CAPTURE(byte_data_layer, large, large)
    ->Name("crema-bytes/data_layer/large")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(float_host_data_layer, large, large)
    ->Name("host/data_layer/large")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(byte_host_data_layer, large, large)
    ->Name("host-bytes/data_layer/large")
    ->Apply(by_threads);
BENCHMARK_CAPTURE(hand_data_layer, large, large)->Name("hand/data_layer/large")->Apply(by_threads);
BENCHMARK_CAPTURE(raw_uploads, large, large)->Name("baseline/data_layer/large")->Apply(by_threads);

}  // namespace

int main(int argc, char** argv) {
  return gpu::run_on_gpu(
      argc, argv, "the Caffe data layer into CUDA device_batches",
      [](const crema::bench::ratio_reporter& reporter) {
        fmt::print("\nwhere the small feed's producers spend a batch (profile/)\n");
        for (const long threads : {4L, 16L}) {
          for (const char* feed : {"host", "cuda", "cuda-more-slots", "cuda-bytes", "cuda-evict",
                                   "cuda-no-upload", "cuda-no-upload-beside-copies"}) {
            const auto of =
                fmt::format("profile/{}/data_layer/small/threads:{}/real_time", feed, threads);
            const double ns = reporter.nanoseconds(of);
            if (ns <= 0) continue;
            const double records =
                static_cast<double>(crema::bench::data_layer::database_of(small).records());
            fmt::print(
                "  {} threads, {}: {:.0f} samples/s; first record {:.1f} us, transform {:.2f} us "
                "a sample, finish {:.1f} us; host CPU {:.2f} us a sample; waits {:.2f} and "
                "{:.2f}\n",
                threads, feed, records / ns * 1e9, reporter.counter(of, "first_record_us"),
                reporter.counter(of, "transform_us"), reporter.counter(of, "finish_us"),
                reporter.counter(of, "host_cpu_us"), reporter.counter(of, "consumer_wait_share"),
                reporter.counter(of, "producer_wait_share"));
          }
        }
        fmt::print(
            "\nsamples/s and upload GB/s, one pass of each database (the raw uploads "
            "bound what any data layer can deliver)\n");
        for (const dataset* set : {&small, &large}) {
          for (const long threads : thread_counts) {
            const auto name = fmt::format("data_layer/{}/threads:{}/real_time", set->name, threads);
            const double crema_ns = reporter.nanoseconds("crema/" + name);
            const double shared_ns = reporter.nanoseconds("crema-shared-stream/" + name);
            const double uploader_ns = reporter.nanoseconds("crema-uploader/" + name);
            const double bytes_ns = reporter.nanoseconds("crema-bytes/" + name);
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
            const double hand_ns = reporter.nanoseconds("hand/" + name);
            if (hand_ns > 0) {
              fmt::print(
                  "    the hand-written loop on the same threads: {:.0f} samples/s; CUDA batches "
                  "{:.3f} of it\n",
                  static_cast<double>(records) / hand_ns * 1e9, hand_ns / crema_ns);
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
            if (bytes_ns > 0) {
              // Held to the host's batches of bytes too: the same work on the host, nothing
              // uploaded.
              const double host_bytes_ns = reporter.nanoseconds("host-bytes/" + name);
              fmt::print(
                  "    batches of bytes, made floats on the device: {:.0f} samples/s ({:.3f} of "
                  "host batches; host batches of bytes {:.0f} samples/s, {:.3f} of them)\n",
                  static_cast<double>(records) / bytes_ns * 1e9,
                  host_ns > 0 ? host_ns / bytes_ns : 0.0,
                  host_bytes_ns > 0 ? static_cast<double>(records) / host_bytes_ns * 1e9 : 0.0,
                  host_bytes_ns > 0 ? host_bytes_ns / bytes_ns : 0.0);
            }
            constexpr std::array feeds{"host",           "crema",       "crema-shared-stream",
                                       "crema-uploader", "crema-bytes", "host-bytes"};
            // The host's cost of a sample (gpu::host_cost): where a feed stops scaling, whether
            // the host works harder for each sample or waits.
            fmt::print("    host CPU a sample (system's share, sleeps a 1,000):");
            for (const char* feed : feeds) {
              const std::string of = fmt::format("{}/{}", feed, name);
              if (reporter.nanoseconds(of) <= 0) continue;
              fmt::print(
                  " {} {:.2f} us ({:.2f}, {:.0f});", feed, reporter.counter(of, "host_cpu_us"),
                  reporter.counter(of, "host_system_share"), reporter.counter(of, "sleeps_per_1k"));
            }
            fmt::print("\n");
            // Who waited (feed_waits): a consumer that waits is fed too slowly; producers that
            // wait for slots are held back by the consumer or the uploads.
            fmt::print("    waits, consumer's share and producers' share of the time:");
            for (const char* feed : feeds) {
              const std::string of = fmt::format("{}/{}", feed, name);
              if (reporter.nanoseconds(of) <= 0) continue;
              fmt::print(" {} {:.2f} and {:.2f};", feed,
                         reporter.counter(of, "consumer_wait_share"),
                         reporter.counter(of, "producer_wait_share"));
            }
            fmt::print("\n");
            if (set == &small) {
              // The batches a second of the producers' runtime calls alone, on as many threads.
              const double calls = reporter.counter(
                  fmt::format("calls/data_layer/producer/real_time/threads:{}", threads),
                  "items_per_second");
              const double copies = reporter.counter(
                  fmt::format("calls/data_layer/producer_copies/small/real_time/threads:{}",
                              threads),
                  "items_per_second");
              const double batches =
                  static_cast<double>(records) / crema_ns * 1e9 / static_cast<double>(set->batch);
              if (calls > 0) {
                fmt::print(
                    "    the producers' runtime calls alone: {:.0f} batches/s on {} threads; "
                    "the feed made {:.0f} ({:.3f} of it)\n",
                    calls, threads, batches, batches / calls);
              }
              if (copies > 0) {
                fmt::print(
                    "    the same calls uploading whole batches: {:.0f} batches/s ({:.3f} of the "
                    "feed's)\n",
                    copies, batches / copies);
              }
            }
          }
        }
        fmt::print("\nsamples/s on 16 threads over 4 (target 3 for the large records):\n");
        for (const dataset* set : {&small, &large}) {
          for (const char* feed : {"crema", "crema-bytes", "host", "host-bytes", "hand"}) {
            const auto pass_ns = [&](long threads) {
              return reporter.nanoseconds(
                  fmt::format("{}/data_layer/{}/threads:{}/real_time", feed, set->name, threads));
            };
            const double four = pass_ns(4);
            const double sixteen = pass_ns(16);
            if (four <= 0 || sixteen <= 0) continue;
            fmt::print("  {} records, {}: {:.2f}\n", set->name, feed, four / sixteen);
          }
        }
      });
}
