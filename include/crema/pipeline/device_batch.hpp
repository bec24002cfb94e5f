#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/error.hpp>
#include <crema/memory/device_span.hpp>
#include <crema/memory/emulated_device_resource.hpp>
#include <crema/memory/host_malloc_resource.hpp>
#include <crema/memory/resource.hpp>
#include <crema/memory/synced_buffer.hpp>
#include <crema/pipeline/record_shape.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <utility>

namespace crema {

/// @brief A batch a pipeline fills on the host and uploads to its consumer's device on the
/// producer's side: the seam between `pipeline/` and `memory/`.
///
/// Data `[N, C, H, W]` and labels `[N]` are `synced_buffer`s on `HostResource` (pinned memory for
/// CUDA) and `DeviceResource` (the consumer's device). A batch transform makes one per slot in
/// `make_batch` and fills record `i` through `record(i)` and `set_label(i, label)`. Its
/// finishing step (`finish`, called by the producer after the last record) starts both uploads
/// on `stream` and returns: the consumer receives a batch whose copies are in flight or done.
/// The consumer reads `data.device()` (which waits for the copy on the host) or, without
/// blocking the host, `data.device(consumer_stream)` (the consumer's stream waits for the copy).
/// Releasing the lease with `release_after(consumer_stream.record())` keeps the next upload into
/// this batch from starting before the consumer's device work on it is done.
///
/// One thread at a time (the producer while filling, then the consumer holding the lease; the
/// pipeline orders the two). `record`, `set_label` and `finish` allocate only on the first fill.
/// @tparam T the element type of data and labels (float, as Caffe's blobs)
template <class T, host_resource HostResource = host_malloc_resource,
          device_resource DeviceResource = emulated_device_resource>
class device_batch {
 public:
  using value_type = T;
  using buffer_type = synced_buffer<T, HostResource, DeviceResource>;
  using stream_type = typename DeviceResource::stream_type;
  using event_type = typename stream_type::event_type;

  /// @param batch_size records it holds at most
  /// @param shape      one record's dimensions
  /// @param stream     where the uploads go: a copy stream of the consumer's device, shared by
  ///                   that consumer's batches; must be non-null and outlive the batch's uploads
  /// @throws crema::length_error if batch_size x shape does not fit in a buffer
  /// @throws crema::config_error if `stream` is null
  device_batch(std::size_t batch_size, record_shape shape, std::shared_ptr<stream_type> stream,
               HostResource host = HostResource{}, DeviceResource device = DeviceResource{})
      : data(detail::batch_elements("device_batch", batch_size, shape), host, device),
        labels(batch_size, host, device),
        shape_(shape),
        capacity_(batch_size),
        stream_(std::move(stream)) {
    if (!stream_) detail::fail<config_error>("device_batch: the upload stream is null");
  }

  buffer_type data;    ///< [N, C, H, W], N = `capacity()`; records past `size()` are stale
  buffer_type labels;  ///< [N]

  /// @brief Record `i`'s elements on the host, to fill (for the transform).
  [[nodiscard]] std::span<T> record(std::size_t i) {
    check_index("record", i);
    return data.mutable_host().subspan(i * shape_.elements(), shape_.elements());
  }
  /// @brief Sets record `i`'s label on the host (for the transform).
  void set_label(std::size_t i, T label) {
    check_index("set_label", i);
    labels.mutable_host()[i] = label;
  }

  /// @brief The finishing step: the batch holds `info.size` records; starts the uploads of what
  /// the transform wrote on the stream (after the event of the last release, if one was given),
  /// and returns. Called by the producer.
  void finish(const batch_info& info) {
    size_ = info.size;
    if (retired_) {
      stream_->wait(*retired_);
      retired_.reset();
    }
    // A buffer the transform did not write is already on the device: nothing to copy.
    (void)data.device(*stream_);
    (void)labels.device(*stream_);
  }
  /// @brief The next upload into this batch waits for `event` (the consumer's last use of it).
  /// Called through `lease::release_after`.
  void retire_after(event_type event) { retired_.emplace(std::move(event)); }

  /// @return records in this batch (the last of a single pass may hold fewer than `capacity()`)
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @return records it can hold
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// @return one record's dimensions
  [[nodiscard]] record_shape shape() const noexcept { return shape_; }
  /// @return the stream the uploads go to
  [[nodiscard]] stream_type& stream() const noexcept { return *stream_; }

 private:
  void check_index(const char* call, std::size_t i) const {
    detail::check_batch_index("device_batch", call, i, capacity_);
  }

  record_shape shape_;
  std::size_t capacity_;
  std::size_t size_ = 0;
  std::shared_ptr<stream_type> stream_;
  std::optional<event_type> retired_;
};

}  // namespace crema
