// nvjpeg_batch_decoder on a real GPU (compiled and linked by nvcc in the cuda-compile preset,
// run by the GPU bundle): a batch of photographs decoded by nvJPEG and resampled by the kernels,
// against the CPU path's samples from the same generators (decoded at full size), within the
// bound docs/datasets.md states for nvJPEG's IDCT and upsampling; a PNG goes through the CPU path
// and must match exactly; a JPEG cut short is an error naming it. Without a GPU: skipped.

#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.cuh>

#include "common/cuda_skip.hpp"
#include "common/test_data.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using crema::test::read_bytes;
using crema::test::test_data;

struct batch_input {
  std::vector<std::vector<std::byte>> files;
  std::vector<std::string> keys;
  std::vector<crema::cuda::encoded_image> images;
};

// The two photographs several times, each with a sample generator of its own, and the coffee
// photograph as a PNG.
batch_input make_batch(std::size_t copies) {
  batch_input in;
  const auto astronaut = read_bytes(test_data("astronaut.jpg"));
  const auto coffee = read_bytes(test_data("coffee.jpg"));
  crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
  std::vector<std::byte> png;
  crema::encode_png(decoder.decode(coffee, "coffee.jpg"), png, crema::channel_order::rgb);
  for (std::size_t i = 0; i < copies; ++i) {
    in.files.push_back(astronaut);
    in.keys.push_back(fmt::format("astronaut-{}.jpg", i));
    in.files.push_back(coffee);
    in.keys.push_back(fmt::format("coffee-{}.jpg", i));
  }
  in.files.push_back(png);
  in.keys.push_back("coffee.png");
  for (std::size_t i = 0; i < in.files.size(); ++i) {
    in.images.push_back({in.files[i], crema::sample_rng(7, 0, i), in.keys[i]});
  }
  return in;
}

template <class T>
std::vector<T> decode_on_gpu(crema::cuda::nvjpeg_batch_decoder& decoder, const batch_input& in) {
  const std::size_t values = in.images.size() * decoder.shape().elements();
  T* device = nullptr;
  CREMA_CUDA_TRY(cudaMalloc(&device, values * sizeof(T)));
  cudaStream_t stream = nullptr;
  CREMA_CUDA_TRY(cudaStreamCreate(&stream));
  decoder.decode<T>(in.images, device, stream);
  CREMA_CUDA_TRY(cudaStreamSynchronize(stream));
  std::vector<T> host(values);
  CREMA_CUDA_TRY(cudaMemcpy(host.data(), device, values * sizeof(T), cudaMemcpyDeviceToHost));
  CREMA_CUDA_TRY(cudaStreamDestroy(stream));
  CREMA_CUDA_TRY(cudaFree(device));
  return host;
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
    const batch_input in = make_batch(4);
    const std::vector<std::uint8_t> gpu = decode_on_gpu<std::uint8_t>(decoder, in);
    const crema::cuda::nvjpeg_batch_counts counts = decoder.last_batch();
    MESSAGE(fmt::format("{}: hardware engine {}: {} images on it, {} GPU-assisted, {} on the CPU",
                        training ? "training" : "evaluation", decoder.hardware(), counts.hardware,
                        counts.hybrid, counts.host));
    CHECK(counts.host == 1);  // the PNG
    CHECK(counts.hardware + counts.hybrid == in.images.size() - 1);

    crema::image_transform transform(options);
    const std::size_t sample = transform.shape().elements();
    std::vector<std::uint8_t> cpu(sample);
    for (std::size_t i = 0; i < in.images.size(); ++i) {
      transform(in.files[i], std::span(cpu), in.images[i].rng, in.keys[i]);
      double total = 0;
      int largest = 0;
      for (std::size_t v = 0; v < sample; ++v) {
        const int d = std::abs(int(cpu[v]) - int(gpu[i * sample + v]));
        total += d;
        largest = std::max(largest, d);
      }
      const double mean = total / double(sample);
      MESSAGE(fmt::format("{}: mean difference {:.3f}, largest {}", in.keys[i], mean, largest));
      CAPTURE(in.keys[i]);
      if (in.keys[i] == "coffee.png") {
        CHECK(largest == 0);  // decoded by the CPU path: the same bytes
      } else {
        CHECK(mean <= 1.0);  // the bound docs/datasets.md states
        CHECK(largest <= 48);
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
  options.layout = crema::pixel_layout::chw;
  crema::cuda::nvjpeg_batch_decoder bytes(options);
  const batch_input in = make_batch(2);
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

TEST_CASE("a JPEG cut short is an error naming it, and the decoder goes on after it") {
  if (crema::test::skip_without_cuda_device()) return;
  crema::cuda::nvjpeg_batch_decoder decoder(crema::image_transform_options{});
  batch_input in = make_batch(1);
  in.files[1].resize(in.files[1].size() / 2);
  in.images[1].bytes = in.files[1];
  CHECK_THROWS_WITH_AS(decode_on_gpu<float>(decoder, in), doctest::Contains("coffee-0.jpg"),
                       crema::format_error);
  in.images.erase(in.images.begin() + 1);
  CHECK_NOTHROW(decode_on_gpu<float>(decoder, in));
}
