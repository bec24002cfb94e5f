// Encoded records: PNG decodes losslessly and JPEG closely, in BGR (Caffe's order) or RGB, gray as
// one channel unless three are asked for; corrupt images are format errors naming the key.

#include <crema/io/image/image_codec.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// A planar (C x H x W) test image: smooth, so that JPEG keeps it close; every channel differs.
std::vector<std::uint8_t> test_pixels(std::size_t channels, std::size_t height, std::size_t width) {
  std::vector<std::uint8_t> pixels(channels * height * width);
  for (std::size_t c = 0; c < channels; ++c) {
    for (std::size_t h = 0; h < height; ++h) {
      for (std::size_t w = 0; w < width; ++w) {
        pixels[(c * height + h) * width + w] = static_cast<std::uint8_t>(40 + c * 60 + h + w);
      }
    }
  }
  return pixels;
}

crema::image_view<std::uint8_t> planar(const std::vector<std::uint8_t>& pixels,
                                       std::size_t channels, std::size_t height,
                                       std::size_t width) {
  return crema::image_view<std::uint8_t>::planar(pixels.data(), channels, height, width);
}

std::string format_error_of(crema::image_decoder& decoder, const std::vector<std::byte>& bytes,
                            const char* key) {
  try {
    (void)decoder.decode(bytes, key);
  } catch (const crema::format_error& error) {
    return error.what();
  }
  FAIL("no format_error");
  return {};
}

}  // namespace

TEST_SUITE("image") {
  TEST_CASE("a PNG decodes to exactly its pixels, channel c of BGR at (c, h, w)") {
    const auto pixels = test_pixels(3, 5, 7);  // B, G, R planes
    std::vector<std::byte> png;
    crema::encode_png(planar(pixels, 3, 5, 7), png);
    CHECK(crema::sniff_image_format(png) == crema::image_format::png);

    crema::image_decoder bgr;
    const auto info = bgr.info(png, "k");
    CHECK(info.format == crema::image_format::png);
    CHECK(info.channels == 3);
    CHECK(info.height == 5);
    CHECK(info.width == 7);
    const auto image = bgr.decode(png, "k");
    REQUIRE(image.channels == 3);
    std::vector<std::uint8_t> out(image.elements());
    image.copy_planar(std::span<std::uint8_t>(out));
    CHECK(out == pixels);

    crema::image_decoder rgb({.order = crema::channel_order::rgb});
    const auto swapped = rgb.decode(png, "k");
    for (std::size_t h = 0; h < 5; ++h) {
      for (std::size_t w = 0; w < 7; ++w) {
        CHECK(swapped(0, h, w) == image(2, h, w));
        CHECK(swapped(1, h, w) == image(1, h, w));
        CHECK(swapped(2, h, w) == image(0, h, w));
      }
    }
  }

  TEST_CASE("gray stays one channel unless three are asked for, and colour to gray uses BT.601") {
    const auto gray_pixels = test_pixels(1, 4, 6);
    std::vector<std::byte> gray_png;
    crema::encode_png(planar(gray_pixels, 1, 4, 6), gray_png);
    crema::image_decoder native;
    const auto one = native.decode(gray_png, "gray");
    CHECK(one.channels == 1);
    CHECK(one(0, 3, 5) == gray_pixels[3 * 6 + 5]);

    crema::image_decoder three({.channels = 3});
    const auto repeated = three.decode(gray_png, "gray");
    REQUIRE(repeated.channels == 3);
    for (std::size_t c = 0; c < 3; ++c) CHECK(repeated(c, 2, 1) == gray_pixels[2 * 6 + 1]);

    const auto colour = test_pixels(3, 2, 2);
    std::vector<std::byte> colour_png;
    crema::encode_png(planar(colour, 3, 2, 2), colour_png);
    crema::image_decoder to_gray({.channels = 1});
    const auto gray = to_gray.decode(colour_png, "colour");
    REQUIRE(gray.channels == 1);
    // B, G, R at (1, 0): 40 + 1 = 41, 101, 161; weights 0.114, 0.587, 0.299.
    const double expected = 0.114 * 41 + 0.587 * 101 + 0.299 * 161;
    CHECK(std::abs(gray(0, 1, 0) - expected) <= 0.5 + 1e-9);
  }

  TEST_CASE("a JPEG decodes close to what was encoded, BGR and RGB exactly swapped") {
    const auto pixels = test_pixels(3, 32, 48);
    std::vector<std::byte> jpeg;
    crema::encode_jpeg(planar(pixels, 3, 32, 48), 98, jpeg);
    CHECK(crema::sniff_image_format(jpeg) == crema::image_format::jpeg);
    crema::image_decoder bgr;
    const auto image = bgr.decode(jpeg, "j");
    REQUIRE(image.channels == 3);
    REQUIRE(image.height == 32);
    REQUIRE(image.width == 48);
    int worst = 0;
    for (std::size_t c = 0; c < 3; ++c) {
      for (std::size_t h = 0; h < 32; ++h) {
        for (std::size_t w = 0; w < 48; ++w) {
          worst =
              std::max(worst, std::abs(int{image(c, h, w)} - int{pixels[(c * 32 + h) * 48 + w]}));
        }
      }
    }
    CHECK(worst <= 10);  // chroma is subsampled 4:2:0
    std::vector<std::uint8_t> kept(image.elements());
    image.copy_planar(std::span<std::uint8_t>(kept));

    crema::image_decoder rgb({.order = crema::channel_order::rgb});
    const auto swapped = rgb.decode(jpeg, "j");
    for (std::size_t h = 0; h < 32; ++h) {
      CHECK(swapped(0, h, 5) == kept[(2 * 32 + h) * 48 + 5]);
      CHECK(swapped(2, h, 5) == kept[(0 * 32 + h) * 48 + 5]);
    }

    const auto gray_pixels = test_pixels(1, 16, 16);
    std::vector<std::byte> gray_jpeg;
    crema::encode_jpeg(planar(gray_pixels, 1, 16, 16), 95, gray_jpeg);
    CHECK(bgr.decode(gray_jpeg, "g").channels == 1);
    CHECK(crema::image_decoder({.channels = 3}).decode(gray_jpeg, "g").channels == 3);
  }

  TEST_CASE("a copy of a decoder decodes on its own") {
    const auto pixels = test_pixels(3, 8, 8);
    std::vector<std::byte> jpeg;
    crema::encode_jpeg(planar(pixels, 3, 8, 8), 90, jpeg);
    crema::image_decoder first;
    const auto a = first.decode(jpeg, "a");
    std::vector<std::uint8_t> from_first(a.elements());
    a.copy_planar(std::span<std::uint8_t>(from_first));
    crema::image_decoder second = first;
    const auto b = second.decode(jpeg, "a");
    std::vector<std::uint8_t> from_second(b.elements());
    b.copy_planar(std::span<std::uint8_t>(from_second));
    CHECK(from_first == from_second);
    CHECK(a.data != b.data);
  }

  TEST_CASE("corrupt, truncated and unknown images are format errors naming the key") {
    const auto pixels = test_pixels(3, 16, 16);
    std::vector<std::byte> jpeg;
    crema::encode_jpeg(planar(pixels, 3, 16, 16), 90, jpeg);
    std::vector<std::byte> png;
    crema::encode_png(planar(pixels, 3, 16, 16), png);
    crema::image_decoder decoder;

    const std::vector<std::byte> text(100, std::byte{'x'});
    CHECK(format_error_of(decoder, text, "00000001_a.txt") ==
          "image 00000001_a.txt: its 100 bytes are neither a JPEG nor a PNG");

    auto cut_jpeg = jpeg;
    cut_jpeg.resize(jpeg.size() / 2);
    CHECK(format_error_of(decoder, cut_jpeg, "00000002_b.jpg").find("image 00000002_b.jpg: JPEG") ==
          0);

    auto cut_png = png;
    cut_png.resize(png.size() - 20);
    CHECK(format_error_of(decoder, cut_png, "00000003_c.png").find("image 00000003_c.png: PNG") ==
          0);

    auto bad_crc = png;
    bad_crc[30] ^= std::byte{0xff};  // inside IHDR: its CRC no longer matches
    CHECK(format_error_of(decoder, bad_crc, "00000004_d.png").find("00000004_d.png") !=
          std::string::npos);

    crema::image_decoder small({.max_pixels = 100});
    CHECK(format_error_of(small, png, "big").find("over the limit of 100") != std::string::npos);
    CHECK(format_error_of(small, jpeg, "big").find("over the limit of 100") != std::string::npos);

    // The decoder is still good after errors.
    CHECK(decoder.decode(png, "fine").width == 16);
    CHECK(decoder.decode(jpeg, "fine").width == 16);
  }

  TEST_CASE("only 0, 1 or 3 channels can be asked for, and encoded") {
    CHECK_THROWS_AS(crema::image_decoder({.channels = 2}), crema::config_error);
    const auto pixels = test_pixels(2, 2, 2);
    std::vector<std::byte> out;
    CHECK_THROWS_AS(crema::encode_png(planar(pixels, 2, 2, 2), out), crema::config_error);
    CHECK_THROWS_AS(crema::encode_jpeg(planar(pixels, 2, 2, 2), 90, out), crema::config_error);
  }
}
