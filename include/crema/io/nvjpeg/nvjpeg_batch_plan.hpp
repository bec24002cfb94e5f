#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/image/resample_jobs.hpp>
#include <crema/io/nvjpeg/detail/jpeg_end.hpp>
#include <crema/io/nvjpeg/detail/nvjpeg_ahead.hpp>
#include <crema/io/nvjpeg/detail/nvjpeg_objects.hpp>
#include <crema/io/nvjpeg/nvjpeg_library.hpp>
#include <crema/io/nvjpeg/nvjpeg_try.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

/// @file
/// The host's part of decoding a batch on the GPU (`nvjpeg_batch_plan`), made before a decoder
/// is needed, and the images it plans (`encoded_image`). Component `crema::nvjpeg`.

namespace crema::cuda {

/// @brief One image of a batch: its encoded bytes (valid until the work `decode` queues is
/// done; nvJPEG's hardware engine copies them to the device itself, by DMA from pinned memory,
/// through the driver's staging from pageable memory: see `pinned_allocator`), the sample's
/// generator, and the key errors name.
struct encoded_image {
  std::span<const std::byte> bytes;
  sample_rng rng{0, 0, 0};
  std::string_view key;
};

template <class Resampler>
class basic_nvjpeg_batch_decoder;

/// @brief The host's part of decoding one batch, done before any decoder is needed: each image's
/// header read, its window and flip drawn from its generator as `image_transform` draws them, its
/// stream parsed by nvJPEG, and where it is decoded (the hardware engine, the GPU-assisted
/// decoder, the CPU path); then where each window goes in the decoding buffer, and the batch's
/// resampling jobs. An `nvjpeg_batcher`'s producer plans its batch on its own thread and borrows
/// a shared decoder only to queue the work, so that the parsing of many batches runs on as many
/// cores, not inside the few decoders' turns. Its maker may also decode there the images nvJPEG
/// does not take (`decode_on_host`) and those of the GPU-assisted decoder (`decode_hybrid`).
///
/// The plan is made with any nvJPEG library of the device: the decoder sets up its own nvJPEG
/// objects for the hardware engine's images, and copies what `decode_hybrid` decoded with the
/// plan's. It may be made again as soon as `decode` returns (`make` first waits for the GPU's
/// part of its last `decode_hybrid`). Used by one thread at a time and reused batch after batch
/// (its buffers grow to the largest).
class nvjpeg_batch_plan {
 public:
  /// @param options the transform of the decoder that will decode the plan (its windows drawn
  ///        at full size: `dct_scaling` is ignored, as nvJPEG does not scale the DCT)
  nvjpeg_batch_plan(std::shared_ptr<const nvjpeg_library> library, image_transform_options options)
      : library_(std::move(library)),
        transform_(::crema::detail::at_full_size(std::move(options))),
        header_({.channels = transform_.options().decode.channels}),
        channels_(transform_.options().decode.channels),
        output_format_(::crema::detail::nvjpeg_output_of(transform_.options())) {}

  /// @brief Plans the decoding of `images` (their bytes are read here, and by the decoding).
  /// @throws crema::format_error naming an image that is neither a JPEG nor a PNG it can read
  /// @throws crema::cuda_error if nvJPEG fails
  void make(std::span<const encoded_image> images) {
    if (ahead_) ahead_->wait_idle();  // its transfers read the parsed streams
    const std::size_t n = images.size();
    ::crema::detail::grow_nvjpeg(library_->handle(), n, streams_);
    ::crema::detail::grow_nvjpeg(library_->handle(), n, params_);
    geometries_.resize(n);
    flips_.resize(n);
    huffman_pixels_.resize(n);
    lanes_.resize(n);
    places_.resize(n);
    size_ = 0;  // a plan that failed halfway plans nothing
    host_samples_ = nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      const encoded_image& image = images[i];
      const image_info info = header_.info(image.bytes, image.key);
      sample_rng rng = image.rng;  // the draws of image_transform::operator(), in its order
      geometries_[i] = transform_.geometry(info.height, info.width, rng);
      flips_[i] = transform_.options().mirror && rng.bernoulli(0.5) ? 1 : 0;
      const pixel_window& window = geometries_[i].window;
      huffman_pixels_[i] = info.width * (window.top + window.height);
      places_[i] = info.format == image_format::jpeg ? place_of(i, image) : place::host;
    }
    share_out_engine(n);
    lay_out(n);
  }

  /// @return the images of the plan a decoder decodes in its turn (on the hardware engine, or
  /// GPU-assisted where `decode_hybrid` did not decode them), in order
  [[nodiscard]] std::span<const std::size_t> in_turn() const noexcept { return turn_list_; }

  /// @brief Leaves `images` (in order, each one of `in_turn()`) to be decoded elsewhere, as a
  /// producer's CPU share is: the decoder then writes no sample of theirs.
  /// @throws crema::config_error naming an image that is not decoded in a decoder's turn
  void leave(std::span<const std::size_t> images) {
    if (images.empty()) return;
    for (const std::size_t i : images) {
      if (!std::binary_search(turn_list_.begin(), turn_list_.end(), i)) {
        ::crema::detail::fail<config_error>(
            "nvjpeg_batch_plan: image {} of {} is not one a decoder decodes in its turn", i, size_);
      }
    }
    for (const std::size_t i : images) places_[i] = place::elsewhere;
    lay_out(size_);
  }

  /// @brief Decodes the images planned for nvJPEG's GPU-assisted decoder (the JPEGs the hardware
  /// engine refuses, such as progressive ones; every JPEG where there is no engine) now, on this
  /// thread: each one's host phase here (its Huffman decoding, done on the GPU instead for windows
  /// past `nvjpeg_options::gpu_huffman_above_pixels`), its transfer and the GPU's part
  /// queued on a stream of the plan's own, into device memory of the plan's. A decoder then only
  /// copies their windows in its turn, which a pipeline's producers share. The host decodes an
  /// image while the GPU decodes the one before, and waits for that one before it queues the
  /// next. The work queued reads the images' bytes until it is done, as a decoder's does
  /// (`wait_idle`, or `make`, waits for it).
  /// @throws crema::format_error naming an image nvJPEG cannot decode; the plan then plans
  ///         nothing until made again
  /// @throws crema::cuda_error if nvJPEG or the CUDA runtime fails
  void decode_hybrid(std::span<const encoded_image> images) {
    if (images.size() < size_) {
      ::crema::detail::fail<config_error>("nvjpeg_batch_plan: {} images for a plan of {} images",
                                          images.size(), size_);
    }
    bool any = false;
    for (std::size_t i = 0; i < size_; ++i) {
      if (places_[i] == place::hybrid) {
        places_[i] = place::ahead;
        any = true;
      }
    }
    if (!any) return;
    lay_out(size_);
    try {
      if (!ahead_) ahead_ = std::make_unique<::crema::detail::nvjpeg_ahead>(library_->handle());
      std::byte* windows = ahead_->begin(ahead_bytes_);
      const nvjpegHandle_t handle = library_->handle();
      for (std::size_t k = 0; k < ahead_list_.size(); ++k) {
        const std::size_t i = ahead_list_[k];
        nvjpegImage_t to{};
        to.channel[0] = reinterpret_cast<unsigned char*>(windows + offsets_[i] - head_bytes_);
        to.pitch[0] = pitches_[i];
        ahead_->decode(handle, library_->decoder(lanes_[i]), static_cast<std::size_t>(lanes_[i]), k,
                       streams_[i].get(), params_[i].get(), to, images[i].key);
      }
    } catch (...) {
      size_ = 0;  // a batch whose images are not all decoded is not decoded
      throw;
    }
  }

  /// @brief Waits until the GPU's part of the last `decode_hybrid` is done (the images' bytes
  /// are then free, once no decoder's work reads them either).
  /// @throws crema::cuda_error if that work failed
  void wait_idle() const {
    if (ahead_) ahead_->wait_idle();
  }

  /// @return the images of the plan `decode_hybrid` decoded, in order
  [[nodiscard]] std::span<const std::size_t> ahead() const noexcept { return ahead_list_; }

  /// @return the images of the plan nvJPEG does not take (not JPEGs, CMYK, streams cut short,
  /// what it refuses), in order: the CPU path decodes them
  [[nodiscard]] std::span<const std::size_t> on_host() const noexcept { return host_list_; }

  /// @brief Decodes the images nvJPEG does not take (`on_host()`) now, on this thread, with the
  /// CPU path: image `on_host()[k]` into the k-th sample of `to`. The decoder then uploads them
  /// from `to` instead of decoding them in its turn, which a pipeline's producers share: `to`
  /// must hold them until the work `decode` queues is done (pinned, for the copy to be
  /// asynchronous).
  /// @throws crema::config_error if `to` holds fewer samples than `on_host()` names
  /// @throws crema::format_error naming an image the CPU path cannot decode
  template <class T>
  void decode_on_host(std::span<const encoded_image> images, std::span<T> to) {
    const std::size_t sample = shape().elements();
    if (images.size() < size_ || to.size() < host_list_.size() * sample) {
      ::crema::detail::fail<config_error>(
          "nvjpeg_batch_plan: {} images of which {} on the host, for a plan of {} images and room "
          "for {} samples",
          images.size(), host_list_.size(), size_, to.size() / sample);
    }
    host_samples_ = nullptr;  // until every one is decoded
    for (std::size_t k = 0; k < host_list_.size(); ++k) {
      const std::size_t i = host_list_[k];
      transform_.apply(images[i].bytes, geometries_[i], flips_[i] != 0,
                       to.subspan(k * sample, sample), images[i].key);
    }
    host_samples_ = reinterpret_cast<const std::byte*>(to.data());
    host_sample_bytes_ = sample * sizeof(T);
  }

  /// @return the images planned
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @return one output's shape (as `image_transform::shape`)
  [[nodiscard]] record_shape shape() const noexcept { return transform_.shape(); }

 private:
  template <class Resampler>
  friend class basic_nvjpeg_batch_decoder;

  // The hardware engine, the GPU-assisted decoder (in a decoder's turn, or ahead of it by the
  // plan's maker), the CPU path, and elsewhere (`leave`).
  enum class place : std::uint8_t { hardware, hybrid, ahead, host, elsewhere };

  // Where image i is decoded: parsed by nvJPEG, with a window and an output it takes.
  place place_of(std::size_t i, const encoded_image& image) {
    if (!::crema::detail::jpeg_reaches_end(image.bytes)) {
      return place::host;  // cut short: the CPU path names it (or decodes it, if asked to)
    }
    nvjpegJpegStream_t stream = streams_[i].get();
    const auto* data = reinterpret_cast<const unsigned char*>(image.bytes.data());
    if (nvjpegJpegStreamParse(library_->handle(), data, image.bytes.size(), 0, 0, stream) !=
        NVJPEG_STATUS_SUCCESS) {
      return place::host;  // the CPU path decodes it, or names it in its error
    }
    unsigned components = 0;
    if (nvjpegJpegStreamGetComponentsNum(stream, &components) != NVJPEG_STATUS_SUCCESS ||
        !(components == 3 || (components == 1 && output_format_ == NVJPEG_OUTPUT_Y))) {
      return place::host;  // CMYK, YCCK; gray made colour as the CPU path makes it
    }
    nvjpegDecodeParams_t params = params_[i].get();
    ::crema::detail::set_nvjpeg_window(params, output_format_, geometries_[i].window);
    int refused = 1;  // nvJPEG's "is_supported": 0 when it takes the image
    if (library_->hardware() &&
        nvjpegDecodeBatchedSupportedEx(library_->handle(), stream, params, &refused) ==
            NVJPEG_STATUS_SUCCESS &&
        refused == 0) {
      return place::hardware;
    }
    const std::optional<nvjpeg_library::lane> assisted =
        library_->gpu_assisted_lane(stream, params, huffman_pixels_[i]);
    if (!assisted) return place::host;
    lanes_[i] = *assisted;
    return place::hybrid;
  }

  // Of the first n images, those the engine takes past the library's hardware_share of them go
  // to the GPU-assisted decoder where it takes them.
  void share_out_engine(std::size_t n) {
    const double share = library_->hardware_share();
    if (share >= 1.0) return;
    const auto engine = static_cast<double>(std::count(
        places_.begin(), places_.begin() + static_cast<std::ptrdiff_t>(n), place::hardware));
    const auto keep = static_cast<std::size_t>(std::llround(share * engine));
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (places_[i] != place::hardware) continue;
      if (kept < keep) {
        ++kept;
        continue;
      }
      const std::optional<nvjpeg_library::lane> assisted =
          library_->gpu_assisted_lane(streams_[i].get(), params_[i].get(), huffman_pixels_[i]);
      if (assisted) {
        lanes_[i] = *assisted;
        places_[i] = place::hybrid;
      }
    }
  }

  // The lists of the first n images by place, where each GPU-decoded window goes, and their
  // resampling jobs. The windows decoded ahead come last, in order, as `decode_hybrid` laid
  // them out in its own memory.
  void lay_out(std::size_t n) {
    const std::size_t sample = shape().elements();
    offsets_.resize(n);
    pitches_.resize(n);
    jobs_.clear();
    hardware_list_.clear();
    hybrid_list_.clear();
    ahead_list_.clear();
    host_list_.clear();
    turn_list_.clear();
    const auto window_bytes = [&](std::size_t i) {
      const pixel_window& w = geometries_[i].window;
      pitches_[i] = w.width * channels_;
      return (w.height * pitches_[i] + 255) / 256 * 256;
    };
    head_bytes_ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (places_[i] == place::hardware || places_[i] == place::hybrid) {
        head_bytes_ += window_bytes(i);
      }
    }
    std::size_t head = 0;
    ahead_bytes_ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      switch (places_[i]) {
        case place::host:
          host_list_.push_back(i);
          continue;
        case place::elsewhere:
          continue;
        case place::ahead:
          offsets_[i] = head_bytes_ + ahead_bytes_;
          ahead_bytes_ += window_bytes(i);
          ahead_list_.push_back(i);
          break;
        case place::hardware:
        case place::hybrid:
          offsets_[i] = head;
          head += window_bytes(i);
          (places_[i] == place::hardware ? hardware_list_ : hybrid_list_).push_back(i);
          turn_list_.push_back(i);
          break;
      }
      jobs_.add(geometries_[i], flips_[i] != 0, channels_, offsets_[i], pitches_[i], i * sample);
    }
    decoded_bytes_ = head_bytes_ + ahead_bytes_;
    size_ = n;
  }

  std::shared_ptr<const nvjpeg_library> library_;
  image_transform transform_;  // the draws
  image_decoder header_;       // reads each image's size
  std::size_t channels_;
  nvjpegOutputFormat_t output_format_;
  std::vector<::crema::detail::nvjpeg_stream> streams_;  // one per image of the largest batch
  std::vector<::crema::detail::nvjpeg_params> params_;
  std::vector<image_geometry> geometries_;
  std::vector<unsigned char> flips_;
  // Image i's pixels its window's Huffman decoding goes through (its rows down to the window's)
  std::vector<std::size_t> huffman_pixels_;
  std::vector<nvjpeg_library::lane> lanes_;  // image i's GPU-assisted decoder, if it has one
  std::vector<place> places_;
  std::vector<std::size_t> offsets_;  // image i's window at this byte of the decoding buffer
  std::vector<std::size_t> pitches_;  // and its bytes a row
  std::vector<std::size_t> hardware_list_;
  std::vector<std::size_t> hybrid_list_;
  std::vector<std::size_t> ahead_list_;
  std::vector<std::size_t> host_list_;
  std::vector<std::size_t> turn_list_;  // hardware_list_ and hybrid_list_, merged
  resample_jobs jobs_;
  std::size_t decoded_bytes_ = 0;  // the decoding buffer: the windows decoded in the turn,
  std::size_t head_bytes_ = 0;     // these bytes,
  std::size_t ahead_bytes_ = 0;    // then those decoded ahead
  // decode_hybrid's stream, buffers and windows (made on first need); the decoder copies those.
  // Destroyed before the library.
  std::unique_ptr<::crema::detail::nvjpeg_ahead> ahead_;
  std::size_t size_ = 0;
  const std::byte* host_samples_ = nullptr;  // on_host()'s samples, if decode_on_host made them
  std::size_t host_sample_bytes_ = 0;
};

}  // namespace crema::cuda
