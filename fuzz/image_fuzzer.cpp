// libFuzzer target: any bytes given to image_decoder either decode to an image whose every pixel
// can be read, or are a crema::format_error. Anything else (a crash, a sanitizer report, another
// exception, an allocation past the pixel limit) is a finding.

#include <crema/io/image/image_codec.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static crema::image_decoder decoder({.max_pixels = std::size_t{1} << 22});
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto image = decoder.decode(bytes, "fuzz");
    unsigned sum = 0;
    for (std::size_t c = 0; c < image.channels; ++c) {
      for (std::size_t h = 0; h < image.height; ++h) {
        for (std::size_t w = 0; w < image.width; ++w) sum += image(c, h, w);
      }
    }
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const crema::format_error&) {
  }
  return 0;
}
