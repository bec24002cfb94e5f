#pragma once

#include <crema/core/batch_label.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/pipeline/detail/record_guard.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

namespace crema {

/// @brief A batch that stays on the host: data `[N, C, H, W]` and labels `[N]` in two vectors,
/// filled as a `device_batch` is (`record(i)`, `set_label(i, label)`), for training on the CPU
/// and for measuring a data layer without a device.
///
/// One thread at a time (the producer while filling, then the consumer holding the lease).
/// Allocates only when made.
/// @tparam T     the element type of the data
/// @tparam Label the element type of the labels: by default `batch_label_t<T>` (T, or float for
///               `std::uint8_t` pixels, whose labels past 255 stay exact); `std::int64_t` for
///               what PyTorch's losses take as class indices
template <class T, class Label = batch_label_t<T>>
class host_batch {
 public:
  using value_type = T;
  using label_type = Label;

  /// @throws crema::length_error if batch_size x shape overflows
  host_batch(std::size_t batch_size, record_shape shape)
      : data(detail::batch_elements("host_batch", batch_size, shape)),
        labels(batch_size),
        shape_(shape) {}

  std::vector<T> data;             ///< [N, C, H, W]; records past `size()` are stale
  std::vector<label_type> labels;  ///< [N]

  /// @brief Record `i`'s elements, to fill.
  [[nodiscard]] std::span<T> record(std::size_t i) {
    check_index("record", i);
    const std::span<T> all(data);
    if constexpr (detail::misuse_checks) guard_.arm(all, (i + 1) * shape_.elements(), i);
    return all.subspan(i * shape_.elements(), shape_.elements());
  }
  /// @brief Sets record `i`'s label.
  void set_label(std::size_t i, label_type label) {
    check_index("set_label", i);
    labels[i] = label;
  }
  /// @brief Called by the producer once the transform of record `i` is done: in builds with
  /// misuse checks, refuses a transform that wrote into the next record (one that writes past
  /// the last is caught by AddressSanitizer).
  /// @throws crema::length_error naming the record if the element after it changed
  void after_record(std::size_t i) {
    if constexpr (detail::misuse_checks) guard_.check("host_batch", i, shape_.elements());
  }
  /// @brief The finishing step: the batch holds `info.size` records.
  void finish(const batch_info& info) noexcept { size_ = info.size; }

  /// @return records in this batch
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @return records it can hold
  [[nodiscard]] std::size_t capacity() const noexcept { return labels.size(); }
  /// @return one record's dimensions
  [[nodiscard]] record_shape shape() const noexcept { return shape_; }

 private:
  void check_index(const char* call, std::size_t i) const {
    detail::check_batch_index("host_batch", call, i, labels.size());
  }

  record_shape shape_;
  std::size_t size_ = 0;
  [[no_unique_address]] std::conditional_t<detail::misuse_checks, detail::record_guard<T>,
                                           std::monostate>
      guard_{};
};

/// @brief Makes `host_batch`es for a batch transform such as `caffe_batcher`.
template <class T = float, class Label = batch_label_t<T>>
struct make_host_batch {
  [[nodiscard]] host_batch<T, Label> operator()(const batch_context& where,
                                                record_shape shape) const {
    return host_batch<T, Label>(where.batch_size, shape);
  }
};

}  // namespace crema
