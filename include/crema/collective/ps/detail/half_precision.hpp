#pragma once

#include <crema/core/detail/cpu_features.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(CREMA_X86_KERNELS)
#include <immintrin.h>
#endif

// IEEE binary16, as the parameter server's compressed diffs carry values: one value converted
// exactly as the processor's F16C instructions convert it, and the loops over whole diffs.

namespace crema::detail {

/// @return `value` rounded to the nearest IEEE binary16 (ties to even), as its bits; past the
///         largest finite half, infinity
[[nodiscard]] constexpr std::uint16_t to_half(float value) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // infinity, or NaN kept quiet and non-zero
    const std::uint32_t payload =
        magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0u;
    return static_cast<std::uint16_t>(sign | 0x7c00u | payload);
  }
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520
  std::uint32_t result = 0;
  std::uint32_t rest = 0;
  std::uint32_t halfway = 0;
  if (magnitude < 0x38800000u) {               // below 2^-14: a subnormal half, in units of 2^-24
    if (magnitude < 0x33000000u) return sign;  // below 2^-25 rounds to zero
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - (magnitude >> 23);  // 14..24
    result = mantissa >> shift;
    rest = mantissa & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
  } else {  // rebias the exponent from 127 to 15, keep 10 bits of mantissa
    result = (magnitude - 0x38000000u) >> 13;
    rest = magnitude & 0x1fffu;
    halfway = 0x1000u;
  }
  if (rest > halfway || (rest == halfway && (result & 1u)))
    ++result;  // may carry into the exponent
  return static_cast<std::uint16_t>(sign | result);
}

/// @return the float of IEEE binary16 bits (exactly: every half is a float)
[[nodiscard]] constexpr float from_half(std::uint16_t half) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    const float value = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // times 2^-24
    return sign ? -value : value;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// The dense half-precision loops, where most of an fp16 diff's time goes. x86-64 processors
// since 2013 convert eight floats at a time (F16C); crema's users compile its headers for older
// ones too, so those loops are compiled for F16C on their own and chosen when the processor has
// it. Both round the same way (to nearest, ties to even): the same bits.

// out[i] = half(clamp(owed[i])), and owed[i] keeps what the half does not carry.
template <class T>
void send_halves_one_by_one(T* owed, std::byte* out, std::size_t count) {
  constexpr T largest = T(65504);
  for (std::size_t i = 0; i < count; ++i) {
    const T value = owed[i];
    const std::uint16_t half = to_half(
        static_cast<float>(std::isnan(value) ? value : std::clamp(value, -largest, largest)));
    std::memcpy(out + 2 * i, &half, 2);
    owed[i] = value - static_cast<T>(from_half(half));
  }
}

// into[i] += float(halves[i])
template <class T>
void add_halves_one_by_one(const std::byte* halves, T* into, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t half = 0;
    std::memcpy(&half, halves + 2 * i, 2);
    into[i] += static_cast<T>(from_half(half));
  }
}

#if defined(CREMA_X86_KERNELS)
__attribute__((target("avx,f16c"))) inline void send_halves_f16c(float* owed, std::byte* out,
                                                                 std::size_t count) {
  // min and max return their second operand for a NaN: a NaN passes through, as one by one.
  const __m256 largest = _mm256_set1_ps(65504.0f);
  const __m256 lowest = _mm256_set1_ps(-65504.0f);
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 value = _mm256_loadu_ps(owed + i);
    const __m256 clamped = _mm256_max_ps(lowest, _mm256_min_ps(largest, value));
    const __m128i half = _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), half);
    _mm256_storeu_ps(owed + i, _mm256_sub_ps(value, _mm256_cvtph_ps(half)));
  }
  send_halves_one_by_one(owed + i, out + 2 * i, count - i);
}

__attribute__((target("avx,f16c"))) inline void add_halves_f16c(const std::byte* halves,
                                                                float* into, std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(halves + 2 * i));
    _mm256_storeu_ps(into + i, _mm256_add_ps(_mm256_loadu_ps(into + i), _mm256_cvtph_ps(half)));
  }
  add_halves_one_by_one(halves + 2 * i, into + i, count - i);
}
#endif

template <class T>
void send_halves(T* owed, std::byte* out, std::size_t count) {
#if defined(CREMA_X86_KERNELS)
  if constexpr (std::is_same_v<T, float>) {
    if (host_cpu().f16c) return send_halves_f16c(owed, out, count);
  }
#endif
  send_halves_one_by_one(owed, out, count);
}

template <class T>
void add_halves(const std::byte* halves, T* into, std::size_t count) {
#if defined(CREMA_X86_KERNELS)
  if constexpr (std::is_same_v<T, float>) {
    if (host_cpu().f16c) return add_halves_f16c(halves, into, count);
  }
#endif
  add_halves_one_by_one(halves, into, count);
}

}  // namespace crema::detail
