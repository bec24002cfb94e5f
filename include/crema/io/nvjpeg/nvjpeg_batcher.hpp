#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/image/encoded_sample_reader.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch.hpp>
#include <crema/io/nvjpeg/nvjpeg_decoder_pool.hpp>
#include <crema/io/nvjpeg/nvjpeg_library.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

/// @file
/// The pipeline's batch transform for JPEGs decoded on the GPU: each producer reads the files (or
/// takes the encoded Datums) of its batch into the batch's own buffer on its thread, then, as the
/// batch's finishing step, plans their decoding (headers, windows, nvJPEG's parsing, the CPU path
/// for the images nvJPEG does not take) on its thread too, and has the rest decoded by nvJPEG and
/// resampled on the GPU straight into the batch's device memory, on the batch's own stream, and
/// uploads the labels. The consumer's stream waits for one event a batch. The producers share a few
/// decoders on each device, lent for one batch's decoding at a time: the GPU's JPEG engine is one,
/// and more decoders feeding it deliver less. A producer that finds every decoder lent may decode
/// the last images of its batch itself, on the CPU path, until one comes back (`max_host_share`):
/// the host's idle cores join the engine where it is the bound. Component `crema::nvjpeg`;
/// `nvjpeg_batcher<T>` with the kernels is in nvjpeg_batcher.cuh.

namespace crema::cuda {

/// @brief Where an `nvjpeg_batcher`'s batches live and how they are read.
struct nvjpeg_batcher_options {
  /// The device of each consumer's batches (consumer i on devices[i]); empty: the device
  /// current when the batches are made.
  std::vector<int> devices = {};
  /// At most this many producers decode at once on each device, each with a decoder (nvJPEG's
  /// state and buffers) of its own; the others wait for one when their batch is filled: a few
  /// decoders deliver more than one a producer (docs/performance.md, "On a GPU").
  /// 0: a decoder for every producer that needs one.
  std::size_t decoders = 4;
  /// While every decoder of its device is lent, a producer may decode its batch's images
  /// itself, the last first, with the CPU path (`image_transform`, windows decoded at full size
  /// as on the GPU) into pinned memory uploaded with the batch, and take the first decoder given
  /// back for the rest: at most this share of each batch (a slot that does so keeps pinned
  /// memory for that many samples). Only images a decoder would decode in its turn: not those
  /// the producer decoded ahead with the GPU-assisted decoder, whose windows are on the GPU
  /// already (so none where the GPU has no JPEG engine). Which images go to the CPU then depends on
  /// timing, not on which window a sample gets; their values are the CPU path's, within the bound
  /// nvJPEG's own are. 0 (the default): producers wait for a decoder. For hosts where the JPEG
  /// engine is the bound and cores are idle; what it gave and cost where measured is in
  /// docs/performance.md ("On a GPU").
  double max_host_share = 0.0;
  nvjpeg_options decoding = {};
  image_file_reader_options reading = {};
};

/// @brief A batch transform (`batch_transform`) over image files (`image_folder_source`,
/// `image_list_source`) or encoded Datums, whose batches are decoded on the GPU by the producer
/// that filled them. Samples are `image_transform`'s, windows decoded at full size
/// (`basic_nvjpeg_batch_decoder`); labels are `Label`.
/// @tparam T float (normalised) or std::uint8_t
/// @tparam Decoder `basic_nvjpeg_batch_decoder<kernel_resampler>` on a GPU
/// @tparam Label `batch_label_t<T>` by default; `std::int64_t` for PyTorch's class indices
template <class T, class Decoder, class Label = batch_label_t<T>>
class basic_nvjpeg_batcher {
 public:
  /// The decoders its copies share (nvjpeg_decoder_pool.hpp).
  using decoder_pool = nvjpeg_decoder_pool<Decoder>;
  /// One slot's batch (nvjpeg_batch.hpp).
  using batch = nvjpeg_batch<T, Decoder, Label>;
  using batch_type = batch;

  explicit basic_nvjpeg_batcher(image_transform_options transform,
                                nvjpeg_batcher_options options = {})
      : transform_(std::move(transform)),
        options_(std::move(options)),
        shape_(image_transform(transform_).shape()),
        reader_(options_.reading),
        decoders_(
            std::make_shared<decoder_pool>(transform_, options_.decoding, options_.decoders)) {
    Decoder::check_options(transform_);  // now, not when the first batch is decoded
    nvjpeg_library::check(options_.decoding);
    if (!(options_.max_host_share >= 0.0 && options_.max_host_share <= 1.0)) {
      ::crema::detail::fail<config_error>(
          "nvjpeg_batcher: max_host_share must be from 0 to 1, got {}", options_.max_host_share);
    }
  }
  // Each producer's copy reads with a reader of its own and shares the decoders.
  basic_nvjpeg_batcher(const basic_nvjpeg_batcher& other)
      : transform_(other.transform_),
        options_(other.options_),
        shape_(other.shape_),
        reader_(options_.reading),
        decoders_(other.decoders_) {}
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
    return batch(
        where.batch_size, shape_, device, decoders_,
        static_cast<std::size_t>(options_.max_host_share * static_cast<double>(where.batch_size)));
  }

  /// @return the decoders made so far on `device` (at most `nvjpeg_batcher_options::decoders`)
  [[nodiscard]] std::size_t decoders_made(int device) const { return decoders_->made(device); }
  /// @return the images its producers decoded on the CPU while every decoder was lent
  [[nodiscard]] std::uint64_t host_decoded() const noexcept { return decoders_->host_decoded(); }
  /// @return the images nvJPEG does not take (not JPEGs, CMYK, streams cut short): decoded by
  /// its producers on the CPU path before they borrow a decoder
  [[nodiscard]] std::uint64_t refused() const noexcept { return decoders_->refused(); }
  /// @return the images of nvJPEG's GPU-assisted decoder (those the hardware engine refuses, such
  /// as progressive JPEGs; every JPEG where there is no engine): their host phase (Huffman
  /// decoding) done by its producers before they borrow a decoder, the rest queued on the GPU
  [[nodiscard]] std::uint64_t decoded_ahead() const noexcept { return decoders_->decoded_ahead(); }
  /// @return where its batches' finishing steps spent the host's time so far
  [[nodiscard]] nvjpeg_feed_times times() const noexcept { return decoders_->times(); }
  /// @return the decoders its copies share (to hold one back in a test, say)
  [[nodiscard]] decoder_pool& decoders() const noexcept { return *decoders_; }

  /// @brief A record's encoded image (an image file, read on this producer's thread, or an
  /// encoded Datum): staged into the batch.
  template <encoded_sample_record Record>
  void operator()(const Record& record, batch& to, const sample_context& context) {
    const encoded_sample image = reader_(record);
    to.stage(context.index, image.bytes, context.rng(), image.key, image.label);
  }

 private:
  image_transform_options transform_;
  nvjpeg_batcher_options options_;
  record_shape shape_;
  encoded_sample_reader reader_;
  std::shared_ptr<decoder_pool> decoders_;  // every copy's, and every batch's
};

}  // namespace crema::cuda
