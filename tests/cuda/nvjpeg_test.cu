// nvJPEG on a real GPU (compiled and linked by nvcc in the cuda-compile preset, run by the GPU
// bundle): batches of photographs decoded by nvJPEG and resampled by the kernels, against the CPU
// path's samples from the same generators (decoded at full size), within the bound
// docs/datasets.md states for nvJPEG's IDCT and upsampling; the PNG goes through the CPU path and
// must match exactly; plans made on other threads decode as the decoder's own; a JPEG cut short
// is an error naming it; a progressive JPEG (which the engine does not take) within the bound;
// without the engine, the GPU-assisted decoder with its Huffman decoding on the host and on the
// GPU, batch after batch; a batch split between the engine and that decoder; a folder pipeline of
// nvjpeg_batcher batches against the CPU pipeline; the nvJPEG soak (nvjpeg_soak.hpp).
// nvjpeg_host_test.cpp runs the same flow on a fake nvJPEG in every CI run. Without a GPU:
// skipped.

#include <crema/io/image/image_batcher.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.cuh>
#include <crema/io/nvjpeg/nvjpeg_batcher.cuh>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/pipeline/host_batch.hpp>

#include "common/cuda_skip.hpp"
#include "common/soak.hpp"
#include "common/watchdog.hpp"
#include "nvjpeg_soak.hpp"
#include "nvjpeg_test_data.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using crema::test::batch_input;
using crema::test::photographs;

template <class T>
std::vector<T> decode_on_gpu(crema::cuda::nvjpeg_batch_decoder& decoder, const batch_input& in) {
  const std::size_t values = in.images.size() * decoder.shape().elements();
  T* device = nullptr;
  CREMA_CUDA_TRY(cudaMalloc(&device, values * sizeof(T)));
  std::vector<T> host(values);
  crema::cuda_stream stream;
  try {
    decoder.decode<T>(in.images, device, stream.native_handle());
    stream.synchronize();
    CREMA_CUDA_TRY(cudaMemcpy(host.data(), device, values * sizeof(T), cudaMemcpyDeviceToHost));
  } catch (...) {
    stream.synchronize();
    (void)cudaFree(device);
    throw;
  }
  CREMA_CUDA_TRY(cudaFree(device));
  return host;
}

// The bound docs/datasets.md states between nvJPEG's pixels and libjpeg-turbo's, in 8-bit levels
// over a whole sample: the mean difference and the largest.
struct difference {
  double mean = 0;
  int largest = 0;
};
template <class T>
difference compare(const T* a, const T* b, std::size_t count, double scale) {
  difference d;
  double total = 0;
  for (std::size_t v = 0; v < count; ++v) {
    const int levels = static_cast<int>(std::lround(std::abs(double(a[v]) - double(b[v])) * scale));
    total += levels;
    d.largest = std::max(d.largest, levels);
  }
  d.mean = count == 0 ? 0 : total / double(count);
  return d;
}
constexpr double bound_mean = 1.0;
constexpr int bound_largest = 48;

// Reads a batch of the pipeline back to the host once `compute` waits for it, then gives it back
// after `compute`'s work.
auto read_back(crema::cuda_stream& compute) {
  return [&compute](auto& batch) {
    const auto on_device = batch->device(compute);
    std::vector<float> data(on_device.data.size());
    std::vector<float> labels(on_device.labels.size());
    compute.synchronize();
    CREMA_CUDA_TRY(cudaMemcpy(data.data(), on_device.data.data(), data.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
    CREMA_CUDA_TRY(cudaMemcpy(labels.data(), on_device.labels.data(), labels.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
    batch.release_after(compute.record());
    return std::pair(std::move(data), std::move(labels));
  };
}

// The folder pipelines' transform: RandomResizedCrop, flip, decoded at full size (as on the GPU).
crema::image_transform_options folder_options() {
  return {
      .geometry = crema::random_resized_crop{}, .mirror = true, .decode = {.dct_scaling = false}};
}

// One epoch of the folder at `root` through the CPU pipeline: the batches the GPU's must match.
crema::test::batches cpu_epoch(const std::filesystem::path& root,
                               const crema::image_transform_options& options) {
  const std::size_t sample = crema::image_transform(options).shape().elements();
  return crema::test::epoch(
      root, crema::image_batcher(crema::image_transform(options), crema::make_host_batch<float>{}),
      1, crema::test::read_host_batch(sample));
}

// Each float sample of `got` within the stated bound of the CPU path's from the same generator.
void check_within_bound(const crema::image_transform_options& options, const batch_input& in,
                        const std::vector<float>& got) {
  crema::image_transform transform(options);
  const std::size_t sample = transform.shape().elements();
  REQUIRE(got.size() == in.images.size() * sample);
  std::vector<float> cpu(sample);
  for (std::size_t i = 0; i < in.images.size(); ++i) {
    CAPTURE(in.keys[i]);
    transform(in.files[i], std::span(cpu), in.images[i].rng, in.keys[i]);
    const difference d = compare(cpu.data(), got.data() + i * sample, sample, 255.0);
    CHECK(d.mean <= bound_mean);
    CHECK(d.largest <= bound_largest);
  }
}

// Every batch of `got` has `expected`'s labels and its values within the stated bound.
void check_within_bound(const crema::test::batches& got, const crema::test::batches& expected) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t b = 0; b < got.size(); ++b) {
    CAPTURE(b);
    CHECK(got[b].second == expected[b].second);
    REQUIRE(got[b].first.size() == expected[b].first.size());
    const difference d =
        compare(got[b].first.data(), expected[b].first.data(), got[b].first.size(), 255.0);
    MESSAGE(fmt::format("batch {}: mean difference {:.3f}, largest {}", b, d.mean, d.largest));
    CHECK(d.mean <= bound_mean);
    CHECK(d.largest <= bound_largest);
  }
}

}  // namespace

TEST_CASE("nvJPEG decodes a batch's windows and the kernels give the CPU path's samples") {
  if (crema::test::skip_without_cuda_device()) return;
  for (const bool training : {true, false}) {
    crema::image_transform_options options;
    if (training) {
      options.geometry = crema::random_resized_crop{};
    } else {
      options.geometry = crema::resize_center_crop{};
    }
    options.mirror = true;
    options.layout = crema::pixel_layout::hwc;
    options.decode.dct_scaling = false;
    crema::cuda::nvjpeg_batch_decoder decoder(options);
    const batch_input in = photographs(4, 7);
    const std::vector<std::uint8_t> gpu = decode_on_gpu<std::uint8_t>(decoder, in);
    const crema::cuda::nvjpeg_batch_counts counts = decoder.last_batch();
    MESSAGE(fmt::format(
        "{}: hardware engine {}: {} images on it, {} GPU-assisted ({} ahead), {} on the CPU",
        training ? "training" : "evaluation", decoder.hardware(), counts.hardware,
        counts.hybrid + counts.ahead, counts.ahead, counts.host));
    CHECK(counts.host == 1);  // the PNG
    CHECK(counts.hardware + counts.hybrid + counts.ahead == in.images.size() - 1);

    crema::image_transform transform(options);
    const std::size_t sample = transform.shape().elements();
    std::vector<std::uint8_t> cpu(sample);
    for (std::size_t i = 0; i < in.images.size(); ++i) {
      transform(in.files[i], std::span(cpu), in.images[i].rng, in.keys[i]);
      const difference d = compare(cpu.data(), gpu.data() + i * sample, sample, 1.0);
      MESSAGE(fmt::format("{}: mean difference {:.3f}, largest {}", in.keys[i], d.mean, d.largest));
      CAPTURE(in.keys[i]);
      if (in.keys[i] == "coffee.png") {
        CHECK(d.largest == 0);  // decoded by the CPU path: the same bytes
      } else {
        CHECK(d.mean <= bound_mean);
        CHECK(d.largest <= bound_largest);
      }
    }
  }
}

TEST_CASE("float samples from nvJPEG are the 8-bit ones normalised") {
  if (crema::test::skip_without_cuda_device()) return;
  crema::image_transform_options options;
  options.mirror = true;
  options.mean = {0.485F, 0.456F, 0.406F};
  options.std = {0.229F, 0.224F, 0.225F};
  crema::cuda::nvjpeg_batch_decoder floats(options);
  crema::cuda::nvjpeg_batch_decoder bytes(options);
  const batch_input in = photographs(2, 7);
  const std::vector<float> f = decode_on_gpu<float>(floats, in);
  const std::vector<std::uint8_t> b = decode_on_gpu<std::uint8_t>(bytes, in);
  REQUIRE(f.size() == b.size());
  const std::size_t plane = 224 * 224;
  std::size_t differ = 0;
  for (std::size_t v = 0; v < f.size(); ++v) {
    const std::size_t c = (v / plane) % 3;
    const float expected = (static_cast<float>(b[v]) / 255.0F - options.mean[c]) / options.std[c];
    if (f[v] != expected) ++differ;
  }
  CHECK(differ == 0);
}

TEST_CASE("plans made on several threads at once decode as the decoder's own, byte for byte") {
  if (crema::test::skip_without_cuda_device()) return;
  crema::image_transform_options options;
  options.mirror = true;
  crema::cuda::nvjpeg_batch_decoder own(options);
  const batch_input in = photographs(2, 7);
  const std::vector<std::uint8_t> expected = decode_on_gpu<std::uint8_t>(own, in);
  // A second decoder shares the first one's nvJPEG, and four threads plan with it at once.
  crema::cuda::nvjpeg_batch_decoder shared(own.library(), options);
  std::vector<std::optional<crema::cuda::nvjpeg_batch_plan>> plans(4);
  std::vector<std::thread> planners;
  for (auto& plan : plans) {
    planners.emplace_back([&] {
      plan.emplace(own.library(), options);
      plan->make(in.images);
    });
  }
  for (std::thread& planner : planners) planner.join();
  std::uint8_t* device = nullptr;
  CREMA_CUDA_TRY(cudaMalloc(&device, expected.size()));
  crema::cuda_stream stream;
  std::vector<std::uint8_t> got(expected.size());
  for (std::size_t k = 0; k < plans.size(); ++k) {
    CAPTURE(k);
    shared.decode(*plans[k], std::span<const crema::cuda::encoded_image>(in.images), device,
                  stream.native_handle());
    stream.synchronize();
    CREMA_CUDA_TRY(cudaMemcpy(got.data(), device, got.size(), cudaMemcpyDeviceToHost));
    CHECK(got == expected);
  }
  CREMA_CUDA_TRY(cudaFree(device));
}

TEST_CASE("a JPEG cut short is an error naming it, and the decoder goes on after it") {
  if (crema::test::skip_without_cuda_device()) return;
  crema::cuda::nvjpeg_batch_decoder decoder(crema::image_transform_options{});
  batch_input in = photographs(1, 7);
  in.files[1].resize(in.files[1].size() / 2);
  in.rebuild(7);
  CHECK_THROWS_WITH_AS(decode_on_gpu<float>(decoder, in), doctest::Contains("coffee-0.jpg"),
                       crema::format_error);
  const batch_input good = photographs(1, 7);
  CHECK_NOTHROW(decode_on_gpu<float>(decoder, good));
}

TEST_CASE(
    "a folder pipeline of nvjpeg_batcher batches delivers the CPU pipeline's, within the "
    "bound") {
  if (crema::test::skip_without_cuda_device()) return;
  const crema::test::image_folder folder("nvjpeg-gpu-folder");
  const crema::image_transform_options options = folder_options();
  const crema::test::batches expected = cpu_epoch(folder.path(), options);
  crema::cuda_stream compute;
  const crema::test::batches got = crema::test::epoch(
      folder.path(), crema::cuda::nvjpeg_batcher<float>(options), 2, read_back(compute));
  check_within_bound(got, expected);
}

TEST_CASE("a progressive JPEG, which the engine does not take, decodes within the bound") {
  if (crema::test::skip_without_cuda_device()) return;
  crema::image_transform_options options = folder_options();
  batch_input in = photographs(1, 7);
  in.add(crema::test::progressive_coffee(), "coffee-progressive.jpg", 7);
  crema::cuda::nvjpeg_batch_decoder decoder(options);
  const std::vector<float> got = decode_on_gpu<float>(decoder, in);
  const crema::cuda::nvjpeg_batch_counts counts = decoder.last_batch();
  MESSAGE(fmt::format("engine {}: hardware {}, GPU-assisted {} ({} ahead), CPU path {}",
                      decoder.hardware(), counts.hardware, counts.hybrid + counts.ahead,
                      counts.ahead, counts.host));
  // nvjpeg.h says the engine takes baseline JPEGs only; whether it took this one decides where
  // the batcher decodes it.
  const bool engine_refused = decoder.hardware() && counts.hardware == 2;
  check_within_bound(options, in, got);
  // Through a batcher: what the engine refuses decoded by the producers, with the GPU-assisted
  // decoder.
  const crema::test::image_folder folder("nvjpeg-gpu-progressive");
  const std::vector<std::byte> progressive = crema::test::progressive_coffee();
  for (const char* name : {"class0/1.jpg", "class2/3.jpg"}) {
    crema::test::write_bytes(folder.path() / name, progressive);
  }
  const crema::test::batches expected = cpu_epoch(folder.path(), options);
  crema::cuda_stream compute;
  const crema::cuda::nvjpeg_batcher<float> batcher(options);
  const crema::test::batches batches =
      crema::test::epoch(folder.path(), batcher, 2, read_back(compute));
  check_within_bound(batches, expected);
  // What the engine refuses goes to the GPU-assisted decoders where one takes it, else to the
  // CPU path; the folder's PNG to the CPU path.
  MESSAGE(fmt::format("through the batcher: {} decoded ahead, {} on the CPU path",
                      batcher.decoded_ahead(), batcher.refused()));
  CHECK(batcher.decoded_ahead() + batcher.refused() == (engine_refused ? 3 : 1));
}

TEST_CASE(
    "without the engine, both GPU-assisted decoders decode within the bound, batch after batch") {
  if (crema::test::skip_without_cuda_device()) return;
  const crema::image_transform_options options = folder_options();
  batch_input in = photographs(3, 7);
  in.add(crema::test::progressive_coffee(), "coffee-progressive.jpg", 7);
  // Huffman decoding on the host (the photographs are under a million pixels), then on the GPU.
  for (const std::size_t above : {std::size_t{1'000'000}, std::size_t{0}}) {
    CAPTURE(above);
    crema::cuda::nvjpeg_batch_decoder decoder(
        options, {.hardware = false, .gpu_huffman_above_pixels = above});
    CHECK_FALSE(decoder.hardware());
    const std::vector<float> first = decode_on_gpu<float>(decoder, in);
    const crema::cuda::nvjpeg_batch_counts counts = decoder.last_batch();
    MESSAGE(
        fmt::format("{} decoded ahead, {} on the CPU path (the PNG, and the progressive JPEG "
                    "where neither GPU-assisted decoder takes it)",
                    counts.ahead, counts.host));
    CHECK(counts.ahead >= in.images.size() - 2);  // the baseline photographs at least
    CHECK(counts.ahead + counts.host == in.images.size());
    check_within_bound(options, in, first);
    // The plan's buffers and states reused: the same bytes.
    for (int batch = 0; batch < 3; ++batch) CHECK(decode_on_gpu<float>(decoder, in) == first);
  }
  // A folder pipeline whose producers decode every JPEG that way.
  const crema::test::image_folder folder("nvjpeg-gpu-no-engine");
  const crema::test::batches expected = cpu_epoch(folder.path(), options);
  crema::cuda_stream compute;
  const crema::cuda::nvjpeg_batcher<float> batcher(options, {.decoding = {.hardware = false}});
  check_within_bound(crema::test::epoch(folder.path(), batcher, 2, read_back(compute)), expected);
  CHECK(batcher.decoded_ahead() == 15);
}

TEST_CASE("a batch split between the engine and the GPU-assisted decoder is within the bound") {
  if (crema::test::skip_without_cuda_device()) return;
  const crema::image_transform_options options = folder_options();
  const batch_input in = photographs(4, 7);  // 8 JPEGs and a PNG
  // Half of the engine's JPEGs decoded ahead, their windows copied in after the engine's.
  crema::cuda::nvjpeg_batch_decoder decoder(options, {.hardware_share = 0.5});
  const std::vector<float> got = decode_on_gpu<float>(decoder, in);
  const crema::cuda::nvjpeg_batch_counts counts = decoder.last_batch();
  MESSAGE(fmt::format("engine {}: hardware {}, decoded ahead {}, CPU path {}", decoder.hardware(),
                      counts.hardware, counts.ahead, counts.host));
  if (decoder.hardware()) CHECK(counts.hardware == 4);
  CHECK(counts.hardware + counts.ahead == 8);
  check_within_bound(options, in, got);
}

TEST_CASE("producers that find every decoder lent decode on the CPU and upload the samples") {
  if (crema::test::skip_without_cuda_device()) return;
  const crema::test::image_folder folder("nvjpeg-gpu-host-share");
  const crema::image_transform_options options = folder_options();
  const crema::test::batches expected = cpu_epoch(folder.path(), options);
  crema::cuda_stream compute;
  const int device = crema::cuda::current_device();
  // One pass through `batcher` on `producers` threads while the test holds its only decoder until
  // `happened()`.
  const auto epoch_while_held = [&](const crema::cuda::nvjpeg_batcher<float>& batcher,
                                    std::size_t producers, auto happened) {
    auto [got, seen] = crema::test::epoch_while_held(folder.path(), batcher, device, producers,
                                                     read_back(compute), happened);
    CHECK(seen);
    return got;
  };
  if (crema::cuda::nvjpeg_library().hardware()) {
    // The test holds the only decoder: every image is the producers', the CPU path's exactly.
    const crema::cuda::nvjpeg_batcher<float> batcher(options,
                                                     {.decoders = 1, .max_host_share = 1.0});
    const auto held = batcher.decoders().borrow(device);
    const crema::test::batches got =
        crema::test::epoch(folder.path(), batcher, 2, read_back(compute));
    CHECK(got == expected);
    CHECK(batcher.refused() == 1);  // the folder's PNG, decoded with the plan
    CHECK(batcher.host_decoded() == 15);
  } else {
    // Without the engine every JPEG is decoded ahead, its window on the GPU already: none goes
    // to the CPU, and the producers wait for the decoder to copy the windows.
    const crema::cuda::nvjpeg_batcher<float> batcher(options,
                                                     {.decoders = 1, .max_host_share = 1.0});
    const crema::test::batches got =
        epoch_while_held(batcher, 2, [&] { return batcher.decoded_ahead() >= 3; });
    CHECK(batcher.decoded_ahead() == 15);
    CHECK(batcher.host_decoded() == 0);
    check_within_bound(got, expected);
  }
  {
    // With half of the engine's JPEGs decoded ahead, the share takes only the engine's others:
    // the decoder copies the windows decoded ahead in between those the CPU path decoded.
    const crema::cuda::nvjpeg_batcher<float> batcher(
        options, {.decoders = 1, .max_host_share = 1.0, .decoding = {.hardware_share = 0.5}});
    const crema::test::batches got = epoch_while_held(
        batcher, 2, [&] { return batcher.decoded_ahead() + batcher.host_decoded() >= 1; });
    MESSAGE(fmt::format("a hardware share of 0.5: {} decoded ahead, {} by the CPU share",
                        batcher.decoded_ahead(), batcher.host_decoded()));
    CHECK(batcher.decoded_ahead() + batcher.host_decoded() + batcher.refused() <= 16);
    check_within_bound(got, expected);
  }
  if (crema::cuda::nvjpeg_library().hardware()) {
    // Half of the first batch on the CPU, the rest on nvJPEG once the decoder is back: within
    // the bound. (Without the engine the producers decode ahead instead, as above.)
    const crema::cuda::nvjpeg_batcher<float> batcher(options,
                                                     {.decoders = 1, .max_host_share = 0.5});
    const crema::test::batches got =
        epoch_while_held(batcher, 1, [&] { return batcher.host_decoded() >= 2; });
    CHECK(batcher.host_decoded() >= 2);
    CHECK(batcher.host_decoded() <= 8);  // half of each batch at most
    check_within_bound(got, expected);
  }
}

TEST_CASE(
    "soak on a GPU: pipelines of nvjpeg_batcher batches stopped, destroyed and failing at random "
    "deliver each image's sample within the bound, and every whole pass is exact") {
  if (crema::test::skip_without_cuda_device()) return;
  using namespace crema::test::soaking;
  using namespace crema::test::nvjpeg_soaking;
  const soak_images images;
  // As on the fake (nvjpeg_soak_test.cpp); the bundle runs this under compute-sanitizer too, at
  // its least there (CREMA_SOAK_RECORDS=0: 60 pipelines).
  const run_limits limits{.records = 64, .batch_size = 8, .stop_after = 6};
  const auto within_bound = []<class T>(const T* expected, const T* got, std::size_t elements) {
    const difference d = compare(expected, got, elements, std::is_same_v<T, float> ? 255.0 : 1.0);
    return d.mean <= bound_mean && d.largest <= bound_largest;
  };
  feed_counts counts;
  soak(
      [&](std::mt19937_64& draw, ending how) {
        const crema::test::watchdog guard(std::chrono::seconds(60), "a GPU nvJPEG soak's pipeline");
        return feed_run<crema::cuda::nvjpeg_batcher>(
            draw, how, images, limits, draw_feed(draw),
            [](std::size_t /*consumers*/) { return std::vector<int>{}; }, within_bound, counts);
      },
      3'000);
  MESSAGE(fmt::format(
      "{} pipelines of encoded Datums, {} of 8-bit samples; images: {} decoded while the decoders "
      "were lent, {} refused, {} decoded ahead",
      counts.datum_runs, counts.byte_runs, counts.host_decoded, counts.refused,
      counts.decoded_ahead));
  CHECK(counts.datum_runs > 0);
  CHECK(counts.byte_runs > 0);
  CHECK(counts.refused > 0);
  CHECK(counts.decoded_ahead > 0);
}
