#pragma once

#include <crema/core/detail/cpu_features.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

/// @file
/// CRC-32C (Castagnoli), as TFRecord files check their lengths and records with it: SSE 4.2's
/// crc32 instruction where the processor has it, eight bytes a step, else a table a byte at a
/// time (the same value). Component: core.

namespace crema::detail {

// The table of the reflected polynomial 0x82F63B78, a byte at a time.
inline constexpr std::array<std::uint32_t, 256> crc32c_table = [] {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1U) != 0 ? 0x82F63B78U : 0U);
    table[i] = crc;
  }
  return table;
}();

// The running CRC (pre- and post-inverted by the caller) over `bytes`, a byte at a time.
[[nodiscard]] inline std::uint32_t crc32c_update_plain(std::uint32_t crc,
                                                       std::span<const std::byte> bytes) noexcept {
  for (const std::byte b : bytes) {
    crc = (crc >> 8) ^ crc32c_table[(crc ^ std::to_integer<std::uint32_t>(b)) & 0xFFU];
  }
  return crc;
}

#if defined(CREMA_X86_KERNELS)
[[gnu::target("sse4.2")]] inline std::uint32_t crc32c_update_sse42(
    std::uint32_t crc, std::span<const std::byte> bytes) noexcept {
  const std::byte* at = bytes.data();
  std::size_t left = bytes.size();
  std::uint64_t wide = crc;
  for (; left >= 8; left -= 8, at += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, at, 8);
    wide = __builtin_ia32_crc32di(wide, word);
  }
  auto narrow = static_cast<std::uint32_t>(wide);
  for (; left > 0; --left, ++at) {
    narrow = __builtin_ia32_crc32qi(narrow, std::to_integer<unsigned char>(*at));
  }
  return narrow;
}
#endif

/// @return the CRC-32C of `bytes`; `sse42` false computes it without the instruction (for tests)
[[nodiscard]] inline std::uint32_t crc32c(std::span<const std::byte> bytes,
                                          bool sse42 = true) noexcept {
#if defined(CREMA_X86_KERNELS)
  if (sse42 && host_cpu().sse42) return ~crc32c_update_sse42(~0U, bytes);
#endif
  (void)sse42;
  return ~crc32c_update_plain(~0U, bytes);
}

/// @return TFRecord's masked CRC of `bytes`: the CRC-32C rotated right by 15 bits, plus a
/// constant (so that a CRC of CRCs does not come out trivially)
[[nodiscard]] inline std::uint32_t masked_crc32c(std::span<const std::byte> bytes) noexcept {
  const std::uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

}  // namespace crema::detail
