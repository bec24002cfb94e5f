// band_resampler: every instruction set gives the same bytes (Pillow's arithmetic), for any box,
// output size and band height; rows outside the vertical pass's reach are never needed.
// value_normalizer: torch's bits for every value, on every instruction set.

#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/resample.hpp>
#include <crema/io/image/value_normalizer.hpp>
#include <crema/pipeline/sample_context.hpp>

#include "common/test_data.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace {

struct isa_ceiling {
  crema::detail::resample_isa saved = crema::detail::resample_rows().load();
  explicit isa_ceiling(crema::detail::resample_isa isa) { crema::detail::resample_rows() = isa; }
  ~isa_ceiling() { crema::detail::resample_rows() = saved; }
};

std::vector<std::uint8_t> resample(const crema::image_view<std::uint8_t>& image,
                                   crema::resample_box box, std::size_t out_height,
                                   std::size_t out_width, std::size_t band, bool mirror = false) {
  crema::band_resampler resampler;
  resampler.start(image.channels, image.height, image.width, box, out_height, out_width, mirror);
  for (std::size_t row = 0; row < image.height; row += band) {
    const std::size_t count = std::min(band, image.height - row);
    resampler.rows({image.data + row * image.row_stride, image.row_stride, row, count});
  }
  std::vector<std::uint8_t> out(out_height * out_width * image.channels);
  resampler.finish([&](std::size_t row, const std::uint8_t* values) {
    std::copy(values, values + out_width * image.channels,
              out.begin() + static_cast<std::ptrdiff_t>(row * out_width * image.channels));
  });
  return out;
}

}  // namespace

TEST_SUITE("band_resampler") {
  TEST_CASE(
      "every instruction set gives the same bytes, for shrinking, enlarging, fractional "
      "boxes and edges") {
    crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
    const auto bytes = crema::test::read_bytes(crema::test::test_data("coffee.jpg"));
    const auto image = decoder.decode(bytes, "coffee.jpg");
    if (crema::detail::best_resample_isa() == crema::detail::resample_isa::plain) {
      MESSAGE("this processor has no AVX2: the plain pass is compared with itself");
    }
    crema::sample_rng rng(5, 0, 0);
    for (int trial = 0; trial < 150; ++trial) {
      const double height = 1.0 + rng.uniform() * static_cast<double>(image.height - 1);
      const double width = 1.0 + rng.uniform() * static_cast<double>(image.width - 1);
      const crema::resample_box box{rng.uniform() * (static_cast<double>(image.height) - height),
                                    rng.uniform() * (static_cast<double>(image.width) - width),
                                    height, width};
      const std::size_t out_height = 1 + rng.below(trial % 3 == 0 ? 300 : 80);
      const std::size_t out_width = 1 + rng.below(trial % 2 == 0 ? 300 : 80);
      const std::size_t band = 1 + rng.below(20);
      const bool mirror = rng.bernoulli(0.5);
      CAPTURE(trial);
      std::vector<std::uint8_t> plain;
      {
        isa_ceiling lowered(crema::detail::resample_isa::plain);
        plain = resample(image, box, out_height, out_width, band, mirror);
      }
      const auto best = resample(image, box, out_height, out_width, band, mirror);
      CHECK(best == plain);
    }
  }

  TEST_CASE("rows come channel by channel, and mirrored rows are the others reversed") {
    crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
    const auto bytes = crema::test::read_bytes(crema::test::test_data("astronaut.jpg"));
    const auto image = decoder.decode(bytes, "astronaut.jpg");
    for (const std::size_t out_width : {256, 100, 37}) {  // 256: no horizontal pass at all
      CAPTURE(out_width);
      const crema::resample_box box{0, 0, 256, 256};
      const auto plain = resample(image, box, 50, out_width, 16);
      const auto mirrored = resample(image, box, 50, out_width, 16, true);
      bool reversed = true;
      for (std::size_t row = 0; row < 50; ++row) {
        for (std::size_t c = 0; c < 3; ++c) {
          for (std::size_t x = 0; x < out_width; ++x) {
            const std::size_t at = (row * 3 + c) * out_width;
            reversed = reversed && mirrored[at + x] == plain[at + out_width - 1 - x];
          }
        }
      }
      CHECK(reversed);
    }
    // Without either pass the rows are the image's, channel by channel.
    const auto same = resample(image, {0, 0, 256, 256}, 256, 256, 7);
    CHECK(same[0] == image(0, 0, 0));
    CHECK(same[256] == image(1, 0, 0));
    CHECK(same[3 * 256 + 2 * 256 + 5] == image(2, 1, 5));
  }
}

TEST_SUITE("value_normalizer") {
  TEST_CASE(
      "every value gets the bits of ToTensor then Normalize in float, on every instruction "
      "set, at any offset") {
    // 259 values: all 256, then three more, so that eight-at-a-time passes leave a tail.
    std::vector<std::uint8_t> values(259);
    std::iota(values.begin(), values.end(), std::uint8_t{0});
    struct channel {
      float mean;
      float std;
    };
    // ImageNet's, none, odd ones, a std whose reciprocal overflows (the divisions are kept),
    // and a huge one.
    for (const channel c : {channel{0.485F, 0.229F}, channel{0.0F, 1.0F}, channel{0.5F, 0.5F},
                            channel{-3.25F, 0.7F}, channel{0.406F, 1e-39F}, channel{0.1F, 3e38F}}) {
      CAPTURE(c.mean);
      CAPTURE(c.std);
      const crema::value_normalizer normalize(c.mean, c.std);
      for (const auto isa :
           {crema::detail::resample_isa::plain, crema::detail::resample_isa::avx2}) {
        if (isa > crema::detail::best_resample_isa()) continue;
        isa_ceiling lowered(isa);
        for (const std::size_t offset : {0, 1, 5}) {
          CAPTURE(offset);
          std::vector<float> out(values.size() - offset);
          normalize(values.data() + offset, out.size(), out.data());
          std::size_t wrong = 0;
          for (std::size_t i = 0; i < out.size(); ++i) {
            const float expected =
                (static_cast<float>(values[offset + i]) / 255.0F - c.mean) / c.std;
            wrong += std::bit_cast<std::uint32_t>(out[i]) != std::bit_cast<std::uint32_t>(expected);
            wrong += std::bit_cast<std::uint32_t>(normalize(values[offset + i])) !=
                     std::bit_cast<std::uint32_t>(expected);
          }
          CHECK(wrong == 0);
        }
      }
    }
  }
}
