#pragma once

#include <crema/core/detail/cpu_features.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

// Where the processor may have AVX2 (chosen at run time by the callers, which are compiled for
// it with `target`; core/detail/cpu_features.hpp).
#if defined(CREMA_X86_KERNELS)
#include <immintrin.h>
#endif

#if defined(CREMA_X86_KERNELS)
namespace crema::detail {

// Splits eight interleaved 3-channel pixels (the 24 bytes at `from`, what image decoders give)
// into their channels: channel c's eight bytes in the low half of `channels[c]`, by two byte
// shuffles each. Reads exactly those 24 bytes. For code compiled with `target("avx2")`.
class rgb_split {
 public:
  [[gnu::target("avx2")]] rgb_split() noexcept {
    for (std::size_t i = 0; i < 6; ++i) {
      masks_[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lanes[i].data()));
    }
  }

  [[gnu::target("avx2")]] void operator()(const std::uint8_t* from,
                                          __m128i (&channels)[3]) const noexcept {
    const __m128i low = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from));
    const __m128i high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 8));
    for (std::size_t c = 0; c < 3; ++c) {
      channels[c] =
          _mm_or_si128(_mm_shuffle_epi8(low, masks_[c]), _mm_shuffle_epi8(high, masks_[3 + c]));
    }
  }

 private:
  // Byte 3p + c of the 24 is pixel p's channel c: bytes 0-15 come from the first load, 16-23
  // from the second (which starts at byte 8); 0x80 zeroes a lane.
  static constexpr std::array<std::array<std::uint8_t, 16>, 6> lanes = [] {
    std::array<std::array<std::uint8_t, 16>, 6> made{};
    for (std::size_t c = 0; c < 3; ++c) {
      for (std::size_t p = 0; p < 16; ++p) {
        const std::size_t byte = 3 * p + c;
        made[c][p] = p < 8 && byte < 16 ? static_cast<std::uint8_t>(byte) : 0x80;
        made[3 + c][p] = p < 8 && byte >= 16 ? static_cast<std::uint8_t>(byte - 8) : 0x80;
      }
    }
    return made;
  }();

  __m128i masks_[6];
};

}  // namespace crema::detail
#endif
