#pragma once

#include <crema/core/batch_label.hpp>
#include <crema/core/detail/checked.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/memory/device_span.hpp>
#include <crema/memory/emulated_device_resource.hpp>
#include <crema/memory/host_malloc_resource.hpp>
#include <crema/memory/resource.hpp>
#include <crema/memory/synced_buffer.hpp>
#include <crema/pipeline/batch_uploader.hpp>
#include <crema/pipeline/detail/record_guard.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace crema {

namespace detail {

/// Refuses a batch on `batch_device` read by a stream of `stream_device`: a consumer given
/// batches made on another device than its own, whose kernels would fault on them (or read them
/// across the link). `fix` says how each consumer's batches are put on its device.
/// @throws crema::config_error naming both devices and the fix
inline void check_stream_device(std::string_view batch_type, int batch_device, int stream_device,
                                std::string_view fix) {
  if (batch_device != stream_device) [[unlikely]] {
    fail<config_error>("{}: a batch of device {} read by a stream of device {}; {}", batch_type,
                       batch_device, stream_device, fix);
  }
}

}  // namespace detail

/// @brief What a consumer's device work reads of a `device_batch`: its `size()` records and
/// their labels, in device memory. Trivially copyable; hand the pointers to a kernel.
template <class T, class Label = batch_label_t<T>>
struct device_batch_view {
  device_span<const T> data;        ///< [size, C, H, W]
  device_span<const Label> labels;  ///< [size]
};

/// @brief A batch a pipeline fills on the host and uploads to its consumer's device on the
/// producer's side: the seam between `pipeline/` and `memory/`.
///
/// Labels `[N]` and data `[N, C, H, W]` share one `synced_buffer` (one `HostResource` block,
/// pinned memory for CUDA, and one `DeviceResource` block on the consumer's device): the labels
/// first, the data after them at the next 256 bytes, so that the data is as aligned as the
/// block. Labels are `label_type`: by default T, or float where T is narrower (`std::uint8_t`
/// pixels, whose mean and scale a kernel applies on the device, upload a quarter of float's
/// bytes); the block must then be aligned to the label, as every resource of crema's is. A batch
/// transform makes one per slot in `make_batch` and fills record `i` through `record(i)` and
/// `set_label(i, label)`. Its finishing step (`finish`, called by the producer after the last
/// record) starts one copy of the block on the batch's upload stream (its own, or one its
/// consumer's batches share), records one event after it and returns: the consumer receives a batch
/// whose copy is in flight or done. Made with a `batch_uploader`, the batch hands that step to the
/// uploader's thread instead, and whoever touches the batch next first waits until the uploader has
/// started the copy. The consumer reads `device()` (the host waits for the copy) or, without
/// blocking the host, `device(consumer_stream)` (the consumer's stream waits for the copy's event:
/// one wait for data and labels). Releasing the lease with
/// `release_after(consumer_stream.record())` keeps the next upload into this batch from starting
/// before the consumer's device work on it is done.
///
/// One thread at a time (the producer while filling, then the consumer holding the lease; the
/// pipeline orders the two). `record`, `set_label` and `finish` allocate only on the first fill.
/// @tparam T     the element type of the data (float, as Caffe's blobs, or `std::uint8_t` pixels)
/// @tparam Label the element type of the labels: `batch_label_t<T>` by default; `std::int64_t`
///               for what PyTorch's losses take as class indices. A whole number of T.
template <class T, host_resource HostResource = host_malloc_resource,
          device_resource DeviceResource = emulated_device_resource, class Label = batch_label_t<T>>
class device_batch {
 public:
  using value_type = T;
  using label_type = Label;
  using buffer_type = synced_buffer<T, HostResource, DeviceResource>;
  using stream_type = typename DeviceResource::stream_type;
  using event_type = typename stream_type::event_type;
  using view_type = device_batch_view<T, label_type>;

  /// @brief A batch that uploads on a stream of its own, made on `device`'s device: the producer
  /// that fills it shares no stream, and no lock of one, with the other producers (the
  /// recommended form; a stream per slot is cheap, slots are few).
  /// @param batch_size records it holds at most
  /// @param shape      one record's dimensions
  /// @throws crema::length_error if batch_size x shape (and the labels) do not fit in a buffer
  /// @throws whatever making the stream throws (crema::cuda_error without a device)
  explicit device_batch(std::size_t batch_size, record_shape shape,
                        HostResource host = HostResource{},
                        DeviceResource device = DeviceResource{})
      : device_batch(batch_size, shape, stream_on(device), std::move(host), std::move(device)) {}

  /// @brief A batch that uploads on `stream`.
  /// @param stream where the uploads go: a copy stream of the consumer's device (shared by that
  ///               consumer's batches, its producers then take turns on it); must be non-null
  ///               and outlive the batch's uploads
  /// @throws crema::length_error if batch_size x shape (and the labels) do not fit in a buffer
  /// @throws crema::config_error if `stream` is null
  device_batch(std::size_t batch_size, record_shape shape, std::shared_ptr<stream_type> stream,
               HostResource host = HostResource{}, DeviceResource device = DeviceResource{})
      : shape_(shape),
        capacity_(batch_size),
        data_offset_(labels_stride(batch_size)),
        block_(block_elements(batch_size, shape, data_offset_), std::move(host), std::move(device)),
        stream_(std::move(stream)) {
    if (!stream_) detail::fail<config_error>("device_batch: the upload stream is null");
  }

  /// @brief A batch whose uploads `uploader`'s thread starts, on its stream: the producer that
  /// fills it makes no runtime call to finish it.
  /// @param uploader the thread and stream of the consumer's device (shared by that consumer's
  ///                 batches); must be non-null
  /// @throws crema::length_error if batch_size x shape (and the labels) do not fit in a buffer
  /// @throws crema::config_error if `uploader` is null
  device_batch(std::size_t batch_size, record_shape shape,
               std::shared_ptr<batch_uploader<stream_type>> uploader,
               HostResource host = HostResource{}, DeviceResource device = DeviceResource{})
      : upload_(std::move(uploader)),
        shape_(shape),
        capacity_(batch_size),
        data_offset_(labels_stride(batch_size)),
        block_(block_elements(batch_size, shape, data_offset_), std::move(host), std::move(device)),
        stream_(upload_.stream()) {
    if (!stream_) detail::fail<config_error>("device_batch: the uploader is null");
  }

  /// @brief Moves a batch; waits first for an upload the uploader has not started.
  device_batch(device_batch&&) noexcept = default;
  /// @brief As the move constructor, for both batches.
  device_batch& operator=(device_batch&&) noexcept = default;
  /// @brief Waits for an upload the uploader has not started, then frees the batch.
  ~device_batch() { upload_.settle_quietly(); }

  /// @brief Record `i`'s elements on the host, to fill (for the transform).
  [[nodiscard]] std::span<T> record(std::size_t i) {
    check_index("record", i);
    upload_.settle();
    const std::span<T> all = block_.mutable_host();
    const std::size_t begin = data_offset_ + i * shape_.elements();
    if constexpr (detail::misuse_checks) guard_.arm(all, begin + shape_.elements(), i);
    return all.subspan(begin, shape_.elements());
  }
  /// @brief Sets record `i`'s label on the host (for the transform).
  /// @throws crema::state_error if the host block is not aligned to `label_type` (a resource that
  ///         ignores the alignment asked of it)
  void set_label(std::size_t i, label_type label) {
    check_index("set_label", i);
    upload_.settle();
    std::byte* const labels = label_bytes(block_.mutable_host().data());
    std::memcpy(labels + i * sizeof(label_type), &label, sizeof(label_type));
  }

  /// @brief Called by the producer once the transform of record `i` is done: in builds with
  /// misuse checks (`detail::misuse_checks`), refuses a transform that wrote past the record.
  /// @throws crema::length_error naming the record if the element after it changed
  void after_record(std::size_t i) {
    if constexpr (detail::misuse_checks) guard_.check("device_batch", i, shape_.elements());
  }

  /// @brief The finishing step: the batch holds `info.size` records; makes the stream wait for
  /// the event of the last release, if one was given, then starts one copy of what the transform
  /// wrote and records one event after it, and returns. Called by the producer.
  void finish(const batch_info& info) {
    upload_.settle();
    size_ = info.size;
    if (upload_.by_uploader()) {
      upload_.submit(*this, info);
    } else {
      start_upload(*stream_);
    }
  }
  /// @brief The next upload into this batch waits for `event` (the consumer's last use of it).
  /// Called through `lease::release_after`.
  void retire_after(event_type event) {
    upload_.settle();
    retired_ = std::move(event);
    retired_pending_ = true;
  }

  /// @brief The batch on the device for work queued on `stream`, without blocking the host:
  /// `stream` waits for the upload's event if the copy is still in flight (one wait for data
  /// and labels). For the consumer.
  /// @throws crema::allocation_error if the device side cannot be allocated (a batch that was
  ///         never filled)
  /// @throws crema::pipeline_error "device_batch: uploading batch N of consumer C failed on the
  ///         uploader's thread", the cause (a crema::cuda_error) nested, where a `batch_uploader`
  ///         could not start this batch's upload
  /// @throws crema::config_error naming both devices if `stream` is another device's than the
  ///         batch (a consumer whose batches were not made on its device): its kernels would
  ///         fault, or read across the link
  [[nodiscard]] view_type device(stream_type& stream) const {
    if constexpr (requires { stream.device_id(); }) {
      detail::check_stream_device(
          "device_batch", block_.device_id(), stream.device_id(),
          "make each consumer's batches on its device (batch_context::consumer)");
    }
    upload_.settle();
    return view_of(block_.device(stream));
  }
  /// @brief The batch on the device, once the upload has finished: the host waits for it.
  /// @throws as `device(stream)`, but for the check of devices (there is no stream)
  [[nodiscard]] view_type device() const {
    upload_.settle();
    return view_of(block_.device());
  }
  /// @brief The records and labels as written on the host, for reading back (tests, a CPU
  /// fallback); waits for a copy in flight.
  [[nodiscard]] std::span<const T> host_data() const {
    upload_.settle();
    return block_.host().subspan(data_offset_, size_ * shape_.elements());
  }
  /// @brief The labels as written on the host; as `host_data`.
  [[nodiscard]] std::span<const label_type> host_labels() const {
    upload_.settle();
    return {reinterpret_cast<const label_type*>(label_bytes(block_.host().data())), size_};
  }

  /// @return records in this batch (the last of a single pass may hold fewer than `capacity()`)
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @return records it can hold
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// @return one record's dimensions
  [[nodiscard]] record_shape shape() const noexcept { return shape_; }
  /// @return the stream the uploads go to
  [[nodiscard]] stream_type& stream() const noexcept { return *stream_; }
  /// @return the device the batch is uploaded to
  [[nodiscard]] int device_id() const { return block_.device_id(); }
  /// @return the block data and labels share (labels at 0, as `label_type`, data at
  ///         `data_offset()`), for engines that manage the copies themselves
  [[nodiscard]] const buffer_type& buffer() const {
    upload_.settle();
    return block_;
  }
  /// @return where the data starts in `buffer()`, in elements
  [[nodiscard]] std::size_t data_offset() const noexcept { return data_offset_; }

 private:
  // Who starts the uploads: the producer in `finish` (no uploader), or an uploader's thread, with
  // the job that stands for this batch there. Declared first among the members, so that a move
  // waits for the source's upload before anything of the batch moves.
  class upload_slot {
   public:
    upload_slot() = default;
    explicit upload_slot(std::shared_ptr<batch_uploader<stream_type>> uploader)
        : uploader_(std::move(uploader)),
          job_(uploader_ ? std::make_unique<upload_job>() : nullptr) {}
    upload_slot(upload_slot&& other) noexcept {
      other.settle_quietly();
      uploader_ = std::move(other.uploader_);
      job_ = std::move(other.job_);
    }
    upload_slot& operator=(upload_slot&& other) noexcept {
      settle_quietly();
      other.settle_quietly();
      uploader_ = std::move(other.uploader_);
      job_ = std::move(other.job_);
      return *this;
    }
    ~upload_slot() = default;

    [[nodiscard]] bool by_uploader() const noexcept { return job_ != nullptr; }
    // The uploader's stream, kept alive through the uploader; null without one.
    [[nodiscard]] std::shared_ptr<stream_type> stream() const noexcept {
      if (!uploader_) return nullptr;
      return {uploader_, &uploader_->stream()};
    }
    void submit(device_batch& batch, const batch_info& info) noexcept {
      job_->batch = &batch;
      job_->sequence = info.sequence;
      job_->consumer = info.consumer;
      uploader_->submit(*job_);
    }
    // Returns once the batch's upload has been started; rethrows what starting it threw.
    void settle() const {
      if (job_) uploader_->settle(*job_);
    }
    void settle_quietly() const noexcept {
      if (job_) uploader_->settle_quietly(*job_);
    }

   private:
    struct upload_job final : batch_uploader<stream_type>::job {
      device_batch* batch = nullptr;  // set at each submit: the batch may have moved since
      std::uint64_t sequence = 0;     // the batch's number among its consumer's, for errors
      std::size_t consumer = 0;
      void run(stream_type& stream) override {
        try {
          batch->start_upload(stream);
        } catch (...) {
          // Named as a producer's failed finishing step is, the cause nested: the consumer
          // meets it in `device()`.
          std::throw_with_nested(pipeline_error(
              crema::detail::format("device_batch: uploading batch {} of consumer {} failed on the "
                                    "uploader's thread",
                                    sequence, consumer)));
        }
      }
    };

    std::shared_ptr<batch_uploader<stream_type>> uploader_;
    std::unique_ptr<upload_job> job_;  // its own block: a batch moves, a queued job must not
  };

  // Makes `stream` wait for the consumer's last release, if one was given, then starts one copy
  // of what the transform wrote and records one event after it.
  void start_upload(stream_type& stream) {
    if (retired_pending_) {
      // The event stays until the consumer's next `retire_after` replaces it: it goes back to the
      // consumer's stream on the consumer's thread, not on this producer's (or the uploader's),
      // where it would meet the other producers at that stream's event pool.
      stream.wait(retired_);
      retired_pending_ = false;
    }
    // A block the transform did not write is already on the device: nothing to copy.
    (void)block_.device(stream);
  }

  // The labels' share of the block, in elements: `batch_size` labels rounded up to 256 bytes,
  // where 256 is a multiple of the element size, so that the data starts as aligned as the block
  // (cudaMalloc aligns to 256).
  static std::size_t labels_stride(std::size_t batch_size) {
    static_assert(sizeof(label_type) % sizeof(T) == 0, "crema: labels are whole elements");
    constexpr std::size_t per_label = sizeof(label_type) / sizeof(T);
    constexpr std::size_t step = 256 % sizeof(T) == 0 ? 256 / sizeof(T) : per_label;
    const auto elements = detail::checked_mul(batch_size, per_label);
    const auto rounded = elements ? detail::checked_add(*elements, step - 1) : std::nullopt;
    if (!rounded) {
      detail::fail<length_error>("device_batch: {} labels overflow", batch_size);
    }
    return *rounded / step * step;
  }
  // The labels' bytes at the start of the block, which must be aligned to them.
  template <class Byte>
  static auto* label_bytes(Byte* block) {
    if (reinterpret_cast<std::uintptr_t>(block) % alignof(label_type) != 0) {
      detail::fail<state_error>(
          "device_batch: the host block is not aligned to its {}-byte labels; its resource "
          "ignored the alignment asked of it",
          alignof(label_type));
    }
    if constexpr (std::is_const_v<Byte>) {
      return reinterpret_cast<const std::byte*>(block);
    } else {
      return reinterpret_cast<std::byte*>(block);
    }
  }
  static std::shared_ptr<stream_type> stream_on(const DeviceResource& device) {
    if constexpr (std::is_constructible_v<stream_type, int>) {
      return std::make_shared<stream_type>(device.device_id());
    } else {
      return std::make_shared<stream_type>();
    }
  }
  // Labels, data, and with misuse checks one spare element after the last record, where a
  // transform that writes past it is caught.
  static std::size_t block_elements(std::size_t batch_size, record_shape shape,
                                    std::size_t data_offset) {
    const auto all = detail::checked_add(detail::batch_elements("device_batch", batch_size, shape),
                                         data_offset + (detail::misuse_checks ? 1 : 0));
    if (!all) {
      detail::fail<length_error>("device_batch: {} records of {} x {} x {} elements overflow",
                                 batch_size, shape.channels, shape.height, shape.width);
    }
    return *all;
  }
  [[nodiscard]] view_type view_of(device_span<const T> block) const {
    return {
        block.subspan(data_offset_, size_ * shape_.elements()),
        device_span<const label_type>(reinterpret_cast<const label_type*>(block.data()), size_)};
  }
  void check_index(const char* call, std::size_t i) const {
    detail::check_batch_index("device_batch", call, i, capacity_);
  }

  upload_slot upload_;  // first: see upload_slot
  record_shape shape_;
  std::size_t capacity_;
  std::size_t data_offset_;
  buffer_type block_;  // labels, then data
  std::size_t size_ = 0;
  std::shared_ptr<stream_type> stream_;
  [[no_unique_address]] std::conditional_t<detail::misuse_checks, detail::record_guard<T>,
                                           std::monostate>
      guard_{};
  event_type retired_{};          // the consumer's last use, from `retire_after`
  bool retired_pending_ = false;  // `retired_` not waited for yet
};

}  // namespace crema
