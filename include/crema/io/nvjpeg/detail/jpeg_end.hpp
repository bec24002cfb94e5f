#pragma once

#include <cstddef>
#include <span>

namespace crema::detail {

// Whether a JPEG stream reaches its end: an EOI marker (FF D9) after the start of its first scan.
// nvJPEG's hardware engine decodes a stream cut short without a word (an H100, CUDA 13.0: the
// missing rows made up), so such a stream is left to the CPU path, which calls it an error, or
// decodes it where the user accepts libjpeg's warnings. Walks the marker segments to the first
// SOS (an EXIF thumbnail's own EOI sits inside an APP1 segment, before it), then looks back from
// the end (bytes after the EOI are allowed); inside entropy-coded data FF is always followed by
// 00 or a restart marker, so FF D9 there is the end.
[[nodiscard]] inline bool jpeg_reaches_end(std::span<const std::byte> bytes) noexcept {
  const std::size_t n = bytes.size();
  const auto at = [&](std::size_t i) { return std::to_integer<unsigned>(bytes[i]); };
  if (n < 4 || at(0) != 0xFF || at(1) != 0xD8) return false;
  std::size_t i = 2;
  std::size_t scan = 0;
  while (scan == 0) {
    if (i >= n || at(i) != 0xFF) return false;
    while (i < n && at(i) == 0xFF) ++i;  // fill bytes before a marker
    if (i >= n) return false;
    const unsigned marker = at(i++);
    if (marker == 0xDA) {
      scan = i;
    } else if (marker == 0xD9) {
      return false;  // an end before any scan
    } else if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      continue;  // markers without a segment
    } else {
      if (n - i < 2) return false;
      const std::size_t length = at(i) << 8 | at(i + 1);
      if (length < 2 || length > n - i) return false;
      i += length;
    }
  }
  for (std::size_t end = n - 1; end > scan; --end) {
    if (at(end) == 0xD9 && at(end - 1) == 0xFF) return true;
  }
  return false;
}

}  // namespace crema::detail
