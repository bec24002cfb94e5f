// libFuzzer target: the window decoder and the ImageNet-style transform over any bytes. The first
// eight bytes choose what is asked (a window anywhere in the image, edges and single pixels
// included, the least size that allows DCT scaling, the decoder's options, a transform's
// geometry), the rest is the image. Every request either hands over exactly the rows and columns
// it promised, each byte readable, or is a crema::format_error; the decoders are reused from one
// input to the next, as a producer reuses them. Anything else (a crash, a sanitizer report,
// another exception, a broken promise, which traps) is a finding.

#include <crema/io/image/image_transform.hpp>
#include <crema/io/image/image_window_decoder.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace {

constexpr std::size_t max_pixels = std::size_t{1} << 22;

// `choice` of 255 is the whole of `size`, 0 the first of it.
std::size_t part_of(std::size_t size, std::uint8_t choice) { return size * choice / 255; }

// Checks the decoder's promises and reads every byte it hands over.
struct checking_sink {
  std::size_t channels = 0;
  crema::decoded_window region;
  std::size_t next_row = 0;
  unsigned sum = 0;

  static void check(bool holds) {
    if (!holds) __builtin_trap();
  }
  void start(const crema::decoded_window& decoded) {
    region = decoded;
    check(decoded.channels == channels || channels == 0);
    check(decoded.height > 0 && decoded.width > 0);
    check(decoded.box_top >= 0 && decoded.box_left >= 0);
    check(decoded.box_top + decoded.box_height <= static_cast<double>(decoded.height) + 1.0);
    check(decoded.box_left + decoded.box_width <= static_cast<double>(decoded.width) + 1.0);
  }
  void rows(const crema::pixel_rows& band) {
    check(band.first == next_row && band.count > 0);
    check(band.first + band.count <= region.height);
    for (std::size_t r = 0; r < band.count; ++r) {
      const std::uint8_t* row = band.row(r);
      for (std::size_t i = 0; i < region.width * region.channels; ++i) sum += row[i];
    }
    next_row += band.count;
  }
};

crema::image_window_decoder& decoder_for(std::uint8_t options) {
  static std::vector<crema::image_window_decoder> decoders = [] {
    std::vector<crema::image_window_decoder> made;
    for (std::size_t i = 0; i < 24; ++i) {
      made.emplace_back(crema::window_decode_options{
          .channels = std::array<std::size_t, 3>{0, 1, 3}[i % 3],
          .order = i % 2 == 0 ? crema::channel_order::rgb : crema::channel_order::bgr,
          .max_pixels = max_pixels,
          .accept_warnings = (i / 3) % 2 == 1,
          .dct_scaling = (i / 6) % 2 == 0,
          .band_rows = i / 12 == 0 ? std::size_t{16} : std::size_t{1} + i % 7});
    }
    return made;
  }();
  return decoders[options % decoders.size()];
}

void decode_window(std::span<const std::uint8_t> choose, std::span<const std::byte> image) {
  crema::image_window_decoder& decoder = decoder_for(choose[5]);
  checking_sink sink{.channels = decoder.options().channels};
  const auto plan_for = [&](const crema::image_info& info) {
    crema::pixel_window window;
    window.top = std::min(part_of(info.height, choose[0]), info.height - 1);
    window.left = std::min(part_of(info.width, choose[1]), info.width - 1);
    window.height = std::max<std::size_t>(1, part_of(info.height - window.top, choose[2]));
    window.width = std::max<std::size_t>(1, part_of(info.width - window.left, choose[3]));
    return crema::decode_plan{window, part_of(window.height, choose[4]),
                              part_of(window.width, choose[4])};
  };
  decoder.decode(image, "fuzz", plan_for, sink);
  checking_sink::check(sink.next_row == sink.region.height);
}

void transform(std::span<const std::uint8_t> choose, std::span<const std::byte> image) {
  const std::size_t side = 1 + choose[7] % 48;
  crema::image_transform_options options;
  if (choose[6] % 2 == 0) {
    options.geometry =
        crema::random_resized_crop{.height = side, .width = std::size_t{1} + choose[2] % 48};
  } else {
    options.geometry = crema::resize_center_crop{
        .resize = side + choose[2] % 16U, .crop_height = side, .crop_width = side};
  }
  options.mirror = choose[3] % 2 == 1;
  options.decode.channels = choose[5] % 2 == 0 ? 3 : 1;
  options.decode.max_pixels = max_pixels;
  options.decode.dct_scaling = choose[4] % 2 == 0;
  crema::image_transform transform(options);
  std::vector<float> out(transform.shape().elements());
  transform(image, std::span<float>(out), crema::sample_rng(choose[0], choose[1], choose[6]),
            "fuzz");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  const std::span<const std::uint8_t> choose(data, 8);
  const std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data + 8), size - 8);
  try {
    if (choose[6] % 4 == 3) {
      transform(choose, image);
    } else {
      decode_window(choose, image);
    }
  } catch (const crema::format_error&) {
  }
  return 0;
}
