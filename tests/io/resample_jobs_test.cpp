// resample_jobs: the GPU decoder's resampling, cut into one value per thread, run here on the
// host with the very functions the kernels run; on the same decoded windows it must give
// image_transform's values (decoded at full size) byte for byte and float for float, for both
// geometries, flips, layouts, gray and colour, several samples sharing one decode buffer.

#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/image/resample_jobs.hpp>

#include "common/test_data.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

namespace {

using crema::test::read_bytes;
using crema::test::test_data;

struct photograph {
  std::string name;
  std::vector<std::byte> jpeg;
  std::vector<std::uint8_t> pixels;  // decoded whole, interleaved
  std::size_t height = 0;
  std::size_t width = 0;
};

photograph load(const char* name, std::size_t channels) {
  photograph photo{name, read_bytes(test_data(name)), {}, 0, 0};
  crema::image_decoder decoder({.channels = channels, .order = crema::channel_order::rgb});
  const auto view = decoder.decode(photo.jpeg, name);
  photo.height = view.height;
  photo.width = view.width;
  photo.pixels.resize(view.elements());
  for (std::size_t y = 0; y < view.height; ++y) {
    for (std::size_t x = 0; x < view.width; ++x) {
      for (std::size_t c = 0; c < channels; ++c) {
        photo.pixels[(y * view.width + x) * channels + c] = view(c, y, x);
      }
    }
  }
  return photo;
}

// One batch: every sample's window copied out of the whole decode (what nvJPEG's ROI decode
// writes) into one buffer, rows padded as a pitched device allocation pads them; the jobs run on
// the host; each sample compared with image_transform's own decode and resampling.
template <class T>
void check_batch(const photograph& photo, const crema::image_transform_options& options,
                 std::uint64_t seed) {
  crema::image_transform transform(options);
  const std::size_t channels = options.decode.channels;
  const std::size_t sample = transform.shape().elements();
  constexpr std::size_t batch = 6;
  std::vector<crema::image_geometry> geometries;
  std::vector<bool> flips;
  std::vector<std::uint8_t> decoded;
  crema::resample_jobs jobs;
  for (std::size_t i = 0; i < batch; ++i) {
    crema::sample_rng rng(seed, 0, i);
    const crema::image_geometry geometry = transform.geometry(photo.height, photo.width, rng);
    const bool flip = i % 2 == 1;
    const crema::pixel_window& w = geometry.window;
    const std::size_t stride = w.width * channels + 13;
    const std::size_t at = decoded.size() + 7;
    decoded.resize(at + w.height * stride, 0xA5);
    for (std::size_t y = 0; y < w.height; ++y) {
      std::memcpy(decoded.data() + at + y * stride,
                  photo.pixels.data() + ((w.top + y) * photo.width + w.left) * channels,
                  w.width * channels);
    }
    jobs.add(geometry, flip, channels, at, stride, i * sample);
    geometries.push_back(geometry);
    flips.push_back(flip);
  }
  crema::resample_output format;
  format.chw = options.layout == crema::pixel_layout::chw;
  for (std::size_t c = 0; c < 3; ++c) {
    format.mean[c] = options.mean[c];
    format.std[c] = options.std[c];
  }
  std::vector<std::uint8_t> kept(jobs.kept_bytes());
  std::vector<T> out(batch * sample);
  crema::run_resample_jobs(jobs, format, decoded.data(), kept.data(), out.data());

  std::vector<T> expected(sample);
  for (std::size_t i = 0; i < batch; ++i) {
    const crema::pixel_window& w = geometries[i].window;
    CAPTURE(i);
    CAPTURE(fmt::format("window {} {} {} {}", w.top, w.left, w.height, w.width));
    transform.apply(photo.jpeg, geometries[i], flips[i], std::span(expected), photo.name);
    std::size_t differ = 0;
    for (std::size_t v = 0; v < sample; ++v) {
      if (std::memcmp(&expected[v], &out[i * sample + v], sizeof(T)) != 0) ++differ;
    }
    CHECK(differ == 0);
  }
}

template <class T>
void check_every_layout(const char* name, std::size_t channels,
                        const crema::image_transform_options& base) {
  const photograph photo = load(name, channels);
  for (const auto layout : {crema::pixel_layout::chw, crema::pixel_layout::hwc}) {
    crema::image_transform_options options = base;
    options.layout = layout;
    options.decode.channels = channels;
    options.decode.dct_scaling = false;  // what the GPU decodes: the window at full size
    options.mean = {0.485F, 0.456F, 0.406F};
    options.std = {0.229F, 0.224F, 0.225F};
    CAPTURE(name);
    CAPTURE(channels);
    CAPTURE(layout == crema::pixel_layout::chw);
    for (std::uint64_t seed = 1; seed <= 3; ++seed) check_batch<T>(photo, options, seed);
  }
}

}  // namespace

TEST_SUITE("resample_jobs") {
  TEST_CASE("random resized crops: the jobs give image_transform's floats and bytes exactly") {
    const crema::image_transform_options options{
        .geometry = crema::random_resized_crop{.height = 56, .width = 48}};
    for (const char* name : {"astronaut.jpg", "coffee.jpg"}) {
      check_every_layout<float>(name, 3, options);
      check_every_layout<std::uint8_t>(name, 3, options);
      check_every_layout<float>(name, 1, options);
    }
  }

  TEST_CASE("resize + centre crop, and enlargements: the jobs give image_transform's values") {
    for (const char* name : {"astronaut.jpg", "coffee.jpg"}) {
      check_every_layout<float>(name, 3,
                                {.geometry = crema::resize_center_crop{
                                     .resize = 72, .crop_height = 64, .crop_width = 60}});
      check_every_layout<std::uint8_t>(
          name, 3,
          {.geometry = crema::random_resized_crop{
               .height = 300, .width = 280, .scale_low = 0.01, .scale_high = 0.05}});
    }
  }

  TEST_CASE("a window kept as it is (no pass changes it) is copied, mirrored where asked") {
    const photograph photo = load("coffee.jpg", 3);
    crema::image_geometry geometry{{10, 20, 32, 24}, {10, 20, 32, 24}, 32, 24};
    crema::resample_jobs jobs;
    jobs.add(geometry, true, 3, 0, photo.width * 3, 0);
    REQUIRE(jobs.jobs().size() == 1);
    CHECK((jobs.jobs()[0].flags &
           (crema::resample_job::horizontal | crema::resample_job::vertical)) == 0);
    const std::uint8_t* first = photo.pixels.data() + (10 * photo.width + 20) * 3;
    std::vector<std::uint8_t> kept(jobs.kept_bytes());
    std::vector<std::uint8_t> out(3 * 32 * 24);
    crema::resample_output format;
    format.chw = false;
    crema::run_resample_jobs(jobs, format, first, kept.data(), out.data());
    for (std::size_t y = 0; y < 32; ++y) {
      for (std::size_t x = 0; x < 24; ++x) {
        for (std::size_t c = 0; c < 3; ++c) {
          REQUIRE(out[(y * 24 + x) * 3 + c] == first[y * photo.width * 3 + (23 - x) * 3 + c]);
        }
      }
    }
  }

  TEST_CASE("a window too large for the jobs' 32-bit sizes is a length_error naming it") {
    crema::resample_jobs jobs;
    const crema::image_geometry huge{
        {0, 0, std::size_t{1} << 31, 8}, {0, 0, double(std::size_t{1} << 31), 8}, 4, 4};
    CHECK_THROWS_WITH_AS(jobs.add(huge, false, 3, 0, 24, 0), doctest::Contains("2147483648 x 8"),
                         crema::length_error);
    CHECK(jobs.jobs().empty());
  }
}
