#pragma once

#include <crema/core/detail/cpu_features.hpp>
#include <crema/io/image/detail/resample_isa.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

// AVX2 and FMA where the processor has them, chosen at run time (core/detail/cpu_features.hpp).
#if defined(CREMA_X86_KERNELS)
#include <immintrin.h>
#endif

namespace crema {

/// @brief torchvision's ToTensor + Normalize of one channel's 8-bit values: `(value / 255 - mean)
/// / std`, computed in float to the same bits as torch computes it. Where the processor has AVX2
/// and FMA, each division is a multiplication by the reciprocal corrected by two fused
/// multiply-adds, eight values at a time; that gives the correctly rounded quotient for almost
/// every divisor, and the constructor checks all 256 values against true divisions, keeping the
/// divisions for a mean and std where any differs. Made once per channel; `operator()` is
/// thread-safe and allocates nothing.
class value_normalizer {
 public:
  value_normalizer() : value_normalizer(0.0F, 1.0F) {}
  value_normalizer(float mean, float std) noexcept;

  /// @brief Writes `count` values, normalised, to `out`.
  void operator()(const std::uint8_t* values, std::size_t count, float* out) const noexcept;

  /// @return one value, normalised
  [[nodiscard]] float operator()(std::uint8_t value) const noexcept { return table_[value]; }

 private:
  float mean_;
  float std_;
  bool corrected_;  // the corrected reciprocals give every value's true quotients
  std::array<float, 256> table_{};
};

namespace detail {

// An IEEE quotient a / b from b's reciprocal r: q = a r, then q + (a - q b) r, the remainder
// exact through a fused multiply-add (Markstein's correction).
[[nodiscard]] inline float corrected_quotient(float a, float b, float r) noexcept {
  const float q = a * r;
  return std::fma(std::fma(-q, b, a), r, q);
}

#if defined(CREMA_X86_KERNELS)
[[gnu::target("avx2,fma")]] inline __m256 corrected_quotient_avx2(__m256 a, __m256 b,
                                                                  __m256 r) noexcept {
  const __m256 q = _mm256_mul_ps(a, r);
  return _mm256_fmadd_ps(_mm256_fnmadd_ps(q, b, a), r, q);
}

[[gnu::target("avx2,fma")]] inline void normalize_values_avx2(const std::uint8_t* values,
                                                              std::size_t count, float mean,
                                                              float std, float* out) noexcept {
  const __m256 full = _mm256_set1_ps(255.0F);
  const __m256 inverse_full = _mm256_set1_ps(1.0F / 255.0F);
  const __m256 shift = _mm256_set1_ps(mean);
  const __m256 spread = _mm256_set1_ps(std);
  const __m256 inverse_spread = _mm256_set1_ps(1.0F / std);
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 eight = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(values + i))));
    const __m256 x = corrected_quotient_avx2(eight, full, inverse_full);
    _mm256_storeu_ps(out + i,
                     corrected_quotient_avx2(_mm256_sub_ps(x, shift), spread, inverse_spread));
  }
  for (; i < count; ++i) {
    out[i] = corrected_quotient(
        corrected_quotient(static_cast<float>(values[i]), 255.0F, 1.0F / 255.0F) - mean, std,
        1.0F / std);
  }
}
#endif

}  // namespace detail

inline value_normalizer::value_normalizer(float mean, float std) noexcept
    : mean_(mean), std_(std), corrected_(true) {
  const float inverse_full = 1.0F / 255.0F;
  const float inverse_spread = 1.0F / std;
  for (std::size_t value = 0; value < 256; ++value) {
    const auto x = static_cast<float>(value);
    table_[value] = (x / 255.0F - mean) / std;  // ToTensor, then Normalize
    const float corrected = detail::corrected_quotient(
        detail::corrected_quotient(x, 255.0F, inverse_full) - mean, std, inverse_spread);
    // Compared as bits: a NaN (std 0) matches only itself, and -0 is not 0.
    corrected_ = corrected_ && std::bit_cast<std::uint32_t>(corrected) ==
                                   std::bit_cast<std::uint32_t>(table_[value]);
  }
}

inline void value_normalizer::operator()(const std::uint8_t* values, std::size_t count,
                                         float* out) const noexcept {
#if defined(CREMA_X86_KERNELS)
  if (corrected_ && detail::host_cpu().fma &&
      detail::resample_rows().load(std::memory_order_relaxed) == detail::resample_isa::avx2) {
    detail::normalize_values_avx2(values, count, mean_, std_, out);
    return;
  }
#endif
  for (std::size_t i = 0; i < count; ++i) out[i] = table_[values[i]];
}

}  // namespace crema
