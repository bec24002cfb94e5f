#pragma once

#include <crema/collective/detail/elementwise.hpp>
#include <crema/collective/ps/detail/half_precision.hpp>
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
#include <utility>
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
  void add_and_collect(const T* add, T bound);
  void select_top_k(std::span<const T> diff, std::size_t k);

  compression how_;
  std::vector<T> owed_;                // diff + what was owed, then what is still owed
  std::vector<std::uint32_t> chosen_;  // the coordinates sent, ascending
  std::vector<T> magnitudes_;          // top_k's working space
  std::vector<std::uint32_t> block_;   // the coordinates of one block, passed or not
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

// into[i] += values[i], the values at any alignment, a block at a time through the stack.
template <class T>
void add_values(const std::byte* values, T* into, std::size_t count) {
  constexpr std::size_t block = 512;
  T aligned[block];
  for (std::size_t i = 0; i < count; i += block) {
    const std::size_t n = std::min(block, count - i);
    std::memcpy(aligned, values + i * sizeof(T), n * sizeof(T));
    add_into(into + i, aligned, n);
  }
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
  const bool everything = how_.rule == sparsify::none && !how_.fp16;
  if (everything) {  // nothing is ever owed: the diff is the message
    detail::append_bytes(
        message, detail::diff_header{detail::dense_format, static_cast<std::uint32_t>(sizeof(T)),
                                     count, count});
    const std::size_t at = message.size();
    message.resize(at + count * sizeof(T));
    if (count > 0) std::memcpy(message.data() + at, diff.data(), count * sizeof(T));
    return count;
  }
  if (!how_.error_feedback) std::fill(owed_.begin(), owed_.end(), T(0));
  chosen_.clear();
  bool dense = true;
  if (how_.rule == sparsify::top_k) {
    select_top_k(diff, std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(
                                                    how_.fraction * static_cast<double>(count)))));
    dense = false;
  } else if (how_.rule == sparsify::threshold) {
    add_and_collect(diff.data(), static_cast<T>(how_.threshold));
    std::erase_if(chosen_, [&](std::uint32_t i) { return owed_[i] == T(0); });
    dense = false;
  } else {
    detail::add_into(owed_.data(), diff.data(), count);
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
  // What does not arrive of a coordinate sent stays owed.
  if (dense && how_.fp16) {
    detail::send_halves(owed_.data(), out, count);
  } else if (dense) {
    std::memcpy(out, owed_.data(), count * sizeof(T));
    std::fill(owed_.begin(), owed_.end(), T(0));
  } else if (how_.fp16) {
    for (std::size_t n = 0; n < sent; ++n) {
      detail::send_halves_one_by_one(&owed_[chosen_[n]], out + 2 * n, 1);
    }
  } else {
    for (std::size_t n = 0; n < sent; ++n) {
      std::memcpy(out + n * sizeof(T), &owed_[chosen_[n]], sizeof(T));
      owed_[chosen_[n]] = T(0);
    }
  }
  if (!how_.error_feedback) std::fill(owed_.begin(), owed_.end(), T(0));
  return sent;
}

// owed += add (where `add` is given), collecting in `chosen_` the coordinates whose magnitude
// reaches `bound`, ascending. The coordinates are written whether they pass or not and kept by
// advancing past them, a block at a time: no branch to mispredict on the magnitudes.
template <class T>
void diff_encoder<T>::add_and_collect(const T* add, T bound) {
  constexpr std::size_t block = 4096;
  block_.resize(block);
  const std::size_t count = owed_.size();
  for (std::size_t begin = 0; begin < count; begin += block) {
    const std::size_t end = std::min(count, begin + block);
    std::size_t passed = 0;
    for (std::size_t i = begin; i < end; ++i) {
      const T value = add ? owed_[i] + add[i] : owed_[i];
      owed_[i] = value;
      block_[passed] = static_cast<std::uint32_t>(i);
      passed += std::abs(value) >= bound ? 1 : 0;
    }
    chosen_.insert(chosen_.end(), block_.begin(),
                   block_.begin() + static_cast<std::ptrdiff_t>(passed));
  }
}

// The exact k largest magnitudes (ties broken by the lower index), ascending by index. Runs of
// the owed values spread over the diff first guess a bound that about 2k coordinates pass; the
// pass that adds the diff collects those, and the k are chosen among them. Where the guess lets
// fewer than k through, every coordinate is ranked.
template <class T>
void diff_encoder<T>::select_top_k(std::span<const T> diff, std::size_t k) {
  const std::size_t count = owed_.size();
  k = std::min(k, count);
  T bound = T(0);
  constexpr std::size_t runs = 128;
  constexpr std::size_t run = 128;
  if (count >= 64 * runs * run && k * 4 < count) {
    magnitudes_.resize(runs * run);
    for (std::size_t r = 0; r < runs; ++r) {
      const std::size_t at = r * (count / runs);
      for (std::size_t j = 0; j < run; ++j) {
        magnitudes_[r * run + j] = std::abs(owed_[at + j] + diff[at + j]);
      }
    }
    const double share = 2.0 * static_cast<double>(k) / static_cast<double>(count);
    const auto rank = std::max<std::size_t>(
        64, static_cast<std::size_t>(share * static_cast<double>(magnitudes_.size())));
    if (rank < magnitudes_.size()) {
      std::nth_element(magnitudes_.begin(), magnitudes_.begin() + static_cast<std::ptrdiff_t>(rank),
                       magnitudes_.end(), std::greater<T>());
      bound = magnitudes_[rank];
    }
  }
  add_and_collect(diff.data(), bound);
  if (chosen_.size() < k) {  // the guess was too high: rank everything
    chosen_.clear();
    add_and_collect(nullptr, T(0));
  }
  if (chosen_.size() > k) {
    // The k-th largest magnitude among the candidates; then those above it, and as many equal to
    // it as fit, lowest index first. `chosen_` stays ascending.
    magnitudes_.resize(chosen_.size());
    for (std::size_t c = 0; c < chosen_.size(); ++c) magnitudes_[c] = std::abs(owed_[chosen_[c]]);
    std::nth_element(magnitudes_.begin(), magnitudes_.begin() + static_cast<std::ptrdiff_t>(k - 1),
                     magnitudes_.end(), std::greater<T>());
    const T kth = magnitudes_[k - 1];
    const auto above = static_cast<std::size_t>(std::count_if(
        chosen_.begin(), chosen_.end(), [&](std::uint32_t i) { return std::abs(owed_[i]) > kth; }));
    std::size_t ties = k - above;
    std::erase_if(chosen_, [&](std::uint32_t i) {
      const T magnitude = std::abs(owed_[i]);
      if (magnitude > kth) return false;
      if (magnitude == kth && ties > 0) {
        --ties;
        return false;
      }
      return true;
    });
  }
  // Nothing owed at a coordinate: nothing to send for it.
  std::erase_if(chosen_, [&](std::uint32_t i) { return owed_[i] == T(0); });
}

namespace detail {

// Checks the header of an encoded diff of `count` elements of T: its format, value size, count
// and coordinates, and that `message` holds what it says; returns the header and the bytes the
// diff takes.
template <class T>
std::pair<diff_header, std::size_t> read_diff_header(std::span<const std::byte> message,
                                                     std::size_t count) {
  diff_header header;
  if (message.size() < sizeof header) {
    fail<format_error>("diff: a message of {} bytes is shorter than its {}-byte header",
                       message.size(), sizeof header);
  }
  std::memcpy(&header, message.data(), sizeof header);
  if (header.format != dense_format && header.format != sparse_format) {
    fail<format_error>("diff: unknown format {:#x}", header.format);
  }
  if (header.value_bytes != 2 && header.value_bytes != sizeof(T)) {
    fail<format_error>("diff: values of {} bytes, expected 2 or {}", header.value_bytes, sizeof(T));
  }
  if (header.count != count) {
    fail<format_error>("diff: of {} elements, expected {}", header.count, count);
  }
  const bool dense = header.format == dense_format;
  if ((dense && header.sent != header.count) || header.sent > header.count) {
    fail<format_error>("diff: {} coordinates sent of {}", header.sent, header.count);
  }
  const std::size_t index_bytes = dense ? 0 : header.sent * sizeof(std::uint32_t);
  const std::size_t length = sizeof header + index_bytes + header.sent * header.value_bytes;
  if (message.size() < length) {
    fail<format_error>("diff: a message of {} bytes, its header says {}", message.size(), length);
  }
  return {header, length};
}

}  // namespace detail

/// @return the bytes the encoded diff at the start of `message` takes, its header checked as
///         `add_encoded_diff` checks it (nothing is added)
/// @throws crema::format_error as `add_encoded_diff`
template <class T>
std::size_t encoded_diff_bytes(std::span<const std::byte> message, std::size_t count) {
  return detail::read_diff_header<T>(message, count).second;
}

template <class T>
std::size_t add_encoded_diff(std::span<const std::byte> message, std::span<T> into) {
  const auto checked = detail::read_diff_header<T>(message, into.size());
  const detail::diff_header& header = checked.first;  // named, so that lambdas can capture it
  const std::size_t length = checked.second;
  const bool dense = header.format == detail::dense_format;
  const std::size_t index_bytes = dense ? 0 : header.sent * sizeof(std::uint32_t);
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
  if (dense && header.value_bytes == 2) {
    detail::add_halves(values, into.data(), into.size());
    return length;
  }
  if (dense) {
    detail::add_values(values, into.data(), into.size());
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
