// caffe_transform against a plain reference loop written the way Caffe's DataTransformer indexes
// (top_index, data_index), bit for bit, for every combination of crop, mirror, phase, mean and
// scale, from 8-bit and float values, planar and interleaved; and its errors.

#include <crema/io/caffe/caffe_transform.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr std::size_t channels = 3;
constexpr std::size_t height = 7;
constexpr std::size_t width = 9;

template <class T>
std::vector<T> test_values() {
  std::vector<T> values(channels * height * width);
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<T>((i * 37 + 11) % 251);
    if constexpr (std::is_floating_point_v<T>) values[i] = values[i] * T(0.37) - T(20);
  }
  return values;
}

// Caffe's loop over a channel-first record, with the draws made in crema's documented order.
template <class T>
std::vector<float> reference(const std::vector<T>& planar, const crema::caffe_transform_options& o,
                             crema::sample_rng rng) {
  const bool do_mirror = o.training && o.mirror && rng.below(2) == 1;
  std::size_t h_off = 0;
  std::size_t w_off = 0;
  std::size_t out_h = height;
  std::size_t out_w = width;
  if (o.crop_size != 0) {
    out_h = out_w = o.crop_size;
    if (o.training) {
      h_off = rng.below(height - o.crop_size + 1);
      w_off = rng.below(width - o.crop_size + 1);
    } else {
      h_off = (height - o.crop_size) / 2;
      w_off = (width - o.crop_size) / 2;
    }
  }
  std::vector<float> top(channels * out_h * out_w);
  for (std::size_t c = 0; c < channels; ++c) {
    for (std::size_t h = 0; h < out_h; ++h) {
      for (std::size_t w = 0; w < out_w; ++w) {
        const std::size_t data_index = (c * height + h_off + h) * width + w_off + w;
        const std::size_t top_index =
            do_mirror ? (c * out_h + h) * out_w + (out_w - 1 - w) : (c * out_h + h) * out_w + w;
        const float datum_element = static_cast<float>(planar[data_index]);
        float mean = 0.0f;
        if (o.mean_file) {
          mean = o.mean_file->data[data_index];
        } else if (!o.mean_values.empty()) {
          mean = o.mean_values.size() == 1 ? o.mean_values[0] : o.mean_values[c];
        }
        top[top_index] = (datum_element - mean) * o.scale;
      }
    }
  }
  return top;
}

std::shared_ptr<const crema::blob> mean_image() {
  auto mean = std::make_shared<crema::blob>();
  mean->shape = {1, channels, height, width};
  for (std::size_t i = 0; i < channels * height * width; ++i) {
    mean->data.push_back(static_cast<float>(i % 17) * 3.25f);
  }
  return mean;
}

std::vector<crema::caffe_transform_options> every_combination() {
  std::vector<crema::caffe_transform_options> all;
  for (const std::size_t crop : {0U, 5U, 7U}) {
    for (const bool mirror : {false, true}) {
      for (const bool training : {true, false}) {
        for (int mean = 0; mean < 4; ++mean) {
          for (const float scale : {1.0f, 0.00390625f, 0.017f}) {
            crema::caffe_transform_options o;
            o.crop_size = crop;
            o.mirror = mirror;
            o.training = training;
            o.scale = scale;
            if (mean == 1) o.mean_values = {104.0f};
            if (mean == 2) o.mean_values = {104.0f, 117.0f, 123.5f};
            if (mean == 3) o.mean_file = mean_image();
            all.push_back(o);
          }
        }
      }
    }
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <class T>
std::string error_of(const crema::caffe_transform& transform, crema::image_view<T> in,
                     std::span<float> out) {
  crema::sample_rng rng(1, 0, 0);
  try {
    transform(in, out, rng, "00000009_bad.jpg");
  } catch (const crema::error& error) {
    return error.what();
  }
  FAIL("no error");
  return {};
}

}  // namespace

TEST_SUITE("caffe_transform") {
  TEST_CASE(
      "rows of every width from 1 to 70 are (pixel - mean) x scale, mirrored rows reversed, "
      "with no mean, a channel's mean and a mean image, and the pixels themselves into bytes, "
      "with every instruction set the processor has") {
    using isa = crema::detail::byte_row_isa;
    const isa best = crema::detail::best_byte_row_isa();
    std::vector<isa> kinds{isa::plain};
    if (best >= isa::sse2) kinds.push_back(isa::sse2);
    if (best >= isa::avx2) kinds.push_back(isa::avx2);
    MESSAGE("the byte rows run with " << kinds.size() << " instruction sets here");
    struct restore {
      ~restore() { crema::detail::byte_rows().store(crema::detail::best_byte_row_isa()); }
    } restored;
    for (const isa kind : kinds) {
      crema::detail::byte_rows().store(kind);
      for (std::size_t row_width = 1; row_width <= 70; ++row_width) {
        for (int mean = 0; mean < 3; ++mean) {
          CAPTURE(static_cast<int>(kind));
          CAPTURE(row_width);
          CAPTURE(mean);
          std::vector<std::uint8_t> pixels(2 * row_width);
          for (std::size_t i = 0; i < pixels.size(); ++i) {
            pixels[i] = static_cast<std::uint8_t>(i * 7 + 3);
          }
          const auto image =
              crema::image_view<std::uint8_t>::planar(pixels.data(), 1, 2, row_width);
          crema::caffe_transform_options options{.training = true, .scale = 0.017f};
          auto mean_of = [](std::size_t i) { return static_cast<float>(i % 13) * 9.5f; };
          if (mean == 1) options.mean_values = {104.5f};
          if (mean == 2) {
            auto image_mean = std::make_shared<crema::blob>();
            image_mean->shape = {1, 1, 2, static_cast<std::int64_t>(row_width)};
            for (std::size_t i = 0; i < pixels.size(); ++i) image_mean->data.push_back(mean_of(i));
            options.mean_file = image_mean;
          }
          std::vector<float> expected(pixels.size());
          for (std::size_t i = 0; i < pixels.size(); ++i) {
            const float subtracted = mean == 0 ? 0.0f : mean == 1 ? 104.5f : mean_of(i);
            expected[i] = (static_cast<float>(pixels[i]) - subtracted) * options.scale;
          }
          std::vector<float> out(pixels.size());
          crema::sample_rng unused(1, 0, 0);
          const crema::caffe_transform plain(options);
          plain(image, std::span<float>(out), unused);
          CHECK(same_bits(out, expected));

          options.mirror = true;
          std::uint64_t position = 0;  // a record whose draw mirrors it
          while (crema::sample_rng(1, 0, position).below(2) != 1) ++position;
          crema::sample_rng mirrors(1, 0, position);
          const crema::caffe_transform mirroring(options);
          mirroring(image, std::span<float>(out), mirrors);
          for (std::size_t h = 0; h < 2; ++h) {
            std::reverse(expected.begin() + static_cast<std::ptrdiff_t>(h * row_width),
                         expected.begin() + static_cast<std::ptrdiff_t>((h + 1) * row_width));
          }
          CHECK(same_bits(out, expected));

          if (mean == 2) continue;  // a mean image takes float outputs
          // Into bytes: the pixels, and mirrored, each row reversed.
          std::vector<std::uint8_t> bytes(pixels.size());
          crema::sample_rng unused_again(1, 0, 0);
          plain(image, std::span<std::uint8_t>(bytes), unused_again);
          CHECK(bytes == pixels);
          crema::sample_rng mirrors_again(1, 0, position);
          mirroring(image, std::span<std::uint8_t>(bytes), mirrors_again);
          std::vector<std::uint8_t> reversed = pixels;
          for (std::size_t h = 0; h < 2; ++h) {
            std::reverse(reversed.begin() + static_cast<std::ptrdiff_t>(h * row_width),
                         reversed.begin() + static_cast<std::ptrdiff_t>((h + 1) * row_width));
          }
          CHECK(bytes == reversed);
        }
      }
    }
  }

  TEST_CASE(
      "interleaved colour rows of every width from 1 to 70 give the planar rows' bits, mirrored "
      "or not, with every mean and instruction set, and so do bands of rows written one by one") {
    using isa = crema::detail::byte_row_isa;
    const isa best = crema::detail::best_byte_row_isa();
    std::vector<isa> kinds{isa::plain};
    if (best >= isa::sse2) kinds.push_back(isa::sse2);
    if (best >= isa::avx2) kinds.push_back(isa::avx2);
    struct restore {
      ~restore() { crema::detail::byte_rows().store(crema::detail::best_byte_row_isa()); }
    } restored;
    constexpr std::size_t rows = 5;
    for (const isa kind : kinds) {
      crema::detail::byte_rows().store(kind);
      for (std::size_t row_width = 1; row_width <= 70; ++row_width) {
        for (int mean = 0; mean < 3; ++mean) {
          const int kind_number = static_cast<int>(kind);
          CAPTURE(kind_number);
          CAPTURE(row_width);
          CAPTURE(mean);
          std::vector<std::uint8_t> planar(3 * rows * row_width);
          for (std::size_t i = 0; i < planar.size(); ++i) {
            planar[i] = static_cast<std::uint8_t>(i * 7 + 3 + i / 5);
          }
          std::vector<std::uint8_t> interleaved(planar.size());
          for (std::size_t c = 0; c < 3; ++c) {
            for (std::size_t i = 0; i < rows * row_width; ++i) {
              interleaved[i * 3 + c] = planar[c * rows * row_width + i];
            }
          }
          crema::caffe_transform_options options{.mirror = true, .training = true, .scale = 0.017f};
          if (mean == 1) options.mean_values = {104.5f, 3.0f, 250.25f};
          if (mean == 2) {
            auto image_mean = std::make_shared<crema::blob>();
            image_mean->shape = {3, static_cast<std::int64_t>(rows),
                                 static_cast<std::int64_t>(row_width)};
            for (std::size_t i = 0; i < planar.size(); ++i) {
              image_mean->data.push_back(static_cast<float>(i % 13) * 9.5f);
            }
            options.mean_file = image_mean;
          }
          const crema::caffe_transform transform(options);
          for (std::uint64_t position = 0; position < 4; ++position) {
            const crema::sample_rng rng(7, 0, position);
            std::vector<float> expected(planar.size());
            std::vector<float> out(planar.size());
            auto draws = rng;
            transform(crema::image_view<std::uint8_t>::planar(planar.data(), 3, rows, row_width),
                      std::span<float>(expected), draws);
            draws = rng;
            const auto whole = crema::image_view<std::uint8_t>::interleaved(interleaved.data(), 3,
                                                                            rows, row_width);
            transform(whole, std::span<float>(out), draws);
            CHECK(same_bits(out, expected));

            // Bands of 1, then 2, then the rest, as a decoder hands them over.
            std::fill(out.begin(), out.end(), -1.0f);
            draws = rng;
            const crema::record_shape input{3, rows, row_width};
            const crema::caffe_crop crop = transform.draw_crop(input, draws);
            for (const auto& [first, count] :
                 {std::pair<std::size_t, std::size_t>{0, 1}, {1, 2}, {3, rows - 3}}) {
              auto band = whole;
              band.data += first * whole.row_stride;
              band.height = count;
              transform.write_rows(band, first, crop, input, std::span<float>(out));
            }
            CHECK(same_bits(out, expected));
          }
        }
      }
    }
  }

  TEST_CASE(
      "the transform equals Caffe's loop bit for bit, from planar and interleaved bytes "
      "and from floats") {
    const auto bytes = test_values<std::uint8_t>();
    const auto floats = test_values<float>();
    std::vector<std::uint8_t> interleaved(bytes.size());  // the same image, H x W x C
    for (std::size_t c = 0; c < channels; ++c) {
      for (std::size_t i = 0; i < height * width; ++i) {
        interleaved[i * channels + c] = bytes[c * height * width + i];
      }
    }
    std::size_t cases = 0;
    for (const auto& options : every_combination()) {
      const crema::caffe_transform transform(options);
      const auto shape = transform.output_shape(channels, height, width);
      for (std::uint64_t position = 0; position < 12; ++position) {
        CAPTURE(options.crop_size);
        CAPTURE(options.mirror);
        CAPTURE(options.training);
        CAPTURE(options.scale);
        CAPTURE(position);
        const crema::sample_rng rng(42, 3, position);
        std::vector<float> out(shape.elements());

        auto draws = rng;
        transform(crema::image_view<std::uint8_t>::planar(bytes.data(), channels, height, width),
                  std::span<float>(out), draws, "k");
        CHECK(same_bits(out, reference(bytes, options, rng)));

        draws = rng;
        transform(crema::image_view<std::uint8_t>::interleaved(interleaved.data(), channels, height,
                                                               width),
                  std::span<float>(out), draws, "k");
        CHECK(same_bits(out, reference(bytes, options, rng)));

        draws = rng;
        transform(crema::image_view<float>::planar(floats.data(), channels, height, width),
                  std::span<float>(out), draws, "k");
        CHECK(same_bits(out, reference(floats, options, rng)));
        ++cases;
      }
    }
    CHECK(cases == 3 * 2 * 2 * 4 * 3 * 12);
  }

  TEST_CASE(
      "training draws every crop offset and both mirrors, and testing takes the centre, "
      "unmirrored") {
    crema::caffe_transform_options options;
    options.crop_size = 5;
    options.mirror = true;
    const crema::caffe_transform training(options);
    options.training = false;
    const crema::caffe_transform testing(options);
    const auto bytes = test_values<std::uint8_t>();
    const auto view =
        crema::image_view<std::uint8_t>::planar(bytes.data(), channels, height, width);
    std::vector<float> out(channels * 25);
    std::vector<std::vector<float>> distinct;
    for (std::uint64_t position = 0; position < 400; ++position) {
      crema::sample_rng rng(7, 0, position);
      training(view, std::span<float>(out), rng);
      bool seen = false;
      for (const auto& other : distinct) seen = seen || same_bits(other, out);
      if (!seen) distinct.push_back(out);
    }
    CHECK(distinct.size() == 3 * 5 * 2);  // 3 rows x 5 columns of offsets, mirrored or not

    crema::sample_rng rng(7, 0, 0);
    testing(view, std::span<float>(out), rng);
    CHECK(out[0] == static_cast<float>(bytes[1 * width + 2]));  // the centre: offsets 1 and 2
  }

  TEST_CASE("outputs streamed past the caches are the same bits as outputs written through them") {
    // Rows of a multiple of 4 values (36 across, or a crop of 16), where the AVX2 planes stream.
    constexpr std::size_t c = 3, h = 24, w = 36;
    std::vector<std::uint8_t> bytes(c * h * w);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<std::uint8_t>((i * 37 + 11) % 251);
    }
    const auto view = crema::image_view<std::uint8_t>::planar(bytes.data(), c, h, w);
    for (const std::size_t crop : {0U, 16U}) {
      for (const bool mirror : {false, true}) {
        crema::caffe_transform_options options{.crop_size = crop,
                                               .mirror = mirror,
                                               .scale = 0.017f,
                                               .mean_values = {104.0f, 117.0f, 123.5f}};
        options.stream_from_bytes = std::numeric_limits<std::size_t>::max();
        const crema::caffe_transform cached(options);
        options.stream_from_bytes = 0;
        const crema::caffe_transform streamed(options);
        const std::size_t size = cached.output_shape(c, h, w).elements();
        for (std::uint64_t position = 0; position < 8; ++position) {
          CAPTURE(crop);
          CAPTURE(mirror);
          CAPTURE(position);
          const crema::sample_rng rng(5, 1, position);
          std::vector<float> expected(size);
          auto draws = rng;
          cached(view, std::span<float>(expected), draws);
          // 16-byte aligned (streamed) and 4 bytes past it (written through the caches).
          std::vector<float> room(size + 4);
          for (const std::size_t offset : {0U, 1U}) {
            draws = rng;
            streamed(view, std::span<float>(room).subspan(offset, size), draws);
            CHECK(std::equal(
                expected.begin(), expected.end(),
                room.begin() + static_cast<std::ptrdiff_t>(offset), [](float a, float b) {
                  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
                }));
          }
        }
      }
    }
  }

  TEST_CASE("wrong options and records are errors naming the option or the record") {
    crema::caffe_transform_options both;
    both.mean_values = {1.0f};
    both.mean_file = mean_image();
    CHECK_THROWS_AS(crema::caffe_transform{both}, crema::config_error);
    crema::caffe_transform_options infinite;
    infinite.scale = 1.0f / 0.0f;
    CHECK_THROWS_AS(crema::caffe_transform{infinite}, crema::config_error);

    const auto bytes = test_values<std::uint8_t>();
    const auto view =
        crema::image_view<std::uint8_t>::planar(bytes.data(), channels, height, width);

    crema::caffe_transform_options crop;
    crop.crop_size = 8;  // taller than 7
    std::vector<float> out(channels * 64);
    CHECK(error_of(crema::caffe_transform(crop), view, std::span<float>(out)) ==
          "record 00000009_bad.jpg: 3 x 7 x 9 is smaller than the crop 8");

    crema::caffe_transform_options file;
    file.mean_file = mean_image();
    const auto small = crema::image_view<std::uint8_t>::planar(bytes.data(), channels, 3, 3);
    std::vector<float> small_out(channels * 9);
    CHECK(error_of(crema::caffe_transform(file), small, std::span<float>(small_out)) ==
          "record 00000009_bad.jpg: 3 x 3 x 3 is not the mean file's 3 x 7 x 9");

    crema::caffe_transform_options two_values;
    two_values.mean_values = {1.0f, 2.0f};
    std::vector<float> full(channels * height * width);
    CHECK(error_of(crema::caffe_transform(two_values), view, std::span<float>(full)) ==
          "record 00000009_bad.jpg: 3 channels, but 2 mean values were given");

    std::vector<float> too_small(10);
    CHECK(error_of(crema::caffe_transform(), view, std::span<float>(too_small)) ==
          "caffe_transform: 3 x 7 x 9 values out, but room for 10");
  }
}
