#pragma once

// The one place crema decides which x86 vector instructions its kernels may use. Kernels are
// compiled for AVX2, FMA, F16C or SSE 4.2 with `target` attributes wherever the compiler can
// (CREMA_X86_KERNELS: GCC or Clang for x86-64), whatever the rest of the program is compiled
// for, and a caller picks one by what `host_cpu()` found in the processor when first asked.
// Every kernel computes the same bits as the plain loop it stands in for.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CREMA_X86_KERNELS 1
#include <cpuid.h>
#endif

namespace crema::detail {

/// What the processor this program runs on offers crema's kernels.
struct cpu_features {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;   ///< with AVX, which its 256-bit conversions need
  bool sse42 = false;  ///< SSE 4.2's crc32 (CRC-32C)
};

/// @return the features of the processor, detected once (thread-safe)
[[nodiscard]] inline const cpu_features& host_cpu() noexcept {
  static const cpu_features features = [] {
    cpu_features found;
#if defined(CREMA_X86_KERNELS)
    __builtin_cpu_init();
    found.avx2 = __builtin_cpu_supports("avx2") != 0;
    found.fma = __builtin_cpu_supports("fma") != 0;
    found.sse42 = __builtin_cpu_supports("sse4.2") != 0;
    // Clang knows "avx" but not "f16c" as a feature name: F16C is CPUID leaf 1's ECX bit.
    unsigned eax = 0;
    unsigned ebx = 0;
    unsigned ecx = 0;
    unsigned edx = 0;
    found.f16c = __builtin_cpu_supports("avx") != 0 &&
                 __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#endif
    return found;
  }();
  return features;
}

}  // namespace crema::detail
