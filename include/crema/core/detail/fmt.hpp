#pragma once

// {fmt}, as every crema header includes it. {fmt} 9 checks format strings at compile time with
// constexpr functions that it leaves non-constexpr under nvcc unless FMT_USE_CONSTEXPR is 1; then
// every crema header that formats an error fails to compile in a .cu file. Defining it here,
// before {fmt} is seen, lets crema's headers compile with plain `nvcc -std=c++20 -I include`.
#if defined(__CUDACC__) && !defined(FMT_USE_CONSTEXPR) && !defined(FMT_VERSION)
#define FMT_USE_CONSTEXPR 1
#endif

#include <fmt/format.h>

#if defined(__CUDACC__) && FMT_VERSION < 100000 && !FMT_USE_CONSTEXPR
#error "crema: under nvcc, {fmt} 9 needs FMT_USE_CONSTEXPR=1, but {fmt} was included before crema \
without it; include crema's headers first, or define FMT_USE_CONSTEXPR=1 for this file"
#endif
