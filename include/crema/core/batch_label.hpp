#pragma once

#include <crema/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

namespace crema {

/// @brief The type of a batch's labels: `T` itself, but `float` for element types narrower than
/// it (a batch of `std::uint8_t` pixels keeps labels past 255 exact).
template <class T>
using batch_label_t =
    std::conditional_t<std::is_floating_point_v<T> || (sizeof(T) >= sizeof(float)), T, float>;

namespace detail {

// The type a batch's `set_label` takes: its `label_type`, or else what its records hold.
template <class Batch>
struct batch_label_of {
  using type = typename decltype(std::declval<Batch&>().record(std::size_t{}))::element_type;
};
template <class Batch>
requires requires { typename Batch::label_type; }
struct batch_label_of<Batch> {
  using type = typename Batch::label_type;
};

// `label` as a `Label`, exactly: a format_error naming the record's key where `Label` cannot
// hold it (a label past 255 in 8-bit labels, past 2^24 in float ones), never a label wrapped
// or rounded into another class.
template <class Label>
[[nodiscard]] Label exact_label(std::int32_t label, std::string_view key) {
  static_assert(std::is_arithmetic_v<Label>, "crema: labels are numbers");
  if constexpr (std::is_floating_point_v<Label>) {
    constexpr std::int64_t exact = std::int64_t{1} << std::numeric_limits<Label>::digits;
    const std::int64_t value = label;
    if (value <= exact && value >= -exact) return static_cast<Label>(label);
    fail<format_error>("record {}: label {} is not exact in the batch's {}-bit float labels", key,
                       label, sizeof(Label) * 8);
  } else {
    if (std::in_range<Label>(label)) return static_cast<Label>(label);
    fail<format_error>("record {}: label {} does not fit the batch's {}-bit {} labels", key, label,
                       sizeof(Label) * 8, std::is_signed_v<Label> ? "signed" : "unsigned");
  }
}

}  // namespace detail
}  // namespace crema
