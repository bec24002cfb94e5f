// The nvJPEG batch decoder's whole flow without a GPU: linked with the fake nvJPEG (libjpeg-turbo
// behind nvjpeg.h's calls) and the counting CUDA runtime, with the kernels' per-value functions
// run on the host. The fake decodes with the CPU path's decoder, so every sample must be the CPU
// path's, byte for byte: on the hardware engine's batch, on the GPU-assisted path, after a batch
// the engine fails, and for the images that go to the CPU path. Also: errors name the image, the
// steady state allocates nothing and makes no stream or event, and every nvJPEG object made is
// destroyed.

#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.hpp>

#include "common/test_data.hpp"
#include "counting_runtime.hpp"
#include "fake_nvjpeg.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using crema::test::read_bytes;
using crema::test::test_data;
namespace counting = crema::test::counting_cuda;
namespace fake = crema::test::fake_nvjpeg;

// The kernels' functions, on the host (the counting runtime's device memory is host memory).
struct host_resampler {
  template <class T>
  void operator()(const crema::resample_launch<T>& launch, cudaStream_t /*stream*/) const {
    crema::run_on_host(launch);
  }
};
using decoder = crema::cuda::basic_nvjpeg_batch_decoder<host_resampler>;

struct batch_input {
  std::vector<std::vector<std::byte>> files;
  std::vector<std::string> keys;
  std::vector<crema::cuda::encoded_image> images;

  void add(std::vector<std::byte> bytes, std::string key, std::uint64_t seed) {
    files.push_back(std::move(bytes));
    keys.push_back(std::move(key));
    rebuild(seed);
  }
  void rebuild(std::uint64_t seed) {
    images.clear();
    for (std::size_t i = 0; i < files.size(); ++i) {
      images.push_back({files[i], crema::sample_rng(seed, 0, i), keys[i]});
    }
  }
};

// The photographs, `copies` times each, and the coffee photograph as a PNG (the CPU path's).
batch_input photographs(std::size_t copies, std::uint64_t seed = 11) {
  batch_input in;
  const auto astronaut = read_bytes(test_data("astronaut.jpg"));
  const auto coffee = read_bytes(test_data("coffee.jpg"));
  for (std::size_t i = 0; i < copies; ++i) {
    in.add(astronaut, fmt::format("astronaut-{}.jpg", i), seed);
    in.add(coffee, fmt::format("coffee-{}.jpg", i), seed);
  }
  crema::image_decoder png_decoder({.channels = 3, .order = crema::channel_order::rgb});
  std::vector<std::byte> png;
  crema::encode_png(png_decoder.decode(coffee, "coffee.jpg"), png, crema::channel_order::rgb);
  in.add(std::move(png), "coffee.png", seed);
  return in;
}

// Each sample against image_transform's (decoded at full size) from the same generator.
template <class T>
void check_samples(const crema::image_transform_options& options, const batch_input& in,
                   const std::vector<T>& out) {
  crema::image_transform_options cpu = options;
  cpu.decode.dct_scaling = false;
  crema::image_transform transform(cpu);
  const std::size_t sample = transform.shape().elements();
  REQUIRE(out.size() == in.images.size() * sample);
  std::vector<T> expected(sample);
  for (std::size_t i = 0; i < in.images.size(); ++i) {
    transform(in.files[i], std::span(expected), in.images[i].rng, in.keys[i]);
    CAPTURE(in.keys[i]);
    CHECK(std::memcmp(expected.data(), out.data() + i * sample, sample * sizeof(T)) == 0);
  }
}

template <class T>
std::vector<T> decode(decoder& gpu, const batch_input& in) {
  std::vector<T> out(in.images.size() * gpu.shape().elements());
  gpu.decode<T>(in.images, out.data(), nullptr);
  return out;
}

std::vector<crema::image_transform_options> every_kind() {
  return {
      {.geometry = crema::random_resized_crop{.height = 64, .width = 56},
       .mirror = true,
       .mean = {0.485F, 0.456F, 0.406F},
       .std = {0.229F, 0.224F, 0.225F}},
      {.geometry = crema::resize_center_crop{.resize = 80, .crop_height = 64, .crop_width = 64},
       .mirror = true,
       .layout = crema::pixel_layout::hwc},
      {.geometry = crema::random_resized_crop{.height = 48, .width = 48},
       .decode = {.channels = 1}},
  };
}

}  // namespace

TEST_SUITE("nvjpeg batch decoder on the host") {
  TEST_CASE("on the hardware engine, every sample is the CPU path's, the PNG through the CPU") {
    fake::set({});
    for (const auto& options : every_kind()) {
      decoder gpu(options);
      CHECK(gpu.hardware());
      const batch_input in = photographs(3);
      const auto before = fake::counts();
      check_samples(options, in, decode<float>(gpu, in));
      check_samples(options, in, decode<float>(gpu, in));  // the buffers reused
      CHECK(gpu.last_batch().hardware == 6);
      CHECK(gpu.last_batch().hybrid == 0);
      CHECK(gpu.last_batch().host == 1);
      CHECK(fake::counts().batched - before.batched == 12);
    }
  }

  TEST_CASE("without a hardware engine, the GPU-assisted path gives the same samples") {
    for (const bool engine : {false, true}) {
      fake::set({.hardware_engine = engine, .engine_takes_images = false});
      for (const auto& options : every_kind()) {
        decoder gpu(options);
        const batch_input in = photographs(2);
        check_samples(options, in, decode<std::uint8_t>(gpu, in));
        CHECK(gpu.last_batch().hardware == 0);
        CHECK(gpu.last_batch().hybrid == 4);
        CHECK(gpu.last_batch().host == 1);
      }
    }
    fake::set({});
  }

  TEST_CASE("a batch the engine fails is decoded image by image, with the same samples") {
    fake::set({.batch_fails = true});
    const auto options = every_kind().front();
    decoder gpu(options);
    const batch_input in = photographs(2);
    check_samples(options, in, decode<float>(gpu, in));
    CHECK(gpu.last_batch().hybrid == 4);
    fake::set({});
  }

  TEST_CASE("a corrupt JPEG is a format_error naming it, and the next batch decodes") {
    for (const bool engine : {true, false}) {
      fake::set({.hardware_engine = engine});
      const auto options = every_kind().front();
      decoder gpu(options);
      batch_input in = photographs(2);
      in.files[2].resize(in.files[2].size() / 2);  // astronaut-1.jpg, cut short
      in.rebuild(11);
      CHECK_THROWS_WITH_AS(decode<float>(gpu, in), doctest::Contains("astronaut-1.jpg"),
                           crema::format_error);
      batch_input good = photographs(2);
      check_samples(options, good, decode<float>(gpu, good));
    }
    fake::set({});
  }

  TEST_CASE("bytes that are no image are a format_error naming them, before anything is queued") {
    fake::set({});
    decoder gpu(every_kind().front());
    batch_input in = photographs(1);
    in.add(std::vector<std::byte>(100, std::byte{7}), "notes.txt", 11);
    const auto before = counting::all_threads();
    CHECK_THROWS_WITH_AS(decode<float>(gpu, in), doctest::Contains("notes.txt"),
                         crema::format_error);
    CHECK((counting::all_threads() - before)[counting::call::memcpy_async] == 0);
  }

  TEST_CASE("a batch costs one copy of its jobs, one per CPU-path sample and one event record") {
    fake::set({});
    decoder gpu(every_kind().front());
    const batch_input in = photographs(3);
    (void)decode<float>(gpu, in);  // the buffers grow
    const auto before = counting::all_threads();
    (void)decode<float>(gpu, in);
    const auto calls = counting::all_threads() - before;
    CHECK(calls[counting::call::allocate] == 0);
    CHECK(calls[counting::call::free] == 0);
    CHECK(calls[counting::call::event_create] == 0);
    CHECK(calls[counting::call::stream_create] == 0);
    CHECK(calls[counting::call::memcpy_async] == 2);  // the jobs, the PNG's sample
    CHECK(calls[counting::call::event_record] == 1);
    CHECK(calls[counting::call::event_synchronize] == 1);  // the previous batch's
  }

  TEST_CASE("every nvJPEG object the decoder makes is destroyed with it") {
    fake::set({.hardware_engine = true, .engine_takes_images = false});
    const std::size_t before = fake::live_objects();
    {
      decoder gpu(every_kind().front());
      const batch_input in = photographs(2);
      (void)decode<float>(gpu, in);
      CHECK(fake::live_objects() > before);
    }
    CHECK(fake::live_objects() == before);
    fake::set({});
  }

  TEST_CASE("colour jitter is refused: it is not done on the GPU") {
    crema::image_transform_options options;
    options.jitter.brightness = 0.4F;
    CHECK_THROWS_WITH_AS(decoder{options}, doctest::Contains("colour jitter"), crema::config_error);
  }
}
