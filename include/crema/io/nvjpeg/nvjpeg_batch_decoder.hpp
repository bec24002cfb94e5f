#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/error.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/image/resample_jobs.hpp>
#include <crema/io/nvjpeg/nvjpeg_try.hpp>
#include <crema/pipeline/record_shape.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

/// @file
/// ImageNet-style input decoded on the GPU: a batch of JPEGs decoded by nvJPEG (the hardware
/// decode engine where the GPU has one and takes the image, GPU-assisted Huffman decoding
/// elsewhere), only each sample's window, then resampled, flipped and normalised by kernels,
/// straight into device memory. Each sample's window and flip are drawn from its own generator
/// exactly as `image_transform` draws them, so the decoder changes where the work runs, not
/// which window a sample gets; the resampling is the CPU path's arithmetic (`resample_jobs`).
/// Images nvJPEG does not take (PNG, CMYK, gray ones for colour output, streams cut short, what it
/// refuses) go through the CPU path and are uploaded. Component `crema::nvjpeg`:
/// `nvjpeg_batch_decoder`, with the kernels, is in nvjpeg_batch_decoder.cuh (nvcc translation
/// units); this header holds the decoder over any resampling policy, which tests run on the host.

namespace crema::detail {

// Whether a JPEG stream reaches its end: an EOI marker (FF D9) after the start of its first scan.
// nvJPEG's hardware engine decodes a stream cut short without a word (an H100, CUDA 13.0: the
// missing rows made up), so such a stream is left to the CPU path, which calls it an error, or
// decodes it where the user accepts libjpeg's warnings. Walks the marker segments to the first
// SOS (an EXIF thumbnail's own EOI sits inside an APP1 segment, before it), then looks back from
// the end (bytes after the EOI are allowed); inside entropy-coded data FF is always followed by
// 00 or a restart marker, so FF D9 there is the end.
[[nodiscard]] inline bool jpeg_reaches_end(std::span<const std::byte> bytes) noexcept {
  const std::size_t n = bytes.size();
  const auto at = [&](std::size_t i) { return std::to_integer<unsigned>(bytes[i]); };
  if (n < 4 || at(0) != 0xFF || at(1) != 0xD8) return false;
  std::size_t i = 2;
  std::size_t scan = 0;
  while (scan == 0) {
    if (i >= n || at(i) != 0xFF) return false;
    while (i < n && at(i) == 0xFF) ++i;  // fill bytes before a marker
    if (i >= n) return false;
    const unsigned marker = at(i++);
    if (marker == 0xDA) {
      scan = i;
    } else if (marker == 0xD9) {
      return false;  // an end before any scan
    } else if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      continue;  // markers without a segment
    } else {
      if (n - i < 2) return false;
      const std::size_t length = at(i) << 8 | at(i + 1);
      if (length < 2 || length > n - i) return false;
      i += length;
    }
  }
  for (std::size_t end = n - 1; end > scan; --end) {
    if (at(end) == 0xD9 && at(end - 1) == 0xFF) return true;
  }
  return false;
}

}  // namespace crema::detail

namespace crema::cuda {

/// @brief One image of a batch: its encoded bytes (valid until the work `decode` queues is
/// done), the sample's generator, and the key errors name.
struct encoded_image {
  std::span<const std::byte> bytes;
  sample_rng rng{0, 0, 0};
  std::string_view key;
};

/// @brief How an `nvjpeg_batch_decoder` decodes.
struct nvjpeg_options {
  /// Use the GPU's hardware JPEG engine (A100, H100, ...) for the images it takes.
  bool hardware = true;
  /// Chroma upsampled by interpolation (as libjpeg-turbo's default "fancy" upsampling), not
  /// by repeating samples: pixels closer to the CPU path's.
  bool interpolate_chroma = true;
};

/// @brief Where the images of the last batch were decoded.
struct nvjpeg_batch_counts {
  std::size_t hardware = 0;  ///< nvJPEG's hardware engine
  std::size_t hybrid = 0;    ///< nvJPEG's GPU-assisted decoder
  std::size_t host = 0;      ///< the CPU path (`image_transform`), then uploaded
};

/// @brief Decodes batches of encoded images into device memory as an `image_transform` with
/// the same options would, with the windows decoded at full size (`dct_scaling` off: nvJPEG
/// does not scale the DCT); on the same decoded pixels the values are the CPU path's, byte for
/// byte (`resample_jobs`). Colour jitter is not done on the GPU.
///
/// Used by one thread at a time (an `nvjpeg_batcher` lends its decoders to its producers); its
/// buffers grow to the largest batch and are then reused. The device is the one current when
/// `decode` is called.
/// @tparam Resampler runs a batch's resampling: `resampler(const resample_launch<T>&, stream)`
///         queues it on the stream (`kernel_resampler`, nvjpeg_batch_decoder.cuh, on a GPU)
template <class Resampler>
class basic_nvjpeg_batch_decoder {
 public:
  /// @throws crema::config_error for options an `image_transform` refuses, or colour jitter
  /// @throws crema::cuda_error if nvJPEG cannot be started (no device, no library)
  explicit basic_nvjpeg_batch_decoder(image_transform_options options, nvjpeg_options decoding = {},
                                      Resampler resampler = {})
      : resampler_(std::move(resampler)),
        transform_(without_dct_scaling(std::move(options))),
        header_({.channels = transform_.options().decode.channels}) {
    check_options(transform_.options());
    const image_transform_options& o = transform_.options();
    format_.chw = o.layout == pixel_layout::chw;
    for (std::size_t c = 0; c < 3; ++c) {
      format_.mean[c] = o.mean[c];
      format_.std[c] = o.std[c];
    }
    output_format_ = o.decode.channels == 1                 ? NVJPEG_OUTPUT_Y
                     : o.decode.order == channel_order::rgb ? NVJPEG_OUTPUT_RGBI
                                                            : NVJPEG_OUTPUT_BGRI;
    const unsigned flags =
        decoding.interpolate_chroma ? unsigned{NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION} : 0U;
    // The hardware backend's handle also makes the GPU-assisted decoder; without the engine
    // (or the wish for it), the default backend's.
    if (decoding.hardware && nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, flags,
                                            &handle_) == NVJPEG_STATUS_SUCCESS) {
      hardware_ = true;
    } else {
      handle_ = nullptr;
      CREMA_NVJPEG_TRY(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, flags, &handle_));
    }
    try {
      if (hardware_) CREMA_NVJPEG_TRY(nvjpegJpegStateCreate(handle_, &hardware_state_));
      CREMA_NVJPEG_TRY(nvjpegDecoderCreate(handle_, NVJPEG_BACKEND_GPU_HYBRID, &hybrid_));
      // The next batch waits on it for up to a whole batch's decoding: asleep, not spinning
      // (the runtime's default here), so that the core goes to the producers reading files and
      // to whatever else the host runs meanwhile.
      CREMA_CUDA_TRY(
          cudaEventCreateWithFlags(&done_, cudaEventDisableTiming | cudaEventBlockingSync));
    } catch (...) {
      release();
      throw;
    }
  }
  basic_nvjpeg_batch_decoder(const basic_nvjpeg_batch_decoder&) = delete;
  basic_nvjpeg_batch_decoder& operator=(const basic_nvjpeg_batch_decoder&) = delete;
  ~basic_nvjpeg_batch_decoder() { release(); }

  /// @throws crema::config_error for options the GPU does not do: colour jitter
  static void check_options(const image_transform_options& options) {
    if (options.jitter.enabled()) {
      ::crema::detail::fail<config_error>(
          "nvjpeg_batch_decoder: colour jitter is not done on the GPU; jitter the device batch "
          "or decode on the CPU");
    }
  }

  /// @return one output's shape (as `image_transform::shape`)
  [[nodiscard]] record_shape shape() const noexcept { return transform_.shape(); }
  /// @return whether the hardware engine is in use
  [[nodiscard]] bool hardware() const noexcept { return hardware_; }
  /// @return where the images of the last batch were decoded
  [[nodiscard]] nvjpeg_batch_counts last_batch() const noexcept { return counts_; }

  /// @brief Queues the decoding of `images` on `stream`, sample i into `out + i *
  /// shape().elements()` (device memory, float normalised or std::uint8_t), and returns once
  /// the host's part is done (the CPU path's images, nvJPEG's Huffman decoding on the host).
  /// Waits first for the previous batch's work on the device to be done with this decoder's
  /// buffers.
  /// @throws crema::format_error naming the image's key for an image that does not decode
  /// @throws crema::cuda_error if nvJPEG or the CUDA runtime fails
  template <class T>
  void decode(std::span<const encoded_image> images, T* out, cudaStream_t stream) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::uint8_t>,
                  "crema: an nvjpeg_batch_decoder writes float or std::uint8_t samples");
    wait_idle();
    plan(images);
    const std::size_t sample = shape().elements();
    reserve(decoded_, decoded_bytes_);
    reserve(kept_, jobs_.kept_bytes());
    reserve(block_, jobs_.block_bytes());
    reserve(staged_block_, jobs_.block_bytes());
    reserve(staged_samples_, host_.size() * sample * sizeof(T));

    jobs_.write_block(static_cast<std::byte*>(staged_block_.data));
    pending_ = true;  // from the first queued work on, the next call and the destructor wait
    try {
      queue(images, out, stream);
    } catch (...) {
      // What was queued before the failure still reads this decoder's buffers: the next call
      // waits for it.
      (void)cudaEventRecord(done_, stream);
      throw;
    }
    CREMA_CUDA_TRY(cudaEventRecord(done_, stream));
    counts_ = {hardware_list_.size(), hybrid_list_.size(), host_.size()};
  }

 private:
  enum class place { hardware, hybrid, host };

  // Bytes on the device (cudaMalloc) or pinned on the host (cudaMallocHost).
  struct gpu_bytes {
    void* data = nullptr;
    std::size_t size = 0;
    bool pinned = false;
  };
  // nvjpegImage_t is an unnamed struct, which nvcc 13.0's front end cannot destroy in a
  // std::vector (an internal error): an array that grows instead.
  struct image_array {
    std::unique_ptr<nvjpegImage_t[]> images;
    std::size_t capacity = 0;
    std::size_t size = 0;

    void resize(std::size_t n) {
      if (n > capacity) {
        images.reset(new nvjpegImage_t[n]());
        capacity = n;
      }
      size = n;
    }
    nvjpegImage_t& operator[](std::size_t i) noexcept { return images[i]; }
    const nvjpegImage_t& operator[](std::size_t i) const noexcept { return images[i]; }
    nvjpegImage_t* data() noexcept { return images.get(); }
  };
  struct hybrid_state {
    nvjpegJpegState_t state = nullptr;
    nvjpegBufferPinned_t pinned = nullptr;
    nvjpegBufferDevice_t device = nullptr;
  };

  static image_transform_options without_dct_scaling(image_transform_options options) {
    options.decode.dct_scaling = false;
    return options;
  }

  // The copy of the jobs, nvJPEG's decoding, the resampling and the CPU path's samples, queued.
  template <class T>
  void queue(std::span<const encoded_image> images, T* out, cudaStream_t stream) {
    const std::size_t sample = shape().elements();
    if (jobs_.block_bytes() > 0) {
      CREMA_CUDA_TRY(cudaMemcpyAsync(block_.data, staged_block_.data, jobs_.block_bytes(),
                                     cudaMemcpyHostToDevice, stream));
    }
    decode_on_hardware(images, stream);
    decode_hybrid(images, stream);
    const auto* block = static_cast<const std::byte*>(block_.data);
    resampler_(
        resample_launch<T>{reinterpret_cast<const resample_job*>(block),
                           reinterpret_cast<const std::int32_t*>(block + jobs_.table_offset()),
                           static_cast<std::int32_t>(jobs_.jobs().size()), jobs_.most_kept_rows(),
                           jobs_.most_out_rows(), format_,
                           static_cast<const std::uint8_t*>(decoded_.data),
                           static_cast<std::uint8_t*>(kept_.data), out},
        stream);
    T* staged = static_cast<T*>(staged_samples_.data);
    for (std::size_t k = 0; k < host_.size(); ++k) {
      const std::size_t i = host_[k];
      const std::span<T> to(staged + k * sample, sample);
      transform_.apply(images[i].bytes, geometries_[i], flips_[i] != 0, to, images[i].key);
      CREMA_CUDA_TRY(cudaMemcpyAsync(out + i * sample, to.data(), sample * sizeof(T),
                                     cudaMemcpyHostToDevice, stream));
    }
  }

  void wait_idle() {
    if (pending_) {
      CREMA_CUDA_TRY(cudaEventSynchronize(done_));
      pending_ = false;
    }
  }

  // Every image's geometry and flip (drawn as image_transform draws them), where it is decoded,
  // and, for the GPU's, where its window goes and its resampling job.
  void plan(std::span<const encoded_image> images) {
    const std::size_t n = images.size();
    const std::size_t channels = transform_.options().decode.channels;
    const std::size_t sample = shape().elements();
    while (streams_.size() < n) {  // kept only once made, so that release() frees only those
      nvjpegJpegStream_t stream = nullptr;
      CREMA_NVJPEG_TRY(nvjpegJpegStreamCreate(handle_, &stream));
      streams_.push_back(stream);
    }
    while (params_.size() < n) {
      nvjpegDecodeParams_t params = nullptr;
      CREMA_NVJPEG_TRY(nvjpegDecodeParamsCreate(handle_, &params));
      params_.push_back(params);
    }
    geometries_.resize(n);
    flips_.resize(n);
    destinations_.resize(n);
    destination_offsets_.resize(n);
    jobs_.clear();
    hardware_list_.clear();
    hybrid_list_.clear();
    host_.clear();
    decoded_bytes_ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const encoded_image& image = images[i];
      const image_info info = header_.info(image.bytes, image.key);
      sample_rng rng = image.rng;  // the draws of image_transform::operator(), in its order
      geometries_[i] = transform_.geometry(info.height, info.width, rng);
      flips_[i] = transform_.options().mirror && rng.bernoulli(0.5) ? 1 : 0;
      const place where = info.format == image_format::jpeg ? place_of(i, image) : place::host;
      if (where == place::host) {
        host_.push_back(i);
        continue;
      }
      const pixel_window& w = geometries_[i].window;
      const std::size_t pitch = w.width * channels;
      const std::size_t at = decoded_bytes_;
      decoded_bytes_ += (w.height * pitch + 255) / 256 * 256;
      destinations_[i] = {};
      destinations_[i].pitch[0] = pitch;
      destination_offsets_[i] = at;
      jobs_.add(geometries_[i], flips_[i] != 0, channels, at, pitch, i * sample);
      (where == place::hardware ? hardware_list_ : hybrid_list_).push_back(i);
    }
  }

  // Where image i is decoded: parsed by nvJPEG, with a window and an output it takes.
  place place_of(std::size_t i, const encoded_image& image) {
    if (!::crema::detail::jpeg_reaches_end(image.bytes)) {
      return place::host;  // cut short: the CPU path names it (or decodes it, if asked to)
    }
    nvjpegJpegStream_t stream = streams_[i];
    const auto* data = reinterpret_cast<const unsigned char*>(image.bytes.data());
    if (nvjpegJpegStreamParse(handle_, data, image.bytes.size(), 0, 0, stream) !=
        NVJPEG_STATUS_SUCCESS) {
      return place::host;  // the CPU path decodes it, or names it in its error
    }
    unsigned components = 0;
    if (nvjpegJpegStreamGetComponentsNum(stream, &components) != NVJPEG_STATUS_SUCCESS ||
        !(components == 3 || (components == 1 && output_format_ == NVJPEG_OUTPUT_Y))) {
      return place::host;  // CMYK, YCCK; gray made colour as the CPU path makes it
    }
    const pixel_window& w = geometries_[i].window;
    nvjpegDecodeParams_t params = params_[i];
    CREMA_NVJPEG_TRY(nvjpegDecodeParamsSetOutputFormat(params, output_format_));
    CREMA_NVJPEG_TRY(nvjpegDecodeParamsSetROI(params, static_cast<int>(w.left),
                                              static_cast<int>(w.top), static_cast<int>(w.width),
                                              static_cast<int>(w.height)));
    int refused = 1;  // nvJPEG's "is_supported": 0 when it takes the image
    if (hardware_ &&
        nvjpegDecodeBatchedSupportedEx(handle_, stream, params, &refused) ==
            NVJPEG_STATUS_SUCCESS &&
        refused == 0) {
      return place::hardware;
    }
    refused = 1;
    if (nvjpegDecoderJpegSupported(hybrid_, stream, params, &refused) != NVJPEG_STATUS_SUCCESS ||
        refused != 0) {
      return place::host;
    }
    return place::hybrid;
  }

  nvjpegImage_t destination(std::size_t i) const noexcept {
    nvjpegImage_t image = destinations_[i];
    image.channel[0] = static_cast<unsigned char*>(decoded_.data) + destination_offsets_[i];
    return image;
  }

  // The hardware engine's images in one call. An image that spoils the batch sends the whole
  // batch to the GPU-assisted decoder, one image at a time, whose error then names it.
  void decode_on_hardware(std::span<const encoded_image> images, cudaStream_t stream) {
    if (hardware_list_.empty()) return;
    batch_data_.clear();
    batch_lengths_.clear();
    batch_images_.resize(hardware_list_.size());
    batch_params_.clear();
    for (std::size_t k = 0; k < hardware_list_.size(); ++k) {
      const std::size_t i = hardware_list_[k];
      batch_data_.push_back(reinterpret_cast<const unsigned char*>(images[i].bytes.data()));
      batch_lengths_.push_back(images[i].bytes.size());
      batch_images_[k] = destination(i);
      batch_params_.push_back(params_[i]);
    }
    const int count = static_cast<int>(hardware_list_.size());
    CREMA_NVJPEG_TRY(
        nvjpegDecodeBatchedInitialize(handle_, hardware_state_, count, 1, output_format_));
    const nvjpegStatus_t status =
        nvjpegDecodeBatchedEx(handle_, hardware_state_, batch_data_.data(), batch_lengths_.data(),
                              batch_images_.data(), batch_params_.data(), stream);
    if (status == NVJPEG_STATUS_SUCCESS) return;
    if (!::crema::detail::nvjpeg_blames_image(status)) {
      ::crema::detail::nvjpeg_check(status, "nvjpegDecodeBatchedEx");
    }
    hybrid_list_.insert(hybrid_list_.begin(), hardware_list_.begin(), hardware_list_.end());
    hardware_list_.clear();
  }

  // The GPU-assisted decoder's images, each with a state of its own (its host phase may run
  // while the previous image's device phase is still queued).
  void decode_hybrid(std::span<const encoded_image> images, cudaStream_t stream) {
    while (states_.size() < hybrid_list_.size()) add_state();
    for (std::size_t k = 0; k < hybrid_list_.size(); ++k) {
      const std::size_t i = hybrid_list_[k];
      const hybrid_state& state = states_[k];
      const nvjpegStatus_t host =
          nvjpegDecodeJpegHost(handle_, hybrid_, state.state, params_[i], streams_[i]);
      if (host != NVJPEG_STATUS_SUCCESS) {
        if (::crema::detail::nvjpeg_blames_image(host)) {
          ::crema::detail::fail<format_error>("image {}: nvJPEG cannot decode it: {}",
                                              images[i].key,
                                              ::crema::detail::nvjpeg_status_name(host));
        }
        ::crema::detail::nvjpeg_check(host, "nvjpegDecodeJpegHost");
      }
      CREMA_NVJPEG_TRY(
          nvjpegDecodeJpegTransferToDevice(handle_, hybrid_, state.state, streams_[i], stream));
      nvjpegImage_t to = destination(i);
      CREMA_NVJPEG_TRY(nvjpegDecodeJpegDevice(handle_, hybrid_, state.state, &to, stream));
    }
  }

  void add_state() {
    hybrid_state state;
    try {
      CREMA_NVJPEG_TRY(nvjpegDecoderStateCreate(handle_, hybrid_, &state.state));
      CREMA_NVJPEG_TRY(nvjpegBufferPinnedCreate(handle_, nullptr, &state.pinned));
      CREMA_NVJPEG_TRY(nvjpegBufferDeviceCreate(handle_, nullptr, &state.device));
      CREMA_NVJPEG_TRY(nvjpegStateAttachPinnedBuffer(state.state, state.pinned));
      CREMA_NVJPEG_TRY(nvjpegStateAttachDeviceBuffer(state.state, state.device));
    } catch (...) {
      destroy(state);
      throw;
    }
    states_.push_back(state);
  }

  static void destroy(hybrid_state& state) noexcept {
    if (state.state != nullptr) (void)nvjpegJpegStateDestroy(state.state);
    if (state.pinned != nullptr) (void)nvjpegBufferPinnedDestroy(state.pinned);
    if (state.device != nullptr) (void)nvjpegBufferDeviceDestroy(state.device);
    state = {};
  }

  // Grown, never shrunk; only while no work of this decoder is queued (wait_idle ran).
  static void reserve(gpu_bytes& buffer, std::size_t bytes) {
    if (bytes <= buffer.size) return;
    const std::size_t size = std::max(bytes, buffer.size + buffer.size / 4);
    free_bytes(buffer);
    CREMA_CUDA_TRY(buffer.pinned ? cudaMallocHost(&buffer.data, size)
                                 : cudaMalloc(&buffer.data, size));
    buffer.size = size;
  }
  static void free_bytes(gpu_bytes& buffer) noexcept {
    if (buffer.data != nullptr) {
      (void)(buffer.pinned ? cudaFreeHost(buffer.data) : cudaFree(buffer.data));
    }
    buffer.data = nullptr;
    buffer.size = 0;
  }

  void release() noexcept {
    if (pending_ && done_ != nullptr) (void)cudaEventSynchronize(done_);
    pending_ = false;
    for (hybrid_state& state : states_) destroy(state);
    states_.clear();
    for (nvjpegJpegStream_t stream : streams_) (void)nvjpegJpegStreamDestroy(stream);
    streams_.clear();
    for (nvjpegDecodeParams_t params : params_) (void)nvjpegDecodeParamsDestroy(params);
    params_.clear();
    for (gpu_bytes* buffer : {&decoded_, &kept_, &block_, &staged_block_, &staged_samples_}) {
      free_bytes(*buffer);
    }
    if (done_ != nullptr) (void)cudaEventDestroy(done_);
    done_ = nullptr;
    if (hybrid_ != nullptr) (void)nvjpegDecoderDestroy(hybrid_);
    hybrid_ = nullptr;
    if (hardware_state_ != nullptr) (void)nvjpegJpegStateDestroy(hardware_state_);
    hardware_state_ = nullptr;
    if (handle_ != nullptr) (void)nvjpegDestroy(handle_);
    handle_ = nullptr;
  }

  Resampler resampler_;
  image_transform transform_;  // the draws, and the CPU path for what nvJPEG does not take
  image_decoder header_;       // reads each image's size
  resample_output format_;
  nvjpegOutputFormat_t output_format_ = NVJPEG_OUTPUT_RGBI;
  nvjpegHandle_t handle_ = nullptr;
  bool hardware_ = false;
  nvjpegJpegState_t hardware_state_ = nullptr;
  nvjpegJpegDecoder_t hybrid_ = nullptr;
  std::vector<hybrid_state> states_;
  std::vector<nvjpegJpegStream_t> streams_;  // one per image of the largest batch
  std::vector<nvjpegDecodeParams_t> params_;
  cudaEvent_t done_ = nullptr;  // the last batch's work on the device
  bool pending_ = false;

  std::vector<image_geometry> geometries_;
  std::vector<unsigned char> flips_;
  image_array destinations_;
  std::vector<std::size_t> destination_offsets_;
  std::vector<std::size_t> hardware_list_;
  std::vector<std::size_t> hybrid_list_;
  std::vector<std::size_t> host_;
  std::vector<const unsigned char*> batch_data_;
  std::vector<std::size_t> batch_lengths_;
  image_array batch_images_;
  std::vector<nvjpegDecodeParams_t> batch_params_;
  resample_jobs jobs_;
  std::size_t decoded_bytes_ = 0;
  gpu_bytes decoded_;                         // the decoded windows
  gpu_bytes kept_;                            // the horizontal pass's rows
  gpu_bytes block_;                           // the jobs and their table
  gpu_bytes staged_block_{.pinned = true};    // block_'s bytes, made on the host
  gpu_bytes staged_samples_{.pinned = true};  // the CPU path's samples
  nvjpeg_batch_counts counts_;
};

}  // namespace crema::cuda
