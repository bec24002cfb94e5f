#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/error.hpp>
#include <crema/io/caffe_batcher.hpp>
#include <crema/io/datum.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/device_span.hpp>
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/record_shape.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

/// @file
/// The pipeline's batch transform for JPEGs decoded on the GPU: each producer reads the files (or
/// takes the encoded Datums) of its batch into the batch's own buffer on its thread, then, as the
/// batch's finishing step, decodes them all with nvJPEG and resamples them on the GPU straight
/// into the batch's device memory, on the batch's own stream, and uploads the labels. The
/// consumer's stream waits for one event a batch. Component `crema::nvjpeg`;
/// `nvjpeg_batcher<T>` with the kernels is in nvjpeg_batcher.cuh.

namespace crema::cuda {

/// @brief Where an `nvjpeg_batcher`'s batches live and how they are read.
struct nvjpeg_batcher_options {
  /// The device of each consumer's batches (consumer i on devices[i]); empty: the device
  /// current when the batches are made.
  std::vector<int> devices;
  nvjpeg_options decoding = {};
  image_file_reader_options reading = {};
};

/// @brief A batch transform (`batch_transform`) over image files (`image_folder_source`,
/// `image_list_source`) or encoded Datums, whose batches are decoded on the GPU by the producer
/// that filled them. Samples are `image_transform`'s, windows decoded at full size
/// (`basic_nvjpeg_batch_decoder`); labels are T.
/// @tparam T float (normalised) or std::uint8_t
/// @tparam Decoder `basic_nvjpeg_batch_decoder<kernel_resampler>` on a GPU
template <class T, class Decoder>
class basic_nvjpeg_batcher {
 public:
  /// @brief One slot's batch: the encoded images on the host, the samples and labels on the
  /// device. Filled by one producer, then read by the consumer holding its lease.
  class batch {
   public:
    using value_type = T;
    using view_type = device_batch_view<T>;
    using event_type = cuda_event;

    batch(std::size_t capacity, record_shape shape, int device)
        : shape_(shape),
          capacity_(capacity),
          labels_stride_((capacity + 63) / 64 * 64),
          device_id_(device),
          stream_(std::make_shared<cuda_stream>(device)),
          images_(capacity),
          offsets_(capacity + 1),
          keys_(capacity) {
      (void)::crema::detail::batch_elements("nvjpeg_batcher", capacity, shape);
      const std::size_t bytes = (labels_stride_ + capacity * shape.elements()) * sizeof(T);
      device_ = std::shared_ptr<void>(allocate_on(device, bytes), [](void* p) {
        if (p != nullptr) (void)cudaFree(p);
      });
      void* labels = nullptr;
      CREMA_CUDA_TRY(cudaMallocHost(&labels, capacity * sizeof(T)));
      labels_ = std::shared_ptr<void>(labels, [](void* p) {
        if (p != nullptr) (void)cudaFreeHost(p);
      });
    }

    /// @brief The batch on the device for work queued on `stream`: `stream` waits for the
    /// decoding's event (the host does not). For the consumer.
    [[nodiscard]] view_type device(cuda_stream& stream) const {
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

    /// @brief The finishing step (the producer's): decodes the batch's `info.size` images on
    /// the batch's stream into its device memory (with the producer's decoder for that device,
    /// the device made current meanwhile), uploads the labels, records one event.
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
      decoder_->decode(std::span<const encoded_image>(images_).first(size_), data(),
                       stream_->native_handle());
      CREMA_CUDA_TRY(cudaMemcpyAsync(device_.get(), labels_.get(), size_ * sizeof(T),
                                     cudaMemcpyHostToDevice, stream_->native_handle()));
      ready_ = stream_->record();
    }

    /// @return records in this batch (the last of a single pass may hold fewer)
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    [[nodiscard]] record_shape shape() const noexcept { return shape_; }
    /// @return the stream the batch is decoded on
    [[nodiscard]] cuda_stream& stream() const noexcept { return *stream_; }

   private:
    friend class basic_nvjpeg_batcher;

    // Record i's encoded bytes, sample generator, key and label (the producer's side; records
    // 0, 1, 2, ... in order, as the pipeline fills them).
    void stage(std::size_t i, std::span<const std::byte> encoded, const sample_rng& rng,
               std::string_view key, std::int32_t label, Decoder& decoder) {
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
      static_cast<T*>(labels_.get())[i] = static_cast<T>(label);
      decoder_ = &decoder;
    }

    [[nodiscard]] T* data() const noexcept {
      return static_cast<T*>(device_.get()) + labels_stride_;
    }
    [[nodiscard]] view_type view() const {
      const auto* block = static_cast<const T*>(device_.get());
      return {device_span<const T>(block + labels_stride_, size_ * shape_.elements()),
              device_span<const T>(block, size_)};
    }
    static void* allocate_on(int device, std::size_t bytes) {
      int current = 0;
      CREMA_CUDA_TRY(cudaGetDevice(&current));
      if (current != device) CREMA_CUDA_TRY(cudaSetDevice(device));
      void* pointer = nullptr;
      const cudaError_t status = cudaMalloc(&pointer, bytes);
      if (current != device) (void)cudaSetDevice(current);
      CREMA_CUDA_TRY(status);
      return pointer;
    }

    record_shape shape_;
    std::size_t capacity_;
    std::size_t labels_stride_;  // labels first, data from this element (256 bytes for float)
    int device_id_;
    std::shared_ptr<cuda_stream> stream_;
    std::shared_ptr<void> device_;  // labels, then samples
    std::shared_ptr<void> labels_;  // pinned
    std::vector<encoded_image> images_;
    std::vector<std::byte> bytes_;      // every record's encoded bytes, one after the other
    std::vector<std::size_t> offsets_;  // record i's bytes: [offsets_[i], offsets_[i + 1])
    std::vector<std::string> keys_;
    Decoder* decoder_ = nullptr;  // the producer's that filled it
    std::size_t size_ = 0;
    cuda_event ready_{};  // the last decoding and label upload
    cuda_event retired_{};
    bool retired_pending_ = false;
  };
  using batch_type = batch;

  explicit basic_nvjpeg_batcher(image_transform_options transform,
                                nvjpeg_batcher_options options = {})
      : transform_(std::move(transform)),
        options_(std::move(options)),
        shape_(image_transform(transform_).shape()),
        reader_(options_.reading) {
    Decoder::check_options(transform_);  // now, not when the first batch is decoded
  }
  // Each producer's copy makes its own decoders (one per device) when it first fills a batch.
  basic_nvjpeg_batcher(const basic_nvjpeg_batcher& other)
      : transform_(other.transform_),
        options_(other.options_),
        shape_(other.shape_),
        reader_(options_.reading) {}
  basic_nvjpeg_batcher& operator=(const basic_nvjpeg_batcher&) = delete;
  basic_nvjpeg_batcher(basic_nvjpeg_batcher&&) noexcept = default;
  basic_nvjpeg_batcher& operator=(basic_nvjpeg_batcher&&) noexcept = delete;
  ~basic_nvjpeg_batcher() = default;

  /// @return one sample's shape
  [[nodiscard]] record_shape shape() const noexcept { return shape_; }

  /// @brief One slot's batch, on its consumer's device.
  [[nodiscard]] batch make_batch(const batch_context& where) const {
    int device = 0;
    if (where.consumer < options_.devices.size()) {
      device = options_.devices[where.consumer];
    } else {
      CREMA_CUDA_TRY(cudaGetDevice(&device));
    }
    return batch(where.batch_size, shape_, device);
  }

  /// @brief An image file: read on this producer's thread into the batch.
  void operator()(const image_file& file, batch& to, const sample_context& context) {
    to.stage(context.index, reader_.read(file), context.rng(), file.relative, file.label,
             decoder_for(to.device_id_));
  }

  /// @brief An encoded Datum (what convert_imageset --encoded stores).
  template <datum_record Record>
  void operator()(const Record& record, batch& to, const sample_context& context) {
    const std::string_view key = record.key_text();
    const datum_view datum = decode_datum(record.value, key);
    if (!datum.encoded) {
      ::crema::detail::fail<format_error>(
          "record {}: raw pixels; an nvjpeg_batcher decodes encoded Datums", key);
    }
    to.stage(context.index, datum.data, context.rng(), key, datum.label,
             decoder_for(to.device_id_));
  }

 private:
  // This producer's decoder for `device`: made there on first use (its nvJPEG state and
  // buffers belong to that device).
  Decoder& decoder_for(int device) {
    for (auto& [on, decoder] : decoders_) {
      if (on == device) return *decoder;
    }
    const scoped_device on(device);
    decoders_.emplace_back(device, std::make_unique<Decoder>(transform_, options_.decoding));
    return *decoders_.back().second;
  }

  image_transform_options transform_;
  nvjpeg_batcher_options options_;
  record_shape shape_;
  image_file_reader reader_;
  std::vector<std::pair<int, std::unique_ptr<Decoder>>> decoders_;  // this producer's, by device
};

}  // namespace crema::cuda
