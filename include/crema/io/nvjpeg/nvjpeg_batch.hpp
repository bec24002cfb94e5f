#pragma once

#include <crema/core/batch_label.hpp>
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.hpp>
#include <crema/io/nvjpeg/nvjpeg_decoder_pool.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/memory/device_span.hpp>
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

/// @file
/// One slot's batch of an `nvjpeg_batcher`: the encoded images its producer stages, decoded on
/// the GPU in the batch's finishing step. Component `crema::nvjpeg`.

namespace crema::cuda {

template <class T, class Decoder, class Label>
class basic_nvjpeg_batcher;

/// @brief One slot's batch: the encoded images on the host, the samples and labels on the
/// device. Filled by one producer, then read by the consumer holding its lease.
/// @tparam Label the labels' type: `batch_label_t<T>` by default (float for 8-bit samples, so
///               that labels past 255 stay exact); `std::int64_t` for PyTorch's class indices
template <class T, class Decoder, class Label = batch_label_t<T>>
class nvjpeg_batch {
 public:
  using value_type = T;
  using label_type = Label;
  using view_type = device_batch_view<T, label_type>;
  using event_type = cuda_event;

  using decoder_pool = nvjpeg_decoder_pool<Decoder>;

  nvjpeg_batch(std::size_t capacity, record_shape shape, int device,
               std::shared_ptr<decoder_pool> decoders, std::size_t most_on_host = 0)
      : shape_(shape),
        capacity_(capacity),
        most_on_host_(std::min(most_on_host, capacity)),
        labels_stride_((capacity * sizeof(label_type) + 255) / 256 * 256 / sizeof(T)),
        device_id_(device),
        // Host waits for its decoding (a refill's, device()'s) may last a whole batch's: asleep.
        stream_(std::make_shared<cuda_stream>(device, host_wait::sleep)),
        decoders_(std::move(decoders)),
        images_(capacity),
        offsets_(capacity + 1),
        keys_(capacity) {
    (void)::crema::detail::batch_elements("nvjpeg_batcher", capacity, shape);
    // Memory refused is an allocation_error naming the bytes, the side and the device.
    constexpr std::size_t aligned = cuda_device_resource::max_alignment;
    const std::size_t bytes = (labels_stride_ + capacity * shape.elements()) * sizeof(T);
    cuda_device_resource on_device(device);
    device_ = std::shared_ptr<void>(
        on_device.allocate(bytes, aligned),
        [on_device, bytes](void* p) mutable { on_device.deallocate(p, bytes, aligned); });
    const std::size_t label_bytes = capacity * sizeof(label_type);
    labels_ = std::shared_ptr<void>(
        host_pinned_resource{}.allocate(label_bytes, aligned),
        [label_bytes](void* p) { host_pinned_resource{}.deallocate(p, label_bytes, aligned); });
  }

  /// @brief The batch on the device for work queued on `stream`: `stream` waits for the
  /// decoding's event (the host does not). For the consumer.
  /// @throws crema::config_error naming both devices if `stream` is another device's than the
  ///         batch (`nvjpeg_batcher_options::devices` not set for a consumer on another)
  [[nodiscard]] view_type device(cuda_stream& stream) const {
    ::crema::detail::check_stream_device(
        "nvjpeg_batcher", device_id_, stream.device_id(),
        "give each consumer's device in nvjpeg_batcher_options::devices");
    stream.wait(ready_);
    return view();
  }
  /// @brief The batch on the device once its decoding has finished: the host waits.
  [[nodiscard]] view_type device() const {
    ready_.wait();
    return view();
  }
  /// @brief The next decoding into this batch waits for `event` (the consumer's last use of
  /// it). Called through `lease::release_after`.
  void retire_after(event_type event) {
    retired_ = std::move(event);
    retired_pending_ = true;
  }

  /// @brief The finishing step (the producer's): plans the decoding of the batch's
  /// `info.size` images, decodes those nvJPEG does not take on the CPU path and has those of
  /// its GPU-assisted decoder decoded, the host's part here (all on this thread, before a
  /// decoder is needed), then decodes the rest on the batch's stream into its device memory
  /// with a decoder of the batcher's for that device (the device made current meanwhile). While
  /// every one is lent, decodes the last images of the decoder's turn on the CPU path itself,
  /// up to the batcher's `max_host_share`, then waits for one (none needed where nothing is
  /// left for it); uploads those samples and the labels, records one event.
  /// @throws crema::format_error naming the image that does not decode
  void finish(const batch_info& info) {
    const scoped_device on(device_id_);
    size_ = info.size;
    if (retired_pending_) {
      stream_->wait(retired_);
      retired_pending_ = false;
    }
    for (std::size_t i = 0; i < size_; ++i) {
      images_[i].bytes =
          std::span<const std::byte>(bytes_).subspan(offsets_[i], offsets_[i + 1] - offsets_[i]);
      images_[i].key = keys_[i];
    }
    // The host's part, on this producer's thread, before a decoder is needed.
    using clock = std::chrono::steady_clock;
    const clock::time_point start = clock::now();
    if (!plan_) plan_.emplace(decoders_->planning(device_id_), decoders_->transform());
    const std::span<const encoded_image> images =
        std::span<const encoded_image>(images_).first(size_);
    plan_->make(images);
    // The GPU-assisted decoder's images (what the engine refuses; every JPEG without one) and
    // what nvJPEG does not take, decoded here too: not in the turn of a decoder other
    // producers wait for.
    plan_->decode_hybrid(images);
    decoders_->count_ahead(plan_->ahead().size());
    const std::span<const std::size_t> refused = plan_->on_host();
    if (!refused.empty()) {
      if (refused_samples_.size() < refused.size() * shape_.elements()) {
        refused_samples_.resize(refused.size() * shape_.elements());
      }
      plan_->decode_on_host(images, std::span<T>(refused_samples_));
      decoders_->count_refused(refused.size());
    }
    const clock::time_point planned = clock::now();
    // While every decoder is lent, this producer decodes the images a decoder would decode in
    // its turn itself, the last first, up to its share; those decoded ahead are on the GPU
    // already. They are staged in order, the last at the share's last sample.
    const std::span<const std::size_t> in_turn = plan_->in_turn();
    const bool ahead = !plan_->ahead().empty();
    const std::size_t most = std::min(most_on_host_, in_turn.size());
    std::size_t left = 0;
    // None borrowed (nor made) for a batch a decoder has nothing of.
    std::optional<typename decoder_pool::loan> decoder;
    const auto try_borrow = [&] {
      if (auto lent = decoders_->try_borrow(device_id_)) decoder.emplace(std::move(*lent));
    };
    if (!in_turn.empty() || ahead) try_borrow();
    while (!decoder && left < most) {
      ++left;
      decode_on_host(in_turn[in_turn.size() - left], most - left);
      try_borrow();
    }
    left_.assign(in_turn.end() - static_cast<std::ptrdiff_t>(left), in_turn.end());
    nvjpeg_batch_counts turn;
    clock::time_point lent = clock::now();
    const std::size_t sample = shape_.elements();
    if (left < in_turn.size() || ahead) {
      plan_->leave(left_);
      if (!decoder) decoder.emplace(decoders_->borrow(device_id_));  // waits for one
      lent = clock::now();
      (*decoder)->decode(*plan_, images, data(), stream_->native_handle());
      turn = (*decoder)->last_batch();
    } else {
      upload(refused, refused_samples_.data());  // no decoder needed: the rest is decoded
    }
    decoder.reset();
    decoders_->add_times(planned - start, lent - planned, turn.waited, turn.queued);
    if (left > 0) upload(left_, staged_samples_.data() + (most - left) * sample);
    CREMA_CUDA_TRY(cudaMemcpyAsync(device_.get(), labels_.get(), size_ * sizeof(label_type),
                                   cudaMemcpyHostToDevice, stream_->native_handle()));
    ready_ = stream_->record();
  }

  /// @return records in this batch (the last of a single pass may hold fewer)
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] record_shape shape() const noexcept { return shape_; }
  /// @return the stream the batch is decoded on
  [[nodiscard]] cuda_stream& stream() const noexcept { return *stream_; }
  /// @return the device the batch is on
  [[nodiscard]] int device_id() const noexcept { return device_id_; }

 private:
  template <class, class, class>
  friend class basic_nvjpeg_batcher;  // stages the records

  // Record i's encoded bytes, sample generator, key and label (the producer's side; records
  // 0, 1, 2, ... in order, as the pipeline fills them).
  void stage(std::size_t i, std::span<const std::byte> encoded, const sample_rng& rng,
             std::string_view key, std::int32_t label) {
    ::crema::detail::check_batch_index("nvjpeg_batcher", "record", i, capacity_);
    if (i == 0) {
      // The last decoding of this slot may still read its bytes and labels: done first.
      ready_.wait();
      bytes_.clear();
    }
    offsets_[i] = bytes_.size();
    bytes_.insert(bytes_.end(), encoded.begin(), encoded.end());
    offsets_[i + 1] = bytes_.size();
    images_[i].rng = rng;
    keys_[i].assign(key);
    static_cast<label_type*>(labels_.get())[i] =
        ::crema::detail::exact_label<label_type>(label, key);
  }

  [[nodiscard]] T* data() const noexcept { return static_cast<T*>(device_.get()) + labels_stride_; }
  // Image i through the CPU path into staged sample `at` of the share.
  void decode_on_host(std::size_t i, std::size_t at) {
    const std::size_t sample = shape_.elements();
    staged_samples_.resize(most_on_host_ * sample);  // once
    if (!host_transform_) {  // the windows at full size, as the decoders decode them
      host_transform_.emplace(::crema::detail::at_full_size(decoders_->transform()));
    }
    (*host_transform_)(images_[i].bytes, std::span<T>(staged_samples_).subspan(at * sample, sample),
                       images_[i].rng, images_[i].key);
    decoders_->count_host_decoded();
  }
  // Samples decoded on the host uploaded to their places (`from`'s k-th is `images[k]`'s).
  void upload(std::span<const std::size_t> images, const T* from) const {
    ::crema::detail::upload_samples(images, from, data(), shape_.elements(),
                                    stream_->native_handle());
  }
  [[nodiscard]] view_type view() const {
    const auto* block = static_cast<const T*>(device_.get());
    return {device_span<const T>(block + labels_stride_, size_ * shape_.elements()),
            device_span<const label_type>(static_cast<const label_type*>(device_.get()), size_)};
  }
  record_shape shape_;
  std::size_t capacity_;
  std::size_t most_on_host_;   // the most images of a batch its producer decodes itself
  std::size_t labels_stride_;  // labels first, data from this element (at 256 bytes' multiple)
  int device_id_;
  std::shared_ptr<cuda_stream> stream_;
  std::shared_ptr<decoder_pool> decoders_;  // the batcher's
  std::optional<nvjpeg_batch_plan> plan_;   // made on first need
  std::shared_ptr<void> device_;            // labels, then samples
  std::shared_ptr<void> labels_;            // pinned
  std::vector<encoded_image> images_;
  // Every record's encoded bytes, one after the other, pinned: nvJPEG's engine copies its input
  // to the device itself, from pageable memory through the driver's staging.
  std::vector<std::byte, pinned_allocator<std::byte>> bytes_;
  std::vector<std::size_t> offsets_;  // record i's bytes: [offsets_[i], offsets_[i + 1])
  std::vector<std::string> keys_;
  std::size_t size_ = 0;
  std::optional<image_transform> host_transform_;  // made on first need
  std::vector<std::size_t> left_;  // the images of the last batch its producer decoded
  // Pinned, each grown on need: the share decoded while decoders are lent, and the images
  // nvJPEG does not take (an upload from them is done once stage(0) has waited).
  std::vector<T, pinned_allocator<T>> staged_samples_;
  std::vector<T, pinned_allocator<T>> refused_samples_;
  cuda_event ready_{};  // the last decoding and uploads
  cuda_event retired_{};
  bool retired_pending_ = false;
};

}  // namespace crema::cuda
