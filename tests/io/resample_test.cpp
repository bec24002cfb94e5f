// band_resampler: every instruction set gives the same bytes (Pillow's arithmetic), for any box,
// output size and band height; rows outside the vertical pass's reach are never needed.

#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/resample.hpp>
#include <crema/pipeline/sample_context.hpp>

#include "common/test_data.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

struct isa_ceiling {
  crema::detail::resample_isa saved = crema::detail::resample_rows().load();
  explicit isa_ceiling(crema::detail::resample_isa isa) { crema::detail::resample_rows() = isa; }
  ~isa_ceiling() { crema::detail::resample_rows() = saved; }
};

std::vector<std::uint8_t> resample(const crema::image_view<std::uint8_t>& image,
                                   crema::resample_box box, std::size_t out_height,
                                   std::size_t out_width, std::size_t band) {
  crema::band_resampler resampler;
  resampler.start(image.channels, image.height, image.width, box, out_height, out_width);
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
  TEST_CASE("every instruction set gives the same bytes, for shrinking, enlarging, fractional "
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
      CAPTURE(trial);
      std::vector<std::uint8_t> plain;
      {
        isa_ceiling lowered(crema::detail::resample_isa::plain);
        plain = resample(image, box, out_height, out_width, band);
      }
      const auto best = resample(image, box, out_height, out_width, band);
      CHECK(best == plain);
    }
  }
}
