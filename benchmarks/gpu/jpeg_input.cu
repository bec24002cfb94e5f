// ImageNet-style training input on a GPU host: RandomResizedCrop(224) + flip + normalise to float
// from a folder of JPEGs, one pass per iteration, batch 128, on 2, 4, 8 and 16 producer threads:
//   crema       nvjpeg_batcher: nvJPEG decodes each batch's windows, kernels resample them; its
//               producers plan their batches, then share 4 decoders and wait while all 4 are
//               lent (the defaults); counters say where a batch's finishing step spends the
//               host's time (nvjpeg_feed_times);
//               crema-nvjpeg: more or fewer decoders, or one each, or a share of each batch
//               decoded on the CPU while every decoder is lent, or a share of the engine's JPEGs
//               decoded ahead by the producers with the GPU-assisted decoder, beside it
//   crema-hybrid  nvjpeg_batcher without the hardware engine, as on GPUs that have none: each
//               producer decodes its JPEGs with nvJPEG's GPU-assisted decoder, the Huffman
//               decoding on its own thread, the rest on the GPU
//   crema-cuda  image_batcher into CUDA device_batches: decoded and resampled on the CPU, uploaded
//   baseline    the same image_batcher into host batches: what the CPU alone delivers, measured
//               in the same run (the ratio table pairs nvJPEG with it on the same threads)
//   baseline-nvjpeg  nvJPEG alone, as its own batched API is called: each of 1 to 16 threads with
//               a handle of its own decodes whole images (no window, no resampling, no pipeline)
//               from pinned memory, batch after batch, and waits for each: where crema's nvJPEG
//               feed comes near it, nvJPEG (or its engine) is the bound, not crema.
//               decode_pageable: the same from pageable memory, which the engine reads through
//               the driver's staging (crema's batches keep their bytes pinned since 507bebd).
//               decode_pooled: the same, the engine's buffers pooled first
//               (nvjpegDecodeBatchedPreAllocate), as crema's decoder does.
//               decode_as_crema: the same images through the calls crema's decoder makes (chroma
//               interpolated, the engine's buffers pooled, each image parsed and checked,
//               nvjpegDecodeBatchedEx), so that a gap between the two is the calls' cost (each
//               thread makes them all in turn; crema's producers parse before they borrow one of
//               the 4 decoders)
// The folder: CREMA_BENCH_JPEG_FOLDER (benchmarks/jpeg_input/make_dataset.py makes one), else 512
// JPEGs cut here from the test photographs (CREMA_TEST_DATA_DIR, which the bundle's run.sh sets),
// 300 to 512 pixels a side, quality 90. The GPU-feed issue's targets: the GPU decoder at least 2x
// the host's 16 threads; CUDA batches at least 0.9 of host batches; 16 threads at least 3x 4.
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/nvjpeg/nvjpeg_batcher.cuh>
#include <crema/io/nvjpeg/nvjpeg_try.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include "gpu/gpu_benchmark.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>
#include <nvjpeg.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace gpu = crema::bench::gpu;

constexpr std::array<long, 4> thread_counts{2, 4, 8, 16};
constexpr std::size_t batch_size = 128;

void by_threads(benchmark::internal::Benchmark* bench) {
  bench->ArgName("threads");
  for (const long threads : thread_counts) bench->Arg(threads);
  bench->UseRealTime()->Unit(benchmark::kMillisecond);
}
// nvjpeg_batcher's other settings on 16 producers, each beside the default on the same threads:
// a decoder for every producer (0, as before they were shared), fewer or more; the most of a
// batch a producer decodes on the CPU while every decoder is lent, in percent (0, the default:
// it waits); the share of the engine's JPEGs it decodes, in percent (100, the default; the rest
// decoded ahead by the producers with the GPU-assisted decoder).
struct nvjpeg_setting {
  long threads;
  long decoders;
  long host_percent;
  long hardware_percent;
};
constexpr std::array<nvjpeg_setting, 7> nvjpeg_settings{{{16, 0, 0, 100},
                                                         {16, 2, 0, 100},
                                                         {16, 8, 0, 100},
                                                         {16, 4, 25, 100},
                                                         {16, 4, 50, 100},
                                                         {16, 4, 0, 65},
                                                         {16, 4, 0, 50}}};

void by_setting(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"threads", "decoders", "host_percent", "hardware_percent"});
  for (const auto& [threads, decoders, host, hardware] : nvjpeg_settings) {
    bench->Args({threads, decoders, host, hardware});
  }
  bench->UseRealTime()->Unit(benchmark::kMillisecond);
}

crema::image_transform_options training() {
  return {.geometry = crema::random_resized_crop{224, 224},
          .mirror = true,
          .mean = {0.485F, 0.456F, 0.406F},
          .std = {0.229F, 0.224F, 0.225F}};
}

// 512 crops of the test photographs in 8 classes, made once per run.
fs::path made_folder() {
  const char* photos = std::getenv("CREMA_TEST_DATA_DIR");
  const fs::path from = photos != nullptr ? fs::path(photos) : fs::path("data");
  const fs::path root = fs::temp_directory_path() / "crema-gpu-bench-jpeg";
  if (fs::exists(root / "done")) return root;
  crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
  crema::image_file_reader reader;
  std::vector<std::vector<std::uint8_t>> pixels;
  std::vector<std::pair<std::size_t, std::size_t>> sizes;
  for (const char* name : {"astronaut.jpg", "coffee.jpg"}) {
    const auto view = decoder.decode(reader.read((from / name).string(), "photograph"), name);
    pixels.emplace_back(view.data, view.data + view.elements());
    sizes.emplace_back(view.height, view.width);
  }
  std::mt19937 random(2026);
  for (std::size_t i = 0; i < 512; ++i) {
    const std::size_t which = i % 2;
    const auto [height, width] = sizes[which];
    const auto side = [&](std::size_t most) {
      return std::uniform_int_distribution<std::size_t>(std::min<std::size_t>(300, most),
                                                        most)(random);
    };
    const std::size_t h = side(height);
    const std::size_t w = side(width);
    const std::size_t top = std::uniform_int_distribution<std::size_t>(0, height - h)(random);
    const std::size_t left = std::uniform_int_distribution<std::size_t>(0, width - w)(random);
    auto view = crema::image_view<std::uint8_t>::interleaved(
        pixels[which].data() + (top * width + left) * 3, 3, h, w);
    view.row_stride = width * 3;
    std::vector<std::byte> jpeg;
    crema::encode_jpeg(view, 90, jpeg, crema::channel_order::rgb);
    const fs::path file = root / fmt::format("class{}", i % 8) / fmt::format("{}.jpg", i);
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(jpeg.data()),
               static_cast<std::streamsize>(jpeg.size()));
  }
  std::ofstream(root / "done") << "512\n";
  return root;
}

const fs::path& folder() {
  static const fs::path root = [] {
    const char* given = std::getenv("CREMA_BENCH_JPEG_FOLDER");
    return given != nullptr && *given != 0 ? fs::path(given) : made_folder();
  }();
  return root;
}

std::size_t images() {
  static const std::size_t count = crema::image_folder_source(folder()).size();
  return count;
}

void count_pass(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(images()));
}

// `consume(batch, compute)`: the consumer's step (it returns the records it read), its device
// work queued on `compute` and waited for at the end of each pass only, as a training loop
// queues its steps. `warm()` is called once the untimed first pass is done.
template <class Batcher, class Consume, class Warm = void (*)()>
void one_pass_each(
    benchmark::State& state, Batcher batcher, Consume consume, Warm warm = [] {}) {
  const auto threads = static_cast<std::size_t>(state.range(0));
  crema::image_folder_source source(folder());
  source.shuffle(7);
  crema::double_buffered_pipeline pipe{
      std::move(source),
      std::move(batcher),
      {.batch_size = batch_size, .producers = threads, .threads = threads, .seed = 7}};
  auto consumer = pipe.consumer(0);
  crema::cuda_stream compute;
  const auto pass = [&] {
    for (std::size_t read = 0; read < images();) {
      auto batch = consumer.pull();
      read += consume(batch, compute);
    }
    compute.synchronize();
  };
  pass();  // every slot's memory made, every decoder started, the folder in the page cache
  warm();
  const gpu::host_cost cost;
  for (auto _ : state) pass();
  count_pass(state);
  cost.count(state, static_cast<double>(state.iterations()) * static_cast<double>(images()));
}

// Counters: host_decoded_share, the share of the samples its producers decoded on the CPU (over
// the warm-up pass and the timed ones); and, over the timed passes, where a batch's finishing
// step spent the host's time, in microseconds a batch (nvjpeg_feed_times): planning it,
// borrowing a decoder, in the decoder's turn waiting for its last batch on the GPU, and
// queueing the work.
template <class Options>
void nvjpeg_passes(benchmark::State& state, const Options& options) {
  gpu::device_memory sink(sizeof(float));
  crema::cuda::nvjpeg_batcher<float> batcher(training(), options);
  const auto& decoders = batcher.decoders();  // every copy's: the pipeline's too
  crema::cuda::nvjpeg_feed_times warm;
  one_pass_each(
      state, std::move(batcher),
      [&](auto& batch, crema::cuda_stream& compute) {
        return gpu::touch_and_release(batch, compute, sink.floats());
      },
      [&] { warm = decoders.times(); });
  const double samples =
      static_cast<double>(state.iterations() + 1) * static_cast<double>(images());
  state.counters["host_decoded_share"] = static_cast<double>(decoders.host_decoded()) / samples;
  const crema::cuda::nvjpeg_feed_times all = decoders.times();
  const double batches =
      static_cast<double>(std::max<std::uint64_t>(all.batches - warm.batches, 1));
  const auto per_batch = [&](std::chrono::nanoseconds total, std::chrono::nanoseconds before) {
    return std::chrono::duration<double, std::micro>(total - before).count() / batches;
  };
  state.counters["plan_us"] = per_batch(all.planning, warm.planning);
  state.counters["borrow_us"] = per_batch(all.borrowing, warm.borrowing);
  state.counters["turn_wait_us"] = per_batch(all.waiting, warm.waiting);
  state.counters["turn_queue_us"] = per_batch(all.queueing, warm.queueing);
}

void nvjpeg_input(benchmark::State& state) {
  nvjpeg_passes(state, crema::cuda::nvjpeg_batcher_options{});
}

void nvjpeg_input_without_engine(benchmark::State& state) {
  nvjpeg_passes(state, crema::cuda::nvjpeg_batcher_options{.decoding = {.hardware = false}});
}

void nvjpeg_input_setting(benchmark::State& state) {
  crema::cuda::nvjpeg_batcher_options options;
  options.decoders = static_cast<std::size_t>(state.range(1));
  options.max_host_share = static_cast<double>(state.range(2)) / 100.0;
  options.decoding.hardware_share = static_cast<double>(state.range(3)) / 100.0;
  nvjpeg_passes(state, options);
}

void cuda_input(benchmark::State& state) {
  gpu::device_memory sink(sizeof(float));
  crema::image_batcher batcher(crema::image_transform(training()),
                               [](const crema::batch_context& where, crema::record_shape shape) {
                                 return crema::cuda::device_batch<float>(where.batch_size, shape);
                               });
  one_pass_each(state, std::move(batcher), [&](auto& batch, crema::cuda_stream& compute) {
    return gpu::touch_and_release(batch, compute, sink.floats());
  });
}

void host_input(benchmark::State& state) {
  crema::image_batcher batcher(crema::image_transform(training()), crema::make_host_batch<float>{});
  one_pass_each(state, std::move(batcher), [](auto& batch, crema::cuda_stream&) {
    benchmark::DoNotOptimize(batch->data.data());
    return batch->size();
  });
}

// The folder's JPEG files (.jpg, .jpeg, any case) in memory, sorted by path, and their sizes
// (nvjpegGetImageInfo).
// The folder's JPEGs in memory: each file pageable, and all of them again in one pinned block.
struct encoded_folder {
  std::vector<std::vector<unsigned char>> files;
  std::vector<unsigned char, crema::pinned_allocator<unsigned char>> pinned;
  std::vector<std::size_t> pinned_at;  // file i's bytes in `pinned`
  std::vector<int> widths;
  std::vector<int> heights;
};

const encoded_folder& encoded() {
  static const encoded_folder read = [] {
    std::vector<fs::path> paths;
    for (const auto& entry : fs::recursive_directory_iterator(folder())) {
      std::string extension = entry.path().extension().string();
      std::transform(extension.begin(), extension.end(), extension.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (entry.is_regular_file() && (extension == ".jpg" || extension == ".jpeg")) {
        paths.push_back(entry.path());
      }
    }
    std::sort(paths.begin(), paths.end());
    encoded_folder folder_bytes;
    nvjpegHandle_t handle = nullptr;
    CREMA_NVJPEG_TRY(nvjpegCreateSimple(&handle));
    for (const fs::path& path : paths) {
      std::ifstream in(path, std::ios::binary);
      std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
      int components = 0;
      nvjpegChromaSubsampling_t subsampling{};
      std::array<int, NVJPEG_MAX_COMPONENT> widths{};
      std::array<int, NVJPEG_MAX_COMPONENT> heights{};
      CREMA_NVJPEG_TRY(nvjpegGetImageInfo(handle, bytes.data(), bytes.size(), &components,
                                          &subsampling, widths.data(), heights.data()));
      folder_bytes.files.push_back(std::move(bytes));
      folder_bytes.widths.push_back(widths[0]);
      folder_bytes.heights.push_back(heights[0]);
    }
    (void)nvjpegDestroy(handle);
    for (const std::vector<unsigned char>& file : folder_bytes.files) {
      folder_bytes.pinned_at.push_back(folder_bytes.pinned.size());
      folder_bytes.pinned.insert(folder_bytes.pinned.end(), file.begin(), file.end());
    }
    return folder_bytes;
  }();
  return read;
}

// How a baseline-nvjpeg thread calls nvJPEG.
enum class nvjpeg_calls {
  plain,     // nvjpegDecodeBatched, the state initialised once, no flags, pinned input
  pageable,  // the same, the input in pageable memory
  pooled,    // the same as plain, the engine's buffers pooled first (PreAllocate)
  as_crema,  // what basic_nvjpeg_batch_decoder calls, on whole images, pinned input (pooled)
};

// One benchmark thread's nvJPEG: a handle (the hardware engine's where it starts), a batched
// state for batches of `batch_size` RGB images, a stream, and device memory for the largest
// batch of whole images; as crema calls it, a parsed stream and decode parameters an image too.
class nvjpeg_alone_decoder {
 public:
  explicit nvjpeg_alone_decoder(nvjpeg_calls calls) : calls_(calls) {
    const unsigned flags =
        calls == nvjpeg_calls::as_crema ? unsigned{NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION} : 0U;
    if (nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, flags, &handle_) ==
        NVJPEG_STATUS_SUCCESS) {
      hardware_ = true;
    } else {
      handle_ = nullptr;
      CREMA_NVJPEG_TRY(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, flags, &handle_));
    }
    try {
      CREMA_NVJPEG_TRY(nvjpegJpegStateCreate(handle_, &state_));
      if (hardware_ && (calls == nvjpeg_calls::pooled || calls == nvjpeg_calls::as_crema)) {
        // As crema does: for the folder's largest frame; refused, the batches go without.
        const encoded_folder& folder_bytes = encoded();
        const int width = *std::max_element(folder_bytes.widths.begin(), folder_bytes.widths.end());
        const int height =
            *std::max_element(folder_bytes.heights.begin(), folder_bytes.heights.end());
        pooled_ = nvjpegDecodeBatchedPreAllocate(handle_, state_, static_cast<int>(batch_size),
                                                 width, height, NVJPEG_CSS_444,
                                                 NVJPEG_OUTPUT_RGBI) == NVJPEG_STATUS_SUCCESS;
      }
      CREMA_NVJPEG_TRY(nvjpegDecodeBatchedInitialize(handle_, state_, static_cast<int>(batch_size),
                                                     1, NVJPEG_OUTPUT_RGBI));
      while (calls == nvjpeg_calls::as_crema && streams_.size() < batch_size) {
        nvjpegJpegStream_t stream = nullptr;
        CREMA_NVJPEG_TRY(nvjpegJpegStreamCreate(handle_, &stream));
        streams_.push_back(stream);
        nvjpegDecodeParams_t params = nullptr;
        CREMA_NVJPEG_TRY(nvjpegDecodeParamsCreate(handle_, &params));
        params_.push_back(params);
      }
      // Every batch takes images in turn, modulo the folder: room for the largest of them.
      const encoded_folder& folder_bytes = encoded();
      std::vector<std::size_t> sizes;
      for (std::size_t i = 0; i < folder_bytes.files.size(); ++i) {
        sizes.push_back(image_bytes(i));
      }
      std::sort(sizes.rbegin(), sizes.rend());
      std::size_t most = 0;
      for (std::size_t k = 0; k < batch_size; ++k) most += sizes[k % sizes.size()];
      CREMA_CUDA_TRY(cudaMalloc(&output_, most));
    } catch (...) {
      release();
      throw;
    }
  }
  nvjpeg_alone_decoder(const nvjpeg_alone_decoder&) = delete;
  nvjpeg_alone_decoder& operator=(const nvjpeg_alone_decoder&) = delete;
  ~nvjpeg_alone_decoder() { release(); }

  [[nodiscard]] bool hardware() const noexcept { return hardware_; }
  // Whether the engine's buffers are pooled: asked for and set up.
  [[nodiscard]] bool pooled() const noexcept { return pooled_; }

  // Images first, first + 1, ... (modulo the folder) decoded, and waited for.
  void decode_batch(std::size_t first) {
    const encoded_folder& folder_bytes = encoded();
    data_.clear();
    lengths_.clear();
    std::size_t at = 0;
    for (std::size_t k = 0; k < batch_size; ++k) {
      const std::size_t i = (first + k) % folder_bytes.files.size();
      data_.push_back(calls_ == nvjpeg_calls::pageable
                          ? folder_bytes.files[i].data()
                          : folder_bytes.pinned.data() + folder_bytes.pinned_at[i]);
      lengths_.push_back(folder_bytes.files[i].size());
      destinations_[k] = nvjpegImage_t{};
      destinations_[k].channel[0] = static_cast<unsigned char*>(output_) + at;
      destinations_[k].pitch[0] = static_cast<std::size_t>(folder_bytes.widths[i]) * 3;
      at += image_bytes(i);
    }
    if (calls_ != nvjpeg_calls::as_crema) {
      CREMA_NVJPEG_TRY(nvjpegDecodeBatched(handle_, state_, data_.data(), lengths_.data(),
                                           destinations_.get(), stream_.native_handle()));
    } else {
      for (std::size_t k = 0; k < batch_size; ++k) {
        const std::size_t i = (first + k) % folder_bytes.files.size();
        CREMA_NVJPEG_TRY(nvjpegJpegStreamParse(handle_, data_[k], lengths_[k], 0, 0, streams_[k]));
        CREMA_NVJPEG_TRY(nvjpegDecodeParamsSetOutputFormat(params_[k], NVJPEG_OUTPUT_RGBI));
        CREMA_NVJPEG_TRY(nvjpegDecodeParamsSetROI(params_[k], 0, 0, folder_bytes.widths[i],
                                                  folder_bytes.heights[i]));
        int refused = 1;
        CREMA_NVJPEG_TRY(
            nvjpegDecodeBatchedSupportedEx(handle_, streams_[k], params_[k], &refused));
        if (refused != 0) {
          ::crema::detail::fail<crema::config_error>(
              "baseline-nvjpeg: the batched decoder refuses image {} of the folder", i);
        }
      }
      CREMA_NVJPEG_TRY(nvjpegDecodeBatchedEx(handle_, state_, data_.data(), lengths_.data(),
                                             destinations_.get(), params_.data(),
                                             stream_.native_handle()));
    }
    stream_.synchronize();
  }

 private:
  void release() noexcept {
    for (nvjpegJpegStream_t stream : streams_) (void)nvjpegJpegStreamDestroy(stream);
    for (nvjpegDecodeParams_t params : params_) (void)nvjpegDecodeParamsDestroy(params);
    if (output_ != nullptr) (void)cudaFree(output_);
    if (state_ != nullptr) (void)nvjpegJpegStateDestroy(state_);
    (void)nvjpegDestroy(handle_);
  }

  // Image i's RGB bytes, rounded up to 256.
  static std::size_t image_bytes(std::size_t i) {
    const encoded_folder& folder_bytes = encoded();
    const auto bytes = static_cast<std::size_t>(folder_bytes.widths[i]) *
                       static_cast<std::size_t>(folder_bytes.heights[i]) * 3;
    return (bytes + 255) / 256 * 256;
  }

  nvjpeg_calls calls_;
  nvjpegHandle_t handle_ = nullptr;
  bool hardware_ = false;
  bool pooled_ = false;
  std::vector<nvjpegJpegStream_t> streams_;  // as crema calls it: one an image of a batch
  std::vector<nvjpegDecodeParams_t> params_;
  nvjpegJpegState_t state_ = nullptr;
  crema::cuda_stream stream_;
  void* output_ = nullptr;
  std::vector<const unsigned char*> data_;
  std::vector<std::size_t> lengths_;
  // Not a std::vector: nvcc 13.0 cannot destroy the unnamed nvjpegImage_t in one.
  std::unique_ptr<nvjpegImage_t[]> destinations_{new nvjpegImage_t[batch_size]()};
};

// Label: the backend, and whether the engine's buffers are pooled. An image nvJPEG refuses (a
// folder of progressive JPEGs for the engine) skips the benchmark with nvJPEG's error.
void nvjpeg_alone(benchmark::State& state, nvjpeg_calls calls) {
  const std::size_t count = encoded().files.size();  // read before any thread times
  if (count == 0) {
    state.SkipWithError("the folder holds no .jpg or .jpeg file");
    for (auto _ : state) {
    }
    return;
  }
  std::size_t first = static_cast<std::size_t>(state.thread_index()) * batch_size % count;
  std::optional<nvjpeg_alone_decoder> decoder;
  try {
    decoder.emplace(calls);
    decoder->decode_batch(first);  // the engine's and the library's first use, untimed
  } catch (const crema::error& error) {
    state.SkipWithError(error.what());
  }
  for (auto _ : state) {
    first = (first + batch_size) % count;
    try {
      decoder->decode_batch(first);
    } catch (const crema::error& error) {
      state.SkipWithError(error.what());
      break;
    }
  }
  if (decoder && state.thread_index() == 0) {
    // A pool nvJPEG refused is said, so that decode_pooled is not read as pooled.
    state.SetLabel(!decoder->hardware() ? "default backend"
                   : decoder->pooled()  ? "hardware, pooled"
                                        : "hardware");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(batch_size));
}

BENCHMARK(nvjpeg_input)->Name("crema/jpeg_input/rrc")->Apply(by_threads);
BENCHMARK(nvjpeg_input_setting)->Name("crema-nvjpeg/jpeg_input/rrc")->Apply(by_setting);
BENCHMARK(nvjpeg_input_without_engine)
    ->Name("crema-hybrid/jpeg_input/rrc")
    ->ArgName("threads")
    ->Arg(4)
    ->Arg(16)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(cuda_input)->Name("crema-cuda/jpeg_input/rrc")->Apply(by_threads);
BENCHMARK(host_input)->Name("baseline/jpeg_input/rrc")->Apply(by_threads);
BENCHMARK_CAPTURE(nvjpeg_alone, plain, nvjpeg_calls::plain)
    ->Name("baseline-nvjpeg/jpeg_input/decode")
    ->Threads(1)
    ->Threads(2)
    ->Threads(4)
    ->Threads(8)
    ->Threads(16)
    ->UseRealTime();
BENCHMARK_CAPTURE(nvjpeg_alone, pageable, nvjpeg_calls::pageable)
    ->Name("baseline-nvjpeg/jpeg_input/decode_pageable")
    ->Threads(4)
    ->Threads(16)
    ->UseRealTime();
BENCHMARK_CAPTURE(nvjpeg_alone, pooled, nvjpeg_calls::pooled)
    ->Name("baseline-nvjpeg/jpeg_input/decode_pooled")
    ->Threads(4)
    ->Threads(16)
    ->UseRealTime();
BENCHMARK_CAPTURE(nvjpeg_alone, as_crema, nvjpeg_calls::as_crema)
    ->Name("baseline-nvjpeg/jpeg_input/decode_as_crema")
    ->Threads(4)
    ->Threads(16)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return gpu::run_on_gpu(
      argc, argv, "ImageNet-style JPEG input decoded on the GPU and on the CPU",
      [](const crema::bench::ratio_reporter& reporter) {
        fmt::print(
            "\nsamples/s, one pass of {} ({} images), RandomResizedCrop(224) + flip + "
            "normalise, batch {}\n",
            folder().string(), images(), batch_size);
        const auto rate = [&](const std::string& name) {
          const double ns = reporter.nanoseconds(name);
          return ns > 0 ? static_cast<double>(images()) / ns * 1e9 : 0.0;
        };
        const auto name = [](const char* kind, long threads) {
          return fmt::format("{}/jpeg_input/rrc/threads:{}/real_time", kind, threads);
        };
        for (const long threads : thread_counts) {
          const double nvjpeg = rate(name("crema", threads));
          const double cuda = rate(name("crema-cuda", threads));
          const double host = rate(name("baseline", threads));
          if (host <= 0) continue;
          fmt::print(
              "  {} threads: nvJPEG {:.0f}, CPU into CUDA batches {:.0f} ({:.3f} of host; target "
              "0.9), host batches {:.0f}\n",
              threads, nvjpeg, cuda, cuda / host, host);
        }
        fmt::print(
            "host cost of nvJPEG's samples (the whole process: CPU us a sample, the system's "
            "share, sleeps and preemptions a 1,000):\n");
        for (const long threads : thread_counts) {
          const std::string of = name("crema", threads);
          if (reporter.nanoseconds(of) <= 0) continue;
          fmt::print("  {} threads: {:.1f} us, {:.2f}, {:.0f}, {:.0f}\n", threads,
                     reporter.counter(of, "host_cpu_us"), reporter.counter(of, "host_system_share"),
                     reporter.counter(of, "sleeps_per_1k"),
                     reporter.counter(of, "preemptions_per_1k"));
        }
        for (const long threads : thread_counts) {
          const std::string of = name("crema", threads);
          if (reporter.nanoseconds(of) <= 0) continue;
          fmt::print("  {} threads: {:.3f} of the samples decoded by the producers on the CPU\n",
                     threads, reporter.counter(of, "host_decoded_share"));
        }
        fmt::print(
            "a batch's finishing step on the host, us (planning it; borrowing a decoder; in the "
            "decoder's turn, waiting for its last batch, then queueing):\n");
        for (const long threads : thread_counts) {
          const std::string of = name("crema", threads);
          if (reporter.nanoseconds(of) <= 0) continue;
          fmt::print("  {} threads: {:.0f}; {:.0f}; {:.0f}, {:.0f}\n", threads,
                     reporter.counter(of, "plan_us"), reporter.counter(of, "borrow_us"),
                     reporter.counter(of, "turn_wait_us"), reporter.counter(of, "turn_queue_us"));
        }
        for (const long threads : {4L, 16L}) {
          const std::string of = name("crema-hybrid", threads);
          const double hybrid = rate(of);
          const double host = rate(name("baseline", threads));
          if (hybrid <= 0 || host <= 0) continue;
          fmt::print(
              "  {} threads without the engine (GPU-assisted, Huffman decoding on the producers): "
              "{:.0f} ({:.3f} of host batches); planning {:.0f} us a batch, in the turn {:.0f} us; "
              "host {:.1f} us a sample\n",
              threads, hybrid, hybrid / host, reporter.counter(of, "plan_us"),
              reporter.counter(of, "turn_queue_us"), reporter.counter(of, "host_cpu_us"));
        }
        for (const auto& [threads, decoders, host, hardware] : nvjpeg_settings) {
          const std::string of = fmt::format(
              "crema-nvjpeg/jpeg_input/rrc/threads:{}/decoders:{}/host_percent:{}/"
              "hardware_percent:{}/real_time",
              threads, decoders, host, hardware);
          const double other = rate(of);
          const double by_default = rate(name("crema", threads));
          if (other <= 0 || by_default <= 0) continue;
          fmt::print(
              "  {} threads sharing {} decoders, at most {}% of a batch on the CPU, {}% of the "
              "engine's JPEGs on it: {:.0f} ({:.3f} of the default's {:.0f}); {:.3f} decoded on "
              "the CPU; host {:.1f} us a sample, {:.0f} sleeps a 1,000\n",
              threads, decoders == 0 ? std::string("their own") : fmt::format("{}", decoders), host,
              hardware, other, other / by_default, by_default,
              reporter.counter(of, "host_decoded_share"), reporter.counter(of, "host_cpu_us"),
              reporter.counter(of, "sleeps_per_1k"));
        }
        fmt::print(
            "nvJPEG alone (baseline-nvjpeg: whole images, its batched API, a handle a "
            "thread), and crema's nvJPEG feed on as many threads:\n");
        for (const long threads : {1L, 2L, 4L, 8L, 16L}) {
          const std::string of =
              fmt::format("baseline-nvjpeg/jpeg_input/decode/real_time/threads:{}", threads);
          const double alone = reporter.counter(of, "items_per_second");
          if (alone <= 0) continue;
          const double feed = rate(name("crema", threads));
          fmt::print("  {} thread{}: {:.0f} images/s; crema {:.0f} ({:.3f} of it)", threads,
                     threads == 1 ? "" : "s", alone, feed, feed / alone);
          for (const auto& [variant, how] :
               {std::pair{"decode_as_crema", "through crema's calls"},
                std::pair{"decode_pageable", "from pageable memory"},
                std::pair{"decode_pooled", "its engine's buffers pooled"}}) {
            const double other = reporter.counter(
                fmt::format("baseline-nvjpeg/jpeg_input/{}/real_time/threads:{}", variant, threads),
                "items_per_second");
            if (other > 0) fmt::print("; {} {:.0f} ({:.3f} of it)", how, other, other / alone);
          }
          fmt::print("\n");
        }
        const double host16 = rate(name("baseline", 16));
        const double nvjpeg16 = rate(name("crema", 16));
        const double cuda4 = rate(name("crema-cuda", 4));
        const double cuda16 = rate(name("crema-cuda", 16));
        if (host16 > 0 && nvjpeg16 > 0) {
          fmt::print("  nvJPEG on 16 threads / host batches on 16: {:.2f} (target 2)\n",
                     nvjpeg16 / host16);
        }
        if (cuda4 > 0 && cuda16 > 0) {
          fmt::print("  CUDA batches, 16 threads / 4: {:.2f} (target 3)\n", cuda16 / cuda4);
        }
      });
}
