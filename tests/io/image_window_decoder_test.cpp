// image_window_decoder: a window decoded alone (JPEG: cropped iMCU columns, skipped rows, stopped
// below it) is bit for bit the full decode cut to the window, for every subsampling, gray,
// progressive, CMYK, PNG, and at 1/2, 1/4, 1/8 the full decode at that scale; bands come in
// order and cover the window once, every row placed where libjpeg-turbo writes it through the
// cache; bad input and bad plans are errors naming the key.

#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_window_decoder.hpp>
#include <crema/pipeline/sample_context.hpp>

#include "common/test_data.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <jpeglib.h>
#include <turbojpeg.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::vector<std::byte> read_test_file(const char* name) {
  return crema::test::read_bytes(crema::test::test_data(name));
}

// Interleaved pixels of a whole image.
struct pixels {
  std::size_t channels = 0;
  std::size_t height = 0;
  std::size_t width = 0;
  std::vector<std::uint8_t> values;

  [[nodiscard]] pixels cut(std::size_t top, std::size_t left, std::size_t rows,
                           std::size_t columns) const {
    pixels part{channels, rows, columns, std::vector<std::uint8_t>(rows * columns * channels)};
    for (std::size_t r = 0; r < rows; ++r) {
      std::memcpy(part.values.data() + r * columns * channels,
                  values.data() + ((top + r) * width + left) * channels, columns * channels);
    }
    return part;
  }
  friend bool operator==(const pixels&, const pixels&) = default;
};

pixels decode_whole(const std::vector<std::byte>& bytes, std::size_t channels = 3) {
  crema::image_decoder decoder({.channels = channels, .order = crema::channel_order::rgb});
  const auto view = decoder.decode(bytes, "reference");
  pixels out{view.channels, view.height, view.width, {}};
  out.values.assign(view.data, view.data + view.elements());
  return out;
}

// TurboJPEG's own scaled decode of the whole image (it picks the factor that fits the size).
pixels decode_scaled(const std::vector<std::byte>& bytes, std::size_t factor) {
  tjhandle handle = tjInitDecompress();
  int width = 0;
  int height = 0;
  int subsampling = 0;
  int colorspace = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  REQUIRE(tjDecompressHeader3(handle, data, bytes.size(), &width, &height, &subsampling,
                              &colorspace) == 0);
  const int f = static_cast<int>(factor);
  const int scaled_width = (width + f - 1) / f;
  const int scaled_height = (height + f - 1) / f;
  pixels out{3, static_cast<std::size_t>(scaled_height), static_cast<std::size_t>(scaled_width),
             std::vector<std::uint8_t>(static_cast<std::size_t>(scaled_width * scaled_height) * 3)};
  REQUIRE(tjDecompress2(handle, data, bytes.size(), out.values.data(), scaled_width, 0,
                        scaled_height, TJPF_RGB, 0) == 0);
  tjDestroy(handle);
  return out;
}

// The photograph's pixels re-encoded as a JPEG of another kind.
std::vector<std::byte> encode(const pixels& image, int subsampling, int flags = 0,
                              int quality = 90) {
  tjhandle handle = tjInitCompress();
  std::vector<std::uint8_t> source = image.values;
  unsigned char* encoded = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(handle, source.data(), static_cast<int>(image.width), 0,
                      static_cast<int>(image.height), TJPF_RGB, &encoded, &size, subsampling,
                      quality, flags) == 0);
  std::vector<std::byte> bytes(size);
  std::memcpy(bytes.data(), encoded, size);
  tjFree(encoded);
  tjDestroy(handle);
  return bytes;
}

// A CMYK JPEG (Adobe's inverted CMYK, YCCK-coded, as TurboJPEG writes it) of the same content.
std::vector<std::byte> encode_cmyk(const pixels& image) {
  std::vector<std::uint8_t> cmyk(image.height * image.width * 4);
  for (std::size_t i = 0; i < image.height * image.width; ++i) {
    cmyk[i * 4] = image.values[i * 3];
    cmyk[i * 4 + 1] = image.values[i * 3 + 1];
    cmyk[i * 4 + 2] = image.values[i * 3 + 2];
    cmyk[i * 4 + 3] = static_cast<std::uint8_t>(200 + i % 56);
  }
  tjhandle handle = tjInitCompress();
  unsigned char* encoded = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(handle, cmyk.data(), static_cast<int>(image.width), 0,
                      static_cast<int>(image.height), TJPF_CMYK, &encoded, &size, TJSAMP_420, 90,
                      0) == 0);
  std::vector<std::byte> bytes(size);
  std::memcpy(bytes.data(), encoded, size);
  tjFree(encoded);
  tjDestroy(handle);
  return bytes;
}

// Takes what the decoder hands over, and checks how: one start, then bands in order, each row
// once.
struct collecting_sink {
  crema::decoded_window window;
  pixels got;
  std::size_t next_row = 0;
  int starts = 0;

  void start(const crema::decoded_window& decoded) {
    window = decoded;
    ++starts;
    got = {decoded.channels, decoded.height, decoded.width,
           std::vector<std::uint8_t>(decoded.height * decoded.width * decoded.channels)};
  }
  void rows(const crema::pixel_rows& band) {
    REQUIRE(band.first == next_row);
    REQUIRE(band.count > 0);
    REQUIRE(band.first + band.count <= window.height);
    const std::size_t bytes = window.width * window.channels;
    for (std::size_t r = 0; r < band.count; ++r) {
      std::memcpy(got.values.data() + (band.first + r) * bytes, band.row(r), bytes);
    }
    next_row += band.count;
  }
};

pixels decode_window(crema::image_window_decoder& decoder, const std::vector<std::byte>& bytes,
                     const crema::decode_plan& plan, crema::decoded_window* seen = nullptr) {
  collecting_sink sink;
  decoder.decode(bytes, plan, "test.jpg", sink);
  CHECK(sink.starts == 1);
  CHECK(sink.next_row == sink.window.height);
  if (seen != nullptr) *seen = sink.window;
  return sink.got;
}

std::vector<crema::pixel_window> windows_of(std::size_t height, std::size_t width) {
  std::vector<crema::pixel_window> windows = {
      {0, 0, height, width},
      {0, 0, 1, 1},
      {height - 1, width - 1, 1, 1},
      {0, 0, height, 1},
      {0, width - 1, height, 1},
      {height / 2, 0, 1, width},
      {7, 9, 50, 33},
      {16, 16, 32, 32},
      {15, 17, 33, 31},
      {height - 20, width - 30, 20, 30},
  };
  crema::sample_rng rng(42, 0, 0);
  for (int i = 0; i < 40; ++i) {
    const std::size_t rows = 1 + rng.below(height);
    const std::size_t columns = 1 + rng.below(width);
    windows.push_back(
        {rng.below(height - rows + 1), rng.below(width - columns + 1), rows, columns});
  }
  return windows;
}

void check_every_window(const std::vector<std::byte>& bytes, const pixels& whole,
                        std::size_t channels = 3) {
  crema::image_window_decoder decoder({.channels = channels});
  for (const crema::pixel_window& w : windows_of(whole.height, whole.width)) {
    CAPTURE(w.top);
    CAPTURE(w.left);
    CAPTURE(w.height);
    CAPTURE(w.width);
    crema::decoded_window seen;
    const pixels got = decode_window(decoder, bytes, {w, 0, 0}, &seen);
    CHECK(seen.scale == 1);
    CHECK(seen.box_top == 0);
    CHECK(seen.box_left == 0);
    CHECK(got == whole.cut(w.top, w.left, w.height, w.width));
  }
}

// The same pixels through libjpeg's own compressor, for what TurboJPEG 2.1 cannot write:
// arithmetic coding, restart markers every `restart_rows` MCU rows (0: none).
std::vector<std::byte> encode_with_libjpeg(const pixels& image, bool arithmetic,
                                           unsigned restart_rows) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);  // a failure here exits: the test's own encoder
  jpeg_create_compress(&info);
  unsigned char* encoded = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &encoded, &size);
  info.image_width = static_cast<JDIMENSION>(image.width);
  info.image_height = static_cast<JDIMENSION>(image.height);
  info.input_components = static_cast<int>(image.channels);
  info.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, 90, TRUE);
  info.arith_code = arithmetic ? TRUE : FALSE;
  info.restart_in_rows = static_cast<int>(restart_rows);
  jpeg_start_compress(&info, TRUE);
  std::vector<std::uint8_t> row;
  while (info.next_scanline < info.image_height) {
    const std::size_t bytes = image.width * image.channels;
    row.assign(
        image.values.begin() + static_cast<std::ptrdiff_t>(info.next_scanline * bytes),
        image.values.begin() + static_cast<std::ptrdiff_t>((info.next_scanline + 1) * bytes));
    JSAMPROW pointer = row.data();
    jpeg_write_scanlines(&info, &pointer, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::vector<std::byte> out(size);
  std::memcpy(out.data(), encoded, size);
  std::free(encoded);
  return out;
}

// Each of `windows` decoded alone is the whole decode cut to it.
void check_windows(const std::vector<std::byte>& bytes, const pixels& whole,
                   const std::vector<crema::pixel_window>& windows) {
  crema::image_window_decoder decoder({.channels = whole.channels});
  for (const crema::pixel_window& w : windows) {
    CAPTURE(w.top);
    CAPTURE(w.left);
    CAPTURE(w.height);
    CAPTURE(w.width);
    CHECK(decode_window(decoder, bytes, {w, 0, 0}) == whole.cut(w.top, w.left, w.height, w.width));
  }
}

}  // namespace

TEST_SUITE("image_window_decoder") {
  TEST_CASE(
      "a JPEG window is bit for bit the full decode cut to it, for every subsampling, "
      "gray and progressive, at the edges and inside") {
    for (const char* name : {"astronaut.jpg", "coffee.jpg"}) {
      const pixels photo = decode_whole(read_test_file(name));
      for (const int subsampling :
           {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411, TJSAMP_GRAY}) {
        for (const int flags : {0, TJFLAG_PROGRESSIVE}) {
          CAPTURE(name);
          CAPTURE(subsampling);
          CAPTURE(flags);
          const auto bytes = encode(photo, subsampling, flags);
          check_every_window(bytes, decode_whole(bytes));
        }
      }
    }
  }

  TEST_CASE(
      "arithmetic-coded and restart-marked JPEGs, a 1 x 1 image and sides of 65,500 "
      "pixels decode by window as they do whole") {
    const pixels photo = decode_whole(read_test_file("coffee.jpg"));
    for (const bool arithmetic : {true, false}) {
      for (const unsigned restart_rows : {0U, 1U, 3U}) {
        CAPTURE(arithmetic);
        CAPTURE(restart_rows);
        const auto bytes = encode_with_libjpeg(photo, arithmetic, restart_rows);
        check_every_window(bytes, decode_whole(bytes));
      }
    }
    const pixels dot = photo.cut(50, 60, 1, 1);
    for (const int subsampling : {TJSAMP_420, TJSAMP_444, TJSAMP_GRAY}) {
      const auto bytes = encode(dot, subsampling);
      check_windows(bytes, decode_whole(bytes), {{0, 0, 1, 1}});
    }
    // JPEG's largest side, one pixel across, in both directions.
    constexpr std::size_t side = 65500;
    pixels line{3, 1, side, std::vector<std::uint8_t>(side * 3)};
    for (std::size_t i = 0; i < line.values.size(); ++i) {
      line.values[i] = photo.values[i % photo.values.size()];
    }
    const auto wide = encode(line, TJSAMP_420);
    check_windows(wide, decode_whole(wide),
                  {{0, 0, 1, side},
                   {0, 0, 1, 1},
                   {0, side - 1, 1, 1},
                   {0, 32000, 1, 224},
                   {0, side - 224, 1, 224}});
    const pixels column{3, side, 1, line.values};
    const auto tall = encode(column, TJSAMP_420);
    check_windows(tall, decode_whole(tall),
                  {{0, 0, side, 1},
                   {0, 0, 1, 1},
                   {side - 1, 0, 1, 1},
                   {32000, 0, 224, 1},
                   {side - 224, 0, 224, 1}});
  }

  TEST_CASE("the committed photographs themselves decode by window as they do whole") {
    for (const char* name : {"astronaut.jpg", "coffee.jpg"}) {
      CAPTURE(name);
      const auto bytes = read_test_file(name);
      check_every_window(bytes, decode_whole(bytes));
    }
  }

  TEST_CASE(
      "gray JPEGs give one channel as stored and three when asked, and CMYK is converted as "
      "the whole-image decoder converts it") {
    const pixels photo = decode_whole(read_test_file("coffee.jpg"));
    const auto gray = encode(photo, TJSAMP_GRAY);
    check_every_window(gray, decode_whole(gray, 0), 0);
    check_every_window(gray, decode_whole(gray, 3), 3);
    const auto cmyk = encode_cmyk(photo);
    check_every_window(cmyk, decode_whole(cmyk, 3), 3);
    check_every_window(cmyk, decode_whole(cmyk, 1), 1);
  }

  TEST_CASE(
      "every row handed over starts 16 bytes past a 32-byte boundary, where libjpeg-turbo "
      "writes it through the cache, whatever the image's width") {
    // On a 32-byte boundary, its AVX2 colour conversion writes the row with non-temporal stores
    // (around the cache), and the transform reading the row next would fetch it from memory.
    struct placement_sink {
      std::size_t rows_seen = 0;
      std::size_t misplaced = 0;
      void start(const crema::decoded_window&) {}
      void rows(const crema::pixel_rows& band) {
        CHECK(band.stride % 32 == 0);
        for (std::size_t r = 0; r < band.count; ++r) {
          ++rows_seen;
          misplaced += reinterpret_cast<std::uintptr_t>(band.row(r)) % 32 != 16;
        }
      }
    };
    const pixels photo = decode_whole(read_test_file("coffee.jpg"));
    crema::image_window_decoder decoder;
    for (const std::size_t width : {223U, 224U, 240U, 250U, 256U, 300U}) {
      CAPTURE(width);
      const auto bytes = encode(photo.cut(0, 0, 64, width), TJSAMP_420);
      placement_sink sink;
      // The whole width: no columns cropped, so each row handed over is a row as decoded.
      decoder.decode(bytes, {{5, 0, 40, width}, 0, 0}, "test.jpg", sink);
      CHECK(sink.rows_seen == 40);
      CHECK(sink.misplaced == 0);
    }
  }

  TEST_CASE("a PNG window is the whole PNG cut to it") {
    const pixels photo = decode_whole(read_test_file("coffee.jpg"));
    std::vector<std::byte> png;
    crema::encode_png(crema::image_view<std::uint8_t>::interleaved(photo.values.data(), 3,
                                                                   photo.height, photo.width),
                      png, crema::channel_order::rgb);
    check_every_window(png, photo);
  }

  TEST_CASE(
      "a window decoded smaller is the full image decoded at that scale, cut to the "
      "region holding the window, and the box says where the window lies in it") {
    const auto bytes = read_test_file("astronaut.jpg");  // 256 x 256
    crema::image_window_decoder decoder;
    struct expectation {
      crema::pixel_window window;
      std::size_t min_size;
      std::size_t scale;
    };
    for (const expectation& e : std::vector<expectation>{{{0, 0, 256, 256}, 100, 2},
                                                         {{0, 0, 256, 256}, 64, 4},
                                                         {{0, 0, 256, 256}, 32, 8},
                                                         {{0, 0, 256, 256}, 1, 8},
                                                         {{0, 0, 256, 256}, 129, 1},
                                                         {{13, 29, 201, 150}, 60, 2},
                                                         {{13, 29, 201, 150}, 30, 4},
                                                         {{101, 77, 17, 9}, 2, 8}}) {
      CAPTURE(e.window.top);
      CAPTURE(e.window.left);
      CAPTURE(e.min_size);
      crema::decoded_window seen;
      const pixels got = decode_window(decoder, bytes, {e.window, e.min_size, e.min_size}, &seen);
      REQUIRE(seen.scale == e.scale);
      const std::size_t f = e.scale;
      const std::size_t top = e.window.top / f;
      const std::size_t left = e.window.left / f;
      const std::size_t bottom = (e.window.top + e.window.height + f - 1) / f;
      const std::size_t right = (e.window.left + e.window.width + f - 1) / f;
      CHECK(seen.height == bottom - top);
      CHECK(seen.width == right - left);
      CHECK(seen.box_top == doctest::Approx(static_cast<double>(e.window.top) / f - top));
      CHECK(seen.box_left == doctest::Approx(static_cast<double>(e.window.left) / f - left));
      CHECK(seen.box_height == doctest::Approx(static_cast<double>(e.window.height) / f));
      CHECK(seen.box_width == doctest::Approx(static_cast<double>(e.window.width) / f));
      CHECK(seen.height >= e.min_size / 2);  // the window itself keeps min_size
      CHECK(got == decode_scaled(bytes, f).cut(top, left, bottom - top, right - left));
    }
  }

  TEST_CASE("dct_scaling off decodes at full size whatever the plan allows") {
    const auto bytes = read_test_file("astronaut.jpg");
    crema::image_window_decoder decoder({.dct_scaling = false});
    crema::decoded_window seen;
    (void)decode_window(decoder, bytes, {{0, 0, 256, 256}, 8, 8}, &seen);
    CHECK(seen.scale == 1);
    CHECK(seen.width == 256);
  }

  TEST_CASE("shrink_factor keeps at least the size asked for") {
    CHECK(crema::shrink_factor(256, 0) == 1);
    CHECK(crema::shrink_factor(256, 256) == 1);
    CHECK(crema::shrink_factor(256, 128) == 2);
    CHECK(crema::shrink_factor(256, 127) == 2);
    CHECK(crema::shrink_factor(255, 128) == 2);  // 255 / 2 rounds up to 128
    CHECK(crema::shrink_factor(256, 64) == 4);
    CHECK(crema::shrink_factor(256, 1) == 8);
    CHECK(crema::shrink_factor(7, 1) == 8);
  }

  TEST_CASE("reduced detail decodes one scale smaller while 3/4 of the size asked for stays") {
    using crema::decode_detail;
    const auto factor = [](std::size_t window, std::size_t least, decode_detail detail) {
      return crema::shrink_factor(crema::decode_plan{{0, 0, window, window}, least, least}, detail);
    };
    // 1.5 to 2 times the output: full size exactly, 1/2 reduced (a half keeps 3/4 or more).
    CHECK(factor(400, 224, decode_detail::exact) == 1);
    CHECK(factor(400, 224, decode_detail::reduced) == 2);
    CHECK(factor(336, 224, decode_detail::reduced) == 2);  // 168 rows: 3/4 of 224 exactly
    CHECK(factor(334, 224, decode_detail::reduced) == 1);  // 167: short of 3/4
    CHECK(factor(300, 224, decode_detail::reduced) == 1);
    // Past twice the output: one scale further than the exact factor, never two.
    CHECK(factor(700, 224, decode_detail::exact) == 2);
    CHECK(factor(700, 224, decode_detail::reduced) == 4);
    CHECK(factor(448, 224, decode_detail::reduced) == 2);
    CHECK(factor(2048, 224, decode_detail::exact) == 8);
    CHECK(factor(2048, 224, decode_detail::reduced) == 8);
    // No least size: full size either way (the plan asks for every pixel).
    CHECK(factor(400, 0, decode_detail::reduced) == 1);
    // The decoder takes the factor the option says: 256 rows for 160, 128 at 1/2.
    const auto bytes = read_test_file("astronaut.jpg");
    crema::image_window_decoder reduced({.detail = decode_detail::reduced});
    crema::decoded_window seen;
    (void)decode_window(reduced, bytes, {{0, 0, 256, 256}, 160, 160}, &seen);
    CHECK(seen.scale == 2);
    crema::image_window_decoder exact;
    (void)decode_window(exact, bytes, {{0, 0, 256, 256}, 160, 160}, &seen);
    CHECK(seen.scale == 1);
  }

  TEST_CASE("a truncated JPEG is an error naming the key, unless warnings are accepted") {
    auto bytes = read_test_file("coffee.jpg");
    bytes.resize(bytes.size() / 2);
    crema::image_window_decoder strict;
    collecting_sink sink;
    const crema::decode_plan plan{{0, 0, 171, 253}, 0, 0};
    CHECK_THROWS_WITH_AS(strict.decode(bytes, plan, "cut.jpg", sink),
                         doctest::Contains("image cut.jpg: JPEG data: Premature end of JPEG file"),
                         crema::format_error);
    // The same decoder decodes the next image as if nothing had happened.
    const auto whole = read_test_file("coffee.jpg");
    CHECK(decode_window(strict, whole, plan) == decode_whole(whole));
    crema::image_window_decoder lenient({.accept_warnings = true});
    collecting_sink accepted;
    lenient.decode(bytes, plan, "cut.jpg", accepted);
    CHECK(accepted.next_row == 171);
  }

  TEST_CASE(
      "bytes that are no image, a corrupt header and a window outside the image are "
      "errors naming the key") {
    crema::image_window_decoder decoder;
    collecting_sink sink;
    std::vector<std::byte> junk(100, std::byte{7});
    CHECK_THROWS_WITH_AS(decoder.decode(junk, {{0, 0, 1, 1}, 0, 0}, "junk.bin", sink),
                         doctest::Contains("junk.bin"), crema::format_error);
    auto header_only = read_test_file("coffee.jpg");
    header_only.resize(40);
    CHECK_THROWS_WITH_AS(decoder.decode(header_only, {{0, 0, 1, 1}, 0, 0}, "head.jpg", sink),
                         doctest::Contains("image head.jpg: JPEG"), crema::format_error);
    const auto bytes = read_test_file("coffee.jpg");
    CHECK_THROWS_WITH_AS(
        decoder.decode(bytes, {{100, 200, 72, 10}, 0, 0}, "coffee.jpg", sink),
        "image coffee.jpg: the plan's window (72 x 10 at row 100, column 200) is empty or "
        "outside the 171 x 253 image",
        crema::config_error);
    CHECK_THROWS_AS(decoder.decode(bytes, {{0, 0, 0, 5}, 0, 0}, "coffee.jpg", sink),
                    crema::config_error);
    CHECK(decoder.info(bytes, "coffee.jpg").width == 253);
  }

  TEST_CASE("images over max_pixels are refused before decoding") {
    crema::image_window_decoder decoder({.max_pixels = 1000});
    collecting_sink sink;
    const auto bytes = read_test_file("coffee.jpg");
    CHECK_THROWS_WITH_AS(decoder.decode(bytes, {{0, 0, 1, 1}, 0, 0}, "big.jpg", sink),
                         "image big.jpg: 253 x 171 pixels is empty or over the limit of 1000",
                         crema::format_error);
  }
}
