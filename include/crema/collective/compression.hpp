#pragma once

#include <crema/core/error.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

/// @file
/// Compression of the diffs a client sends a parameter server: which coordinates travel
/// (all, the k largest, those past a threshold), in which precision (the element type, or IEEE
/// half), and error feedback: what is not sent now, or is lost to rounding, is owed and added to
/// the next diff, so that every coordinate's total arrives in the end.

namespace crema {

/// @brief Which coordinates of a diff are sent.
enum class sparsify {
  none,       ///< every coordinate (the message is dense)
  top_k,      ///< the `fraction` of coordinates largest in magnitude
  threshold,  ///< every coordinate whose magnitude reaches `threshold`
};

/// @brief How a diff is compressed. The default sends everything in the element type.
struct compression {
  sparsify rule = sparsify::none;
  /// top_k: the share of coordinates sent per diff, in (0, 1]; at least one is sent.
  double fraction = 0.01;
  /// threshold: the magnitude a coordinate's owed value must reach to be sent, >= 0.
  double threshold = 0.0;
  /// Values travel as IEEE binary16 (half the bytes of float), rounded to nearest; magnitudes
  /// past 65504 are sent as 65504 and the rest is owed.
  bool fp16 = false;
  /// Keep what is not sent (and the rounding) and add it to the next diff. Without it, what is
  /// not sent is lost.
  bool error_feedback = true;

  /// @return `top_k` of `fraction`
  [[nodiscard]] static compression top_k(double fraction) {
    return {.rule = sparsify::top_k, .fraction = fraction};
  }
  /// @return `threshold` at `threshold`
  [[nodiscard]] static compression above(double threshold) {
    return {.rule = sparsify::threshold, .threshold = threshold};
  }
  /// @return this compression, values sent as IEEE half
  [[nodiscard]] compression with_fp16() const {
    compression result = *this;
    result.fp16 = true;
    return result;
  }
};

/// @brief The encoder of one client's diffs: owes what it did not send.
///
/// Not thread-safe. `encode` allocates only while its message grows (the first diffs).
/// @tparam T float or double
template <class T>
class diff_encoder {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "crema: diffs are of float or double");

 public:
  /// @param count elements of every diff
  /// @param how   the compression
  /// @throws crema::config_error on a fraction outside (0, 1], a negative or non-finite
  ///         threshold, or a count past 2^32 - 1 for a sparse rule (indices travel as 32 bits)
  diff_encoder(std::size_t count, compression how);

  /// @brief What the constructor checks, without making an encoder.
  /// @throws crema::config_error as the constructor
  static void validate(std::size_t count, const compression& how);

  /// @brief Adds `diff` to what is owed, appends the message of what is sent to `message`, and
  /// keeps the rest owed.
  /// @return the number of coordinates sent
  /// @throws crema::length_error if `diff` does not have `count` elements
  std::size_t encode(std::span<const T> diff, std::vector<std::byte>& message);

  /// @return what is owed: added to the next diff (zero without error feedback)
  [[nodiscard]] std::span<const T> owed() const noexcept { return owed_; }
  /// @return the elements of every diff
  [[nodiscard]] std::size_t size() const noexcept { return owed_.size(); }
  /// @return the compression
  [[nodiscard]] const compression& how() const noexcept { return how_; }

 private:
  void select_top_k(std::size_t k);
  void select_at_least(T threshold);

  compression how_;
  std::vector<T> owed_;                // diff + what was owed, then what is still owed
  std::vector<std::uint32_t> chosen_;  // the coordinates sent, ascending
  std::vector<T> magnitudes_;          // top_k's working space
};

/// @brief Adds the diff in `message` (as `diff_encoder<T>` wrote it) to `into`.
/// @return the bytes of `message` it read
/// @throws crema::format_error on a message that is cut short, of another element count than
///         `into`, of an unknown format, or with an index out of range
template <class T>
std::size_t add_encoded_diff(std::span<const std::byte> message, std::span<T> into);

/// @return the bytes of the message of a diff of `count` elements sent densely (what `none`
///         sends)
template <class T>
[[nodiscard]] constexpr std::size_t dense_diff_bytes(std::size_t count) noexcept;

// --- definitions -------------------------------------------------------------------------------

namespace detail {

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

// The header of an encoded diff. Plain bytes, read and written with memcpy.
struct diff_header {
  std::uint32_t format = 0;       // dense or sparse
  std::uint32_t value_bytes = 0;  // sizeof(T), or 2 for half
  std::uint64_t count = 0;        // elements of the whole diff
  std::uint64_t sent = 0;         // coordinates in the message
};
inline constexpr std::uint32_t dense_format = 0x64656e73;   // "dens"
inline constexpr std::uint32_t sparse_format = 0x73707273;  // "sprs"

template <class T>
void append_bytes(std::vector<std::byte>& message, const T& value) {
  const std::size_t at = message.size();
  message.resize(at + sizeof(T));
  std::memcpy(message.data() + at, &value, sizeof(T));
}

}  // namespace detail

template <class T>
constexpr std::size_t dense_diff_bytes(std::size_t count) noexcept {
  return sizeof(detail::diff_header) + count * sizeof(T);
}

template <class T>
diff_encoder<T>::diff_encoder(std::size_t count, compression how) : how_(how) {
  validate(count, how_);
  owed_.resize(count);
}

template <class T>
void diff_encoder<T>::validate(std::size_t count, const compression& how) {
  if (how.rule == sparsify::top_k && !(how.fraction > 0.0 && how.fraction <= 1.0)) {
    detail::fail<config_error>("compression: top_k fraction must be in (0, 1], got {}",
                               how.fraction);
  }
  if (how.rule == sparsify::threshold && !(how.threshold >= 0.0 && std::isfinite(how.threshold))) {
    detail::fail<config_error>("compression: threshold must be finite and >= 0, got {}",
                               how.threshold);
  }
  if (how.rule != sparsify::none && count > std::numeric_limits<std::uint32_t>::max()) {
    detail::fail<config_error>(
        "compression: a sparse diff of {} elements is past the 2^32 - 1 its indices can name",
        count);
  }
}

template <class T>
std::size_t diff_encoder<T>::encode(std::span<const T> diff, std::vector<std::byte>& message) {
  const std::size_t count = owed_.size();
  if (diff.size() != count) {
    detail::fail<length_error>("diff_encoder: a diff of {} elements, expected {}", diff.size(),
                               count);
  }
  if (how_.error_feedback) {
    for (std::size_t i = 0; i < count; ++i) owed_[i] += diff[i];
  } else {
    std::copy(diff.begin(), diff.end(), owed_.begin());
  }
  chosen_.clear();
  bool dense = true;
  if (how_.rule == sparsify::top_k) {
    select_top_k(std::max<std::size_t>(
        1, static_cast<std::size_t>(std::ceil(how_.fraction * static_cast<double>(count)))));
    dense = false;
  } else if (how_.rule == sparsify::threshold) {
    select_at_least(static_cast<T>(how_.threshold));
    dense = false;
  }
  const std::uint32_t value_bytes = how_.fp16 ? 2u : static_cast<std::uint32_t>(sizeof(T));
  // A sparse message that would be larger than the dense one is sent dense.
  if (!dense && chosen_.size() * (sizeof(std::uint32_t) + value_bytes) >= count * value_bytes) {
    dense = true;
  }
  const std::size_t sent = dense ? count : chosen_.size();
  detail::append_bytes(message,
                       detail::diff_header{dense ? detail::dense_format : detail::sparse_format,
                                           value_bytes, count, sent});
  const std::size_t at = message.size();
  message.resize(at + (dense ? 0 : sent * sizeof(std::uint32_t)) + sent * value_bytes);
  std::byte* out = message.data() + at;
  if (!dense && sent > 0) {
    std::memcpy(out, chosen_.data(), sent * sizeof(std::uint32_t));
    out += sent * sizeof(std::uint32_t);
  }
  // Sends coordinate i; what does not arrive of it stays owed.
  const auto send = [&](std::size_t n, std::size_t i) {
    const T value = owed_[i];
    if (how_.fp16) {
      constexpr T largest = T(65504);
      const std::uint16_t half = detail::to_half(
          static_cast<float>(std::isnan(value) ? value : std::clamp(value, -largest, largest)));
      std::memcpy(out + n * 2, &half, 2);
      owed_[i] = value - static_cast<T>(detail::from_half(half));
    } else {
      std::memcpy(out + n * sizeof(T), &value, sizeof(T));
      owed_[i] = T(0);
    }
  };
  if (dense) {
    for (std::size_t i = 0; i < count; ++i) send(i, i);
  } else {
    for (std::size_t n = 0; n < sent; ++n) send(n, chosen_[n]);
  }
  if (!how_.error_feedback) std::fill(owed_.begin(), owed_.end(), T(0));
  return sent;
}

// The exact k largest magnitudes (ties broken by lower index), ascending by index. A strided
// sample of the magnitudes first guesses a bound that a few times k coordinates pass; the k are
// chosen among those, so that one pass over the diff does most of the work. Where the guess
// lets fewer than k through, all magnitudes are ranked.
template <class T>
void diff_encoder<T>::select_top_k(std::size_t k) {
  const std::size_t count = owed_.size();
  k = std::min(k, count);
  T bound = T(0);
  constexpr std::size_t samples = 1 << 14;
  if (count > 8 * samples && k * 4 < count) {
    magnitudes_.resize(samples);
    const std::size_t stride = count / samples;
    for (std::size_t s = 0; s < samples; ++s) magnitudes_[s] = std::abs(owed_[s * stride]);
    // Aim at 4k candidates (and at least 64 of the sample) to be past the guess.
    const double share = std::min(1.0, 4.0 * static_cast<double>(k) / static_cast<double>(count));
    const auto rank =
        std::max<std::size_t>(64, static_cast<std::size_t>(share * static_cast<double>(samples)));
    if (rank < samples) {
      std::nth_element(magnitudes_.begin(), magnitudes_.begin() + static_cast<std::ptrdiff_t>(rank),
                       magnitudes_.end(), std::greater<T>());
      bound = magnitudes_[rank];
    }
  }
  const auto rank_candidates = [&](T at_least) {
    chosen_.clear();
    for (std::size_t i = 0; i < count; ++i) {
      if (std::abs(owed_[i]) >= at_least) chosen_.push_back(static_cast<std::uint32_t>(i));
    }
  };
  rank_candidates(bound);
  if (chosen_.size() < k) rank_candidates(T(0));  // the guess was too high: rank everything
  if (chosen_.size() > k) {
    const auto larger = [&](std::uint32_t a, std::uint32_t b) {
      const T magnitude_a = std::abs(owed_[a]);
      const T magnitude_b = std::abs(owed_[b]);
      return magnitude_a > magnitude_b || (magnitude_a == magnitude_b && a < b);
    };
    std::nth_element(chosen_.begin(), chosen_.begin() + static_cast<std::ptrdiff_t>(k),
                     chosen_.end(), larger);
    chosen_.resize(k);
    std::sort(chosen_.begin(), chosen_.end());
  }
  // Nothing owed at a coordinate: nothing to send for it.
  std::erase_if(chosen_, [&](std::uint32_t i) { return owed_[i] == T(0); });
}

template <class T>
void diff_encoder<T>::select_at_least(T threshold) {
  for (std::size_t i = 0; i < owed_.size(); ++i) {
    if (owed_[i] != T(0) && std::abs(owed_[i]) >= threshold) {
      chosen_.push_back(static_cast<std::uint32_t>(i));
    }
  }
}

template <class T>
std::size_t add_encoded_diff(std::span<const std::byte> message, std::span<T> into) {
  detail::diff_header header;
  if (message.size() < sizeof header) {
    detail::fail<format_error>("diff: a message of {} bytes is shorter than its {}-byte header",
                               message.size(), sizeof header);
  }
  std::memcpy(&header, message.data(), sizeof header);
  if (header.format != detail::dense_format && header.format != detail::sparse_format) {
    detail::fail<format_error>("diff: unknown format {:#x}", header.format);
  }
  if (header.value_bytes != 2 && header.value_bytes != sizeof(T)) {
    detail::fail<format_error>("diff: values of {} bytes, expected 2 or {}", header.value_bytes,
                               sizeof(T));
  }
  if (header.count != into.size()) {
    detail::fail<format_error>("diff: of {} elements, expected {}", header.count, into.size());
  }
  const bool dense = header.format == detail::dense_format;
  if ((dense && header.sent != header.count) || header.sent > header.count) {
    detail::fail<format_error>("diff: {} coordinates sent of {}", header.sent, header.count);
  }
  const std::size_t index_bytes = dense ? 0 : header.sent * sizeof(std::uint32_t);
  const std::size_t length = sizeof header + index_bytes + header.sent * header.value_bytes;
  if (message.size() < length) {
    detail::fail<format_error>("diff: a message of {} bytes, its header says {}", message.size(),
                               length);
  }
  const std::byte* indices = message.data() + sizeof header;
  const std::byte* values = indices + index_bytes;
  const auto value_at = [&](std::size_t n) {
    if (header.value_bytes == 2) {
      std::uint16_t half = 0;
      std::memcpy(&half, values + n * 2, 2);
      return static_cast<T>(detail::from_half(half));
    }
    T value{};
    std::memcpy(&value, values + n * sizeof(T), sizeof(T));
    return value;
  };
  if (dense) {
    for (std::size_t i = 0; i < into.size(); ++i) into[i] += value_at(i);
    return length;
  }
  const auto index_at = [&](std::size_t n) {
    std::uint32_t index = 0;
    std::memcpy(&index, indices + n * sizeof index, sizeof index);
    return index;
  };
  // Checked before any is added: a bad message leaves `into` as it was.
  for (std::size_t n = 0; n < header.sent; ++n) {
    if (index_at(n) >= into.size()) {
      detail::fail<format_error>("diff: coordinate {} of a diff of {} elements", index_at(n),
                                 into.size());
    }
  }
  for (std::size_t n = 0; n < header.sent; ++n) into[index_at(n)] += value_at(n);
  return length;
}

}  // namespace crema
