#pragma once

// {fmt}, as every crema header includes it. {fmt} 9 checks format strings at compile time with
// constexpr functions that it leaves non-constexpr under nvcc unless FMT_USE_CONSTEXPR is 1; then
// every crema header that formats an error fails to compile in a .cu file. Defining it here,
// before {fmt} is seen, lets crema's headers compile with plain `nvcc -std=c++20 -I include`.
#if defined(__CUDACC__) && !defined(FMT_USE_CONSTEXPR) && !defined(FMT_VERSION)
#define FMT_USE_CONSTEXPR 1
#endif

// The formatting core only: <fmt/format.h> brings the floating-point, locale and integer
// writers, which every file that includes it compiles again (half the object code of a file
// that builds a pipeline); the core calls the copies compiled once in the {fmt} library.
#if __has_include(<fmt/base.h>)
#include <fmt/base.h>  // {fmt} 11
#else
#include <fmt/core.h>
#endif

#include <iterator>
#include <string>

#if defined(__CUDACC__) && FMT_VERSION < 100000 && !FMT_USE_CONSTEXPR
#error \
    "crema: under nvcc, {fmt} 9 needs FMT_USE_CONSTEXPR=1, but {fmt} was included before crema \
without it; include crema's headers first, or define FMT_USE_CONSTEXPR=1 for this file"
#endif

namespace crema::detail {

/// The format string of a crema message with `Args`. {fmt}'s `format_string` checks it against
/// the arguments at compile time, by constant evaluation in every file that includes the header
/// that formats it: about a fifth of the time a file that builds a pipeline takes to parse. The
/// strings are crema's, not the user's, so crema's own builds check them (its CMake project
/// defines `CREMA_CHECK_FORMATS` for its libraries, tests, tools and examples) and users' files
/// take them as they are.
#if defined(CREMA_CHECK_FORMATS)
template <class... Args>
using format_string = fmt::format_string<Args...>;
#else
template <class... Args>
using format_string = fmt::string_view;
#endif

/// `fmt::format`, from the formatting core alone ({fmt} 11 keeps `fmt::format` in
/// <fmt/format.h>): the text of `format` with `args`. Through functions that are not templates
/// only, so that a file compiled by another compiler than {fmt}'s library (clang++ against
/// Debian's g++-built {fmt} 9, whose templates clang mangles otherwise) links.
template <class... Args>
[[nodiscard]] std::string format(format_string<Args...> format, Args&&... args) {
#if FMT_VERSION >= 110000
  std::string text;
  fmt::vformat_to(std::back_inserter(text), format, fmt::make_format_args(args...));
  return text;
#else
  return fmt::vformat(format, fmt::make_format_args(args...));
#endif
}

}  // namespace crema::detail
