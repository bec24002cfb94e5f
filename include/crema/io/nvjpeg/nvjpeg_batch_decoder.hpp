#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/error.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/image/resample_jobs.hpp>
#include <crema/io/nvjpeg/nvjpeg_try.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/pipeline/record_shape.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
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
/// refuses) go through the CPU path and are uploaded. A batch's host work before the GPU's
/// (headers, draws, nvJPEG's parsing) is a plan of its own (`nvjpeg_batch_plan`), so that a
/// pipeline's producers make it in parallel before they borrow one of a few shared decoders.
/// Component `crema::nvjpeg`:
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

// An nvJPEG object, owned: destroyed with `Destroy`.
template <auto Destroy>
struct nvjpeg_deleter {
  template <class Handle>
  void operator()(Handle handle) const noexcept {
    (void)Destroy(handle);
  }
};
template <class Handle, auto Destroy>
using nvjpeg_owned = std::unique_ptr<std::remove_pointer_t<Handle>, nvjpeg_deleter<Destroy>>;
using nvjpeg_stream = nvjpeg_owned<nvjpegJpegStream_t, &nvjpegJpegStreamDestroy>;
using nvjpeg_params = nvjpeg_owned<nvjpegDecodeParams_t, &nvjpegDecodeParamsDestroy>;
using nvjpeg_state = nvjpeg_owned<nvjpegJpegState_t, &nvjpegJpegStateDestroy>;
using nvjpeg_pinned_buffer = nvjpeg_owned<nvjpegBufferPinned_t, &nvjpegBufferPinnedDestroy>;
using nvjpeg_device_buffer = nvjpeg_owned<nvjpegBufferDevice_t, &nvjpegBufferDeviceDestroy>;

// Leaves owned nvJPEG objects to the process's end, undestroyed: after CUDA fails for good
// (`nvjpeg_library::failed_for_good`).
template <class Object, auto Destroy>
void leave_undestroyed(std::unique_ptr<Object, nvjpeg_deleter<Destroy>>& owned) noexcept {
  (void)owned.release();
}
template <class Owned, std::size_t Extent>
void leave_undestroyed(std::span<Owned, Extent> owned) noexcept {
  for (Owned& object : owned) leave_undestroyed(object);
}

// Bytes on the current device or pinned on the host, grown, never shrunk. Memory refused is an
// allocation_error naming the bytes, the side (and the device).
class gpu_bytes {
 public:
  explicit gpu_bytes(bool pinned = false) noexcept : pinned_(pinned) {}
  gpu_bytes(const gpu_bytes&) = delete;
  gpu_bytes& operator=(const gpu_bytes&) = delete;
  ~gpu_bytes() { release(); }

  // At least `bytes`; what they held is lost. Only while no work queued reads or writes them.
  void reserve(std::size_t bytes) {
    if (bytes <= size_) return;
    const std::size_t size = std::max(bytes, size_ + size_ / 4);
    release();
    if (pinned_) {
      data_ = host_pinned_resource{}.allocate(size, aligned);
    } else {
      device_ = ::crema::cuda::current_device();
      data_ = cuda_device_resource(device_).allocate(size, aligned);
    }
    size_ = size;
  }
  void release() noexcept {
    if (data_ == nullptr) return;
    if (pinned_) {
      host_pinned_resource{}.deallocate(data_, size_, aligned);
    } else {
      cuda_device_resource(device_).deallocate(data_, size_, aligned);
    }
    data_ = nullptr;
    size_ = 0;
  }
  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::byte* bytes() const noexcept { return static_cast<std::byte*>(data_); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  static constexpr std::size_t aligned = cuda_device_resource::max_alignment;

  void* data_ = nullptr;
  std::size_t size_ = 0;
  bool pinned_;
  int device_ = 0;  // where data_ is, if not pinned
};

// For destructors: waits for `event`, made with cudaEventBlockingSync, unless the runtime already
// reports a failure, as every call does after a kernel's fault. On an H100 (2026-11-27) a
// test's teardown after such a fault hung in a driver's wait, in a process whose sleeping waits
// were these or nvJPEG's own; a wait for work the fault stopped need not end.
inline void wait_unless_failed(cudaEvent_t event) noexcept {
  const cudaError_t status = cudaEventQuery(event);
  if (status != cudaErrorNotReady) return;  // done, or failed: nothing to wait for
  (void)cudaGetLastError();
  (void)cudaEventSynchronize(event);
}

// nvJPEG's host phase of one image with a GPU-assisted decoder: its errors name the image.
inline void nvjpeg_host_phase(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder,
                              nvjpegJpegState_t state, nvjpegDecodeParams_t params,
                              nvjpegJpegStream_t parsed, std::string_view key) {
  const nvjpegStatus_t status = nvjpegDecodeJpegHost(handle, decoder, state, params, parsed);
  if (status == NVJPEG_STATUS_SUCCESS) return;
  if (nvjpeg_blames_image(status)) {
    fail<format_error>("image {}: nvJPEG cannot decode it: {}", key, nvjpeg_status_name(status));
  }
  nvjpeg_check(status, "nvjpegDecodeJpegHost");
}

// Grows `streams` (or `params`) to `n`, made with `handle`.
inline void grow_nvjpeg(nvjpegHandle_t handle, std::size_t n, std::vector<nvjpeg_stream>& streams) {
  while (streams.size() < n) {
    nvjpegJpegStream_t stream = nullptr;
    CREMA_NVJPEG_TRY(nvjpegJpegStreamCreate(handle, &stream));
    streams.emplace_back(stream);
  }
}
inline void grow_nvjpeg(nvjpegHandle_t handle, std::size_t n, std::vector<nvjpeg_params>& params) {
  while (params.size() < n) {
    nvjpegDecodeParams_t made = nullptr;
    CREMA_NVJPEG_TRY(nvjpegDecodeParamsCreate(handle, &made));
    params.emplace_back(made);
  }
}

// The decode parameters of one window in `format`.
inline void set_nvjpeg_window(nvjpegDecodeParams_t params, nvjpegOutputFormat_t format,
                              const pixel_window& w) {
  CREMA_NVJPEG_TRY(nvjpegDecodeParamsSetOutputFormat(params, format));
  CREMA_NVJPEG_TRY(nvjpegDecodeParamsSetROI(params, static_cast<int>(w.left),
                                            static_cast<int>(w.top), static_cast<int>(w.width),
                                            static_cast<int>(w.height)));
}

// Samples decoded on the host, uploaded on `stream` to their places in `out`: `from`'s k-th
// sample (of `sample` values) is image `images[k]`'s, in order; one copy a run of consecutive
// images.
template <class T>
void upload_samples(std::span<const std::size_t> images, const T* from, T* out, std::size_t sample,
                    cudaStream_t stream) {
  for (std::size_t k = 0; k < images.size();) {
    std::size_t run = 1;
    while (k + run < images.size() && images[k + run] == images[k] + run) ++run;
    CREMA_CUDA_TRY(cudaMemcpyAsync(out + images[k] * sample, from + k * sample,
                                   run * sample * sizeof(T), cudaMemcpyHostToDevice, stream));
    k += run;
  }
}

// The GPU-assisted decoding a plan's maker does itself (`nvjpeg_batch_plan::decode_hybrid`), on
// a stream of its own, into device memory of its own from which a decoder copies the windows in
// its turn. Each image has a state of its own for each of the library's GPU-assisted decoders
// (a lane each); the host phases write two pinned buffers in turn and the transfers one device
// buffer, so the host decodes an image while the GPU decodes the one before, and waits for that
// one before queueing the next (as NVIDIA's DALI does on its decoding threads). Made and used with
// the plan's device current.
class nvjpeg_ahead {
 public:
  explicit nvjpeg_ahead(nvjpegHandle_t handle) : stream_(cuda::current_device(), host_wait::sleep) {
    for (nvjpeg_pinned_buffer& buffer : pinned_) {
      nvjpegBufferPinned_t made = nullptr;
      CREMA_NVJPEG_TRY(nvjpegBufferPinnedCreate(handle, nullptr, &made));
      buffer.reset(made);
    }
    nvjpegBufferDevice_t made = nullptr;
    CREMA_NVJPEG_TRY(nvjpegBufferDeviceCreate(handle, nullptr, &made));
    device_.reset(made);
    CREMA_CUDA_TRY(
        cudaEventCreateWithFlags(&released_, cudaEventDisableTiming | cudaEventBlockingSync));
  }
  nvjpeg_ahead(const nvjpeg_ahead&) = delete;
  nvjpeg_ahead& operator=(const nvjpeg_ahead&) = delete;
  ~nvjpeg_ahead() {
    if (cuda_failed_for_good(released_)) {
      // Nothing queued will end: the nvJPEG objects on the device are left undestroyed.
      leave_undestroyed(std::span(pinned_));
      leave_undestroyed(device_);
      for (std::vector<nvjpeg_state>& states : states_) leave_undestroyed(std::span(states));
    } else {
      // What is queued reads the buffers and the plan's streams destroyed after.
      if (release_pending_) wait_unless_failed(released_);
      if (last_.native_handle() != nullptr) wait_unless_failed(last_.native_handle());
    }
    (void)cudaEventDestroy(released_);
  }

  // Waits until the GPU's part of the last image is done: the transfers queued read the plan's
  // parsed streams.
  void wait_idle() const { last_.wait(); }

  // Starts a batch whose windows take `bytes` (more than 0), and returns where they go. The GPU
  // waits for a decoder's copy of the last batch's before it writes them.
  [[nodiscard]] std::byte* begin(std::size_t bytes) {
    last_.wait();  // the pinned buffers are free
    if (release_pending_ && bytes > windows_.size()) {
      CREMA_CUDA_TRY(cudaEventSynchronize(released_));
      release_pending_ = false;
    }
    windows_.reserve(bytes);
    if (release_pending_) {
      CREMA_CUDA_TRY(cudaStreamWaitEvent(stream_.native_handle(), released_, 0));
      release_pending_ = false;  // what is queued from now on waits for it, and last_ after it
    }
    return windows_.bytes();
  }

  // Decodes one image of the batch with `decoder` (of lane `lane`) and that lane's k-th state,
  // into `to`.
  void decode(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder, std::size_t lane, std::size_t k,
              nvjpegJpegStream_t parsed, nvjpegDecodeParams_t params, nvjpegImage_t to,
              std::string_view key) {
    nvjpegJpegState_t state = state_of(handle, decoder, lane, k);
    CREMA_NVJPEG_TRY(nvjpegStateAttachPinnedBuffer(state, pinned_[next_pinned_].get()));
    next_pinned_ ^= 1U;  // this one's last image, two before, was waited for in the last call
    nvjpeg_host_phase(handle, decoder, state, params, parsed, key);
    last_.wait();  // the device buffer is the image before's until its GPU part is done
    CREMA_NVJPEG_TRY(nvjpegStateAttachDeviceBuffer(state, device_.get()));
    const cudaStream_t stream = stream_.native_handle();
    CREMA_NVJPEG_TRY(nvjpegDecodeJpegTransferToDevice(handle, decoder, state, parsed, stream));
    CREMA_NVJPEG_TRY(nvjpegDecodeJpegDevice(handle, decoder, state, &to, stream));
    last_ = stream_.record();
  }

  // Queues on a decoder's `stream` the copy of the windows' first `bytes` to `to`, after the
  // GPU's part of the batch; the next batch's waits for it.
  void hand_over(std::byte* to, std::size_t bytes, cudaStream_t stream) {
    if (last_.native_handle() != nullptr) {
      CREMA_CUDA_TRY(cudaStreamWaitEvent(stream, last_.native_handle(), 0));
    }
    CREMA_CUDA_TRY(cudaMemcpyAsync(to, windows_.data(), bytes, cudaMemcpyDeviceToDevice, stream));
    CREMA_CUDA_TRY(cudaEventRecord(released_, stream));
    release_pending_ = true;
  }

 private:
  nvjpegJpegState_t state_of(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder, std::size_t lane,
                             std::size_t k) {
    std::vector<nvjpeg_state>& states = states_[lane];
    while (states.size() <= k) {
      nvjpegJpegState_t made = nullptr;
      CREMA_NVJPEG_TRY(nvjpegDecoderStateCreate(handle, decoder, &made));
      states.emplace_back(made);
    }
    return states[k].get();
  }

  cuda_stream stream_;  // destroyed last
  std::array<nvjpeg_pinned_buffer, 2> pinned_;
  nvjpeg_device_buffer device_;
  std::array<std::vector<nvjpeg_state>, 2> states_;  // by lane, by image
  gpu_bytes windows_;
  cuda_event last_;                 // the GPU's part of the last image queued
  cudaEvent_t released_ = nullptr;  // a decoder's copy of the windows
  bool release_pending_ = false;
  unsigned next_pinned_ = 0;
};

[[nodiscard]] inline image_transform_options at_full_size(image_transform_options options) {
  options.decode.dct_scaling = false;  // nvJPEG does not scale the DCT
  return options;
}

[[nodiscard]] inline nvjpegOutputFormat_t nvjpeg_output_of(
    const image_transform_options& options) noexcept {
  if (options.decode.channels == 1) return NVJPEG_OUTPUT_Y;
  return options.decode.order == channel_order::rgb ? NVJPEG_OUTPUT_RGBI : NVJPEG_OUTPUT_BGRI;
}

}  // namespace crema::detail

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

/// @brief How an `nvjpeg_batch_decoder` decodes.
struct nvjpeg_options {
  /// Use the GPU's hardware JPEG engine (A100, H100, ...) for the images it takes.
  bool hardware = true;
  /// Chroma upsampled by interpolation (as libjpeg-turbo's default "fancy" upsampling), not
  /// by repeating samples: pixels closer to the CPU path's.
  bool interpolate_chroma = true;
  /// Of the images the hardware engine does not decode, those whose window needs the Huffman
  /// decoding of more pixels than this have it done on the GPU; the others' is done on the
  /// host, by the thread that plans them (`nvjpeg_batch_plan::decode_hybrid`) or decodes them;
  /// each the other way where nvJPEG's decoder for it does not take the image. A window needs
  /// the image's rows down to its own last one (entropy-coded data is read in order): the
  /// image's width times the window's bottom row. On one core, Huffman decoding takes longest
  /// for the most pixels. NVIDIA's DALI draws the same line, by default at a million pixels
  /// (counting the window's width where this counts the image's).
  std::size_t gpu_huffman_above_pixels = 1'000'000;
  /// The share of each batch's JPEGs the hardware engine takes that it decodes, the first ones;
  /// those after go to the GPU-assisted decoder (decoded ahead by a batcher's producers, the
  /// Huffman decoding on their threads): for hosts where the engine is the bound and cores are
  /// idle. From 0 to 1; 1 (the default) leaves the engine every image it takes. NVIDIA's DALI
  /// sends 35% past its engine by default (its `hw_decoder_load`, 0.65).
  double hardware_share = 1.0;
};

/// @brief Where the images of the last batch were decoded, and how long its `decode` took on
/// the host (steady clock).
struct nvjpeg_batch_counts {
  std::size_t hardware = 0;  ///< nvJPEG's hardware engine
  std::size_t hybrid = 0;    ///< nvJPEG's GPU-assisted decoder, in `decode`
  /// nvJPEG's GPU-assisted decoder, by the plan's maker (`nvjpeg_batch_plan::decode_hybrid`)
  std::size_t ahead = 0;
  std::size_t host = 0;  ///< the CPU path (`image_transform`), then uploaded
  /// waiting for the decoder's previous batch to be done on the device
  std::chrono::nanoseconds waited{0};
  /// queueing the work: nvJPEG's host part, the kernels, the CPU path's images
  std::chrono::nanoseconds queued{0};
};

/// @brief nvJPEG on one device: its library handle (the hardware engine's backend where the GPU
/// has one and `nvjpeg_options::hardware` asks for it, else the default backend) and its two
/// GPU-assisted decoders, whose Huffman decoding is the host's or the GPU's. Shared, as nvJPEG
/// allows, by the threads that use it, each with parsed streams, states and buffers of its own:
/// a decoder's (`basic_nvjpeg_batch_decoder`), or the producers' that plan batches
/// (`nvjpeg_batch_plan`). Made with its device current.
class nvjpeg_library {
 public:
  /// The GPU-assisted decoders, by where their Huffman decoding runs.
  enum class lane : std::uint8_t { host_huffman = 0, gpu_huffman = 1 };

  /// @throws crema::config_error for options out of range (`check`)
  /// @throws crema::cuda_error if nvJPEG cannot be started (no device, no library)
  explicit nvjpeg_library(nvjpeg_options options = {})
      : gpu_huffman_above_(options.gpu_huffman_above_pixels),
        hardware_share_(options.hardware_share) {
    check(options);
    const unsigned flags =
        options.interpolate_chroma ? unsigned{NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION} : 0U;
    // The hardware backend's handle also makes the GPU-assisted decoders; without the engine
    // (or the wish for it), the default backend's.
    if (options.hardware && nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, flags,
                                           &handle_) == NVJPEG_STATUS_SUCCESS) {
      hardware_ = true;
    } else {
      handle_ = nullptr;
      CREMA_NVJPEG_TRY(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, flags, &handle_));
    }
    for (const lane which : {lane::host_huffman, lane::gpu_huffman}) {
      const nvjpegStatus_t made = nvjpegDecoderCreate(
          handle_, which == lane::host_huffman ? NVJPEG_BACKEND_HYBRID : NVJPEG_BACKEND_GPU_HYBRID,
          &decoders_[static_cast<std::size_t>(which)]);
      if (made != NVJPEG_STATUS_SUCCESS) {
        release();
        ::crema::detail::nvjpeg_check(made, "nvjpegDecoderCreate");
      }
    }
    if (const cudaError_t made = cudaEventCreateWithFlags(&probe_, cudaEventDisableTiming);
        made != cudaSuccess) {
      probe_ = nullptr;
      release();
      ::crema::detail::cuda_check(made, "cudaEventCreateWithFlags");
    }
  }
  nvjpeg_library(const nvjpeg_library&) = delete;
  nvjpeg_library& operator=(const nvjpeg_library&) = delete;
  ~nvjpeg_library() { release(); }

  /// @throws crema::config_error for a `hardware_share` outside 0 to 1
  static void check(const nvjpeg_options& options) {
    if (!(options.hardware_share >= 0.0 && options.hardware_share <= 1.0)) {
      ::crema::detail::fail<config_error>(
          "nvjpeg_options: hardware_share must be from 0 to 1, got {}", options.hardware_share);
    }
  }

  [[nodiscard]] nvjpegHandle_t handle() const noexcept { return handle_; }
  /// @return whether the hardware engine is in use
  [[nodiscard]] bool hardware() const noexcept { return hardware_; }
  /// @return the GPU-assisted decoder of `which` lane (its states are each decoding thread's)
  [[nodiscard]] nvjpegJpegDecoder_t decoder(lane which) const noexcept {
    return decoders_[static_cast<std::size_t>(which)];
  }

  /// @return the share of a batch's JPEGs the engine takes that it decodes
  [[nodiscard]] double hardware_share() const noexcept { return hardware_share_; }

  /// @return whether CUDA fails every call on this library's device for good, as after a
  /// kernel's fault (`detail::cuda_failed_for_good`). The nvJPEG objects that hold memory or
  /// work on the device (handles, decoders, states, buffers) are then left to the process's end:
  /// on an H100 (2026-11-27) a feed's teardown after such a fault hung, and destroying them waits
  /// on the device.
  [[nodiscard]] bool failed_for_good() const noexcept {
    return probe_ != nullptr && ::crema::detail::cuda_failed_for_good(probe_);
  }

  /// @return the lane of the GPU-assisted decoder for a parsed image decoded with `params`,
  /// whose window needs the Huffman decoding of `pixels`: the GPU's Huffman decoding above
  /// `nvjpeg_options::gpu_huffman_above_pixels`, the host's for the others, each where its
  /// decoder takes the image and the other lane otherwise (NVIDIA's DALI gives the GPU's no
  /// progressive JPEG); none where neither takes it
  [[nodiscard]] std::optional<lane> gpu_assisted_lane(nvjpegJpegStream_t parsed,
                                                      nvjpegDecodeParams_t params,
                                                      std::size_t pixels) const {
    const auto takes = [&](lane which) {
      int refused = 1;  // nvJPEG's "is_supported": 0 when it takes the image
      return nvjpegDecoderJpegSupported(decoder(which), parsed, params, &refused) ==
                 NVJPEG_STATUS_SUCCESS &&
             refused == 0;
    };
    const lane first = pixels > gpu_huffman_above_ ? lane::gpu_huffman : lane::host_huffman;
    const lane second = first == lane::gpu_huffman ? lane::host_huffman : lane::gpu_huffman;
    if (takes(first)) return first;
    if (takes(second)) return second;
    return std::nullopt;
  }

 private:
  void release() noexcept {
    if (!failed_for_good()) {
      for (nvjpegJpegDecoder_t& made : decoders_) {
        if (made != nullptr) (void)nvjpegDecoderDestroy(made);
      }
      (void)nvjpegDestroy(handle_);
    }
    if (probe_ != nullptr) (void)cudaEventDestroy(probe_);
  }

  cudaEvent_t probe_ = nullptr;  // never recorded: its query answers for the device
  nvjpegHandle_t handle_ = nullptr;
  bool hardware_ = false;
  std::array<nvjpegJpegDecoder_t, 2> decoders_{};  // by lane
  std::size_t gpu_huffman_above_;
  double hardware_share_;
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
  /// @brief A decoder with an nvJPEG of its own.
  /// @throws crema::config_error for options an `image_transform` refuses, or colour jitter
  /// @throws crema::cuda_error if nvJPEG cannot be started (no device, no library)
  explicit basic_nvjpeg_batch_decoder(image_transform_options options, nvjpeg_options decoding = {},
                                      Resampler resampler = {})
      : basic_nvjpeg_batch_decoder(library_for(options, decoding), std::move(options),
                                   std::move(resampler)) {}
  /// @brief A decoder sharing `library` (its device's nvJPEG) with other threads: decoders or
  /// producers planning batches.
  /// @throws crema::config_error for options an `image_transform` refuses, or colour jitter
  /// @throws crema::cuda_error if nvJPEG fails
  basic_nvjpeg_batch_decoder(std::shared_ptr<const nvjpeg_library> library,
                             image_transform_options options, Resampler resampler = {})
      : library_(std::move(library)),
        resampler_(std::move(resampler)),
        transform_(::crema::detail::at_full_size(std::move(options))),
        output_format_(::crema::detail::nvjpeg_output_of(transform_.options())) {
    check_options(transform_.options());
    const image_transform_options& o = transform_.options();
    format_.chw = o.layout == pixel_layout::chw;
    for (std::size_t c = 0; c < 3; ++c) {
      format_.mean[c] = o.mean[c];
      format_.std[c] = o.std[c];
    }
    try {
      if (library_->hardware()) {
        CREMA_NVJPEG_TRY(nvjpegJpegStateCreate(library_->handle(), &hardware_state_));
      }
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
  [[nodiscard]] bool hardware() const noexcept { return library_->hardware(); }
  /// @return the nvJPEG it decodes with
  [[nodiscard]] const std::shared_ptr<const nvjpeg_library>& library() const noexcept {
    return library_;
  }
  /// @return where the images of the last batch were decoded, and its host times
  [[nodiscard]] nvjpeg_batch_counts last_batch() const noexcept { return counts_; }

  /// @brief Plans `images` (as `nvjpeg_batch_plan::make`, then `decode_hybrid`) and decodes
  /// them: sample i into `out + i * shape().elements()` (device memory, float normalised or
  /// std::uint8_t), on `stream`. Returns once the host's part is done (the CPU path's images,
  /// nvJPEG's Huffman decoding on the host). Waits first for the previous batch's work on the
  /// device to be done with this decoder's buffers.
  /// @throws crema::format_error naming the image's key for an image that does not decode
  /// @throws crema::cuda_error if nvJPEG or the CUDA runtime fails
  template <class T>
  void decode(std::span<const encoded_image> images, T* out, cudaStream_t stream) {
    if (!own_plan_) own_plan_.emplace(library_, transform_.options());
    own_plan_->make(images);
    own_plan_->decode_hybrid(images);
    decode(*own_plan_, images, out, stream);
  }

  /// @brief Queues the decoding of `images` as `plan` (made for them, with this decoder's
  /// transform and any nvJPEG library of its device) says, sample i into `out + i *
  /// shape().elements()`, on `stream`. Waits first for the previous batch's work on the device
  /// to be done with this decoder's buffers. The images' bytes (and the samples of
  /// `nvjpeg_batch_plan::decode_on_host`) are read until the work queued is done; the plan's
  /// windows decoded ahead (`nvjpeg_batch_plan::decode_hybrid`) are copied on `stream` before
  /// its next `decode_hybrid` writes them; the rest of the plan, only until this returns.
  /// @throws crema::config_error for a plan of another size or shape, or whose CPU-path samples
  ///         are of another type
  /// @throws crema::format_error naming the image's key for an image that does not decode
  /// @throws crema::cuda_error if nvJPEG or the CUDA runtime fails
  template <class T>
  void decode(const nvjpeg_batch_plan& plan, std::span<const encoded_image> images, T* out,
              cudaStream_t stream) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::uint8_t>,
                  "crema: an nvjpeg_batch_decoder writes float or std::uint8_t samples");
    check_plan(plan, images.size(), shape());
    const std::size_t sample = shape().elements();
    if (plan.host_samples_ != nullptr && plan.host_sample_bytes_ != sample * sizeof(T)) {
      ::crema::detail::fail<config_error>(
          "nvjpeg_batch_decoder: a plan's CPU-path samples of {} bytes for samples of {}",
          plan.host_sample_bytes_, sample * sizeof(T));
    }
    const auto start = std::chrono::steady_clock::now();
    wait_idle();
    const auto waited = std::chrono::steady_clock::now();
    // Grown only now, with no work of this decoder queued.
    decoded_.reserve(plan.decoded_bytes_);
    kept_.reserve(plan.jobs_.kept_bytes());
    block_.reserve(plan.jobs_.block_bytes());
    staged_block_.reserve(plan.jobs_.block_bytes());
    if (plan.host_samples_ == nullptr) {
      staged_samples_.reserve(plan.host_list_.size() * sample * sizeof(T));
    }

    plan.jobs_.write_block(staged_block_.bytes());
    pending_ = true;  // from the first queued work on, the next call and the destructor wait
    try {
      queue(plan, images, out, stream);
    } catch (...) {
      // What was queued before the failure still reads this decoder's buffers: the next call
      // waits for it.
      (void)cudaEventRecord(done_, stream);
      throw;
    }
    CREMA_CUDA_TRY(cudaEventRecord(done_, stream));
    counts_ = {on_engine_,
               hybrid_list_.size(),
               plan.ahead_list_.size(),
               plan.host_list_.size(),
               waited - start,
               std::chrono::steady_clock::now() - waited};
  }

 private:
  // nvjpegImage_t is an unnamed struct, which nvcc 13.0's front end cannot destroy in a
  // std::vector (an internal error): an array that grows instead.
  struct image_array {
    std::unique_ptr<nvjpegImage_t[]> images;
    std::size_t capacity = 0;

    void resize(std::size_t n) {
      if (n > capacity) {
        images.reset(new nvjpegImage_t[n]());
        capacity = n;
      }
    }
    nvjpegImage_t& operator[](std::size_t i) noexcept { return images[i]; }
    nvjpegImage_t* data() noexcept { return images.get(); }
  };
  // A state of the GPU-assisted decoder with its buffers (the state destroyed first).
  struct hybrid_state {
    ::crema::detail::nvjpeg_pinned_buffer pinned;
    ::crema::detail::nvjpeg_device_buffer device;
    ::crema::detail::nvjpeg_state state;
  };

  static std::shared_ptr<const nvjpeg_library> library_for(const image_transform_options& options,
                                                           nvjpeg_options decoding) {
    check_options(options);  // before nvJPEG is started
    return std::make_shared<const nvjpeg_library>(decoding);
  }

  static void check_plan(const nvjpeg_batch_plan& plan, std::size_t images, record_shape shape) {
    if (plan.size() != images || plan.shape() != shape) {
      ::crema::detail::fail<config_error>(
          "nvjpeg_batch_decoder: a plan of {} images of {} elements for a batch of {} of {}",
          plan.size(), plan.shape().elements(), images, shape.elements());
    }
  }

  // The copy of the jobs, nvJPEG's decoding, the resampling and the CPU path's samples, queued.
  template <class T>
  void queue(const nvjpeg_batch_plan& plan, std::span<const encoded_image> images, T* out,
             cudaStream_t stream) {
    const std::size_t sample = shape().elements();
    const resample_jobs& jobs = plan.jobs_;
    if (jobs.block_bytes() > 0) {
      CREMA_CUDA_TRY(cudaMemcpyAsync(block_.data(), staged_block_.data(), jobs.block_bytes(),
                                     cudaMemcpyHostToDevice, stream));
    }
    decode_on_hardware(plan, images, stream);
    decode_hybrid_in_turn(plan, images, stream);
    if (!plan.ahead_list_.empty()) {
      plan.ahead_->hand_over(decoded_.bytes() + plan.head_bytes_, plan.ahead_bytes_, stream);
    }
    const auto* block = block_.bytes();
    resampler_(
        resample_launch<T>{reinterpret_cast<const resample_job*>(block),
                           reinterpret_cast<const std::int32_t*>(block + jobs.table_offset()),
                           static_cast<std::int32_t>(jobs.jobs().size()), jobs.most_kept_rows(),
                           jobs.most_out_rows(), format_,
                           static_cast<const std::uint8_t*>(decoded_.data()),
                           static_cast<std::uint8_t*>(kept_.data()), out},
        stream);
    // The CPU path's images: decoded by the plan's maker on its own thread, or here, each
    // uploaded as soon as it is decoded.
    if (plan.host_samples_ != nullptr) {
      ::crema::detail::upload_samples(std::span<const std::size_t>(plan.host_list_),
                                      reinterpret_cast<const T*>(plan.host_samples_), out, sample,
                                      stream);
      return;
    }
    T* staged = static_cast<T*>(staged_samples_.data());
    for (std::size_t k = 0; k < plan.host_list_.size(); ++k) {
      const std::size_t i = plan.host_list_[k];
      const std::span<T> to(staged + k * sample, sample);
      transform_.apply(images[i].bytes, plan.geometries_[i], plan.flips_[i] != 0, to,
                       images[i].key);
      CREMA_CUDA_TRY(cudaMemcpyAsync(out + i * sample, to.data(), sample * sizeof(T),
                                     cudaMemcpyHostToDevice, stream));
    }
  }

  // The host waits for the previous batch's work before the next is queued: its buffers are
  // reused, and the stream's order alone would not keep them safe, as nvJPEG's engine has been
  // reported to write its destinations before work queued ahead of it on its stream has run
  // (pytorch/torchcodec pull request 1634, 2026).
  void wait_idle() {
    if (pending_) {
      CREMA_CUDA_TRY(cudaEventSynchronize(done_));
      pending_ = false;
    }
  }

  nvjpegImage_t destination(const nvjpeg_batch_plan& plan, std::size_t i) const noexcept {
    nvjpegImage_t image{};
    image.channel[0] = static_cast<unsigned char*>(decoded_.data()) + plan.offsets_[i];
    image.pitch[0] = plan.pitches_[i];
    return image;
  }

  // The hardware engine's images in one call. An image that spoils the batch sends the whole
  // batch to the GPU-assisted decoder, one image at a time, whose error then names it.
  void decode_on_hardware(const nvjpeg_batch_plan& plan, std::span<const encoded_image> images,
                          cudaStream_t stream) {
    hybrid_list_.assign(plan.hybrid_list_.begin(), plan.hybrid_list_.end());
    on_engine_ = 0;
    const std::vector<std::size_t>& engine = plan.hardware_list_;
    if (engine.empty()) return;
    if (!library_->hardware()) {  // planned where the engine started, decoded where it did not
      hybrid_list_.insert(hybrid_list_.begin(), engine.begin(), engine.end());
      return;
    }
    ::crema::detail::grow_nvjpeg(library_->handle(), engine.size(), params_);
    batch_data_.clear();
    batch_lengths_.clear();
    batch_images_.resize(engine.size());
    batch_params_.clear();
    for (std::size_t k = 0; k < engine.size(); ++k) {
      const std::size_t i = engine[k];
      batch_data_.push_back(reinterpret_cast<const unsigned char*>(images[i].bytes.data()));
      batch_lengths_.push_back(images[i].bytes.size());
      batch_images_[k] = destination(plan, i);
      ::crema::detail::set_nvjpeg_window(params_[k].get(), output_format_,
                                         plan.geometries_[i].window);
      batch_params_.push_back(params_[k].get());
    }
    // nvJPEG's batched state is set up once for a batch size (and again after a failed batch),
    // not before every batch: in a shared decoder's turn, each call costs the producers waiting.
    const int count = static_cast<int>(engine.size());
    if (count != initialized_for_) {
      initialized_for_ = 0;
      if (count > pooled_for_) pool_engine_buffers(plan, engine, count);
      CREMA_NVJPEG_TRY(nvjpegDecodeBatchedInitialize(library_->handle(), hardware_state_, count, 1,
                                                     output_format_));
      initialized_for_ = count;
    }
    const nvjpegStatus_t status = nvjpegDecodeBatchedEx(
        library_->handle(), hardware_state_, batch_data_.data(), batch_lengths_.data(),
        batch_images_.data(), batch_params_.data(), stream);
    if (status == NVJPEG_STATUS_SUCCESS) {
      on_engine_ = engine.size();
      return;
    }
    initialized_for_ = 0;  // a failed batch leaves the state to be set up again
    if (!::crema::detail::nvjpeg_blames_image(status)) {
      ::crema::detail::nvjpeg_check(status, "nvjpegDecodeBatchedEx");
    }
    hybrid_list_.insert(hybrid_list_.begin(), engine.begin(), engine.end());
  }

  // Has the engine keep its buffers in a pool, set up for `count` images at once of the largest
  // frame the plan's windows reach, instead of allocating them as batches come: each free is a
  // wait for the whole device, and NVIDIA's DALI sets the pool up for this reason (its pull
  // requests 2544 and 3067). An optimisation only: where nvJPEG refuses it, batches decode as
  // they would without it.
  void pool_engine_buffers(const nvjpeg_batch_plan& plan, std::span<const std::size_t> engine,
                           int count) {
    std::size_t height = 1;
    std::size_t width = 1;
    for (const std::size_t i : engine) {
      const pixel_window& w = plan.geometries_[i].window;
      height = std::max(height, w.top + w.height);
      width = std::max(width, w.left + w.width);
    }
    const nvjpegStatus_t status = nvjpegDecodeBatchedPreAllocate(
        library_->handle(), hardware_state_, count, static_cast<int>(width),
        static_cast<int>(height), NVJPEG_CSS_444, output_format_);
    pooled_for_ = status == NVJPEG_STATUS_SUCCESS ? count : std::numeric_limits<int>::max();
  }

  // The GPU-assisted decoder's images, each parsed again with this decoder's nvJPEG and with a
  // state of its own (its host phase may run while the previous image's device phase is still
  // queued), of the lane the library picks.
  void decode_hybrid_in_turn(const nvjpeg_batch_plan& plan, std::span<const encoded_image> images,
                             cudaStream_t stream) {
    const nvjpegHandle_t handle = library_->handle();
    // Parameters after the engine's images', which are left as its call was given them.
    const std::size_t first = plan.hardware_list_.size();
    ::crema::detail::grow_nvjpeg(handle, hybrid_list_.size(), streams_);
    ::crema::detail::grow_nvjpeg(handle, first + hybrid_list_.size(), params_);
    for (std::size_t k = 0; k < hybrid_list_.size(); ++k) {
      const std::size_t i = hybrid_list_[k];
      nvjpegJpegStream_t parsed = streams_[k].get();
      nvjpegDecodeParams_t params = params_[first + k].get();
      const auto* data = reinterpret_cast<const unsigned char*>(images[i].bytes.data());
      const nvjpegStatus_t parse =
          nvjpegJpegStreamParse(handle, data, images[i].bytes.size(), 0, 0, parsed);
      if (parse != NVJPEG_STATUS_SUCCESS && ::crema::detail::nvjpeg_blames_image(parse)) {
        ::crema::detail::fail<format_error>("image {}: nvJPEG cannot decode it: {}", images[i].key,
                                            ::crema::detail::nvjpeg_status_name(parse));
      }
      ::crema::detail::nvjpeg_check(parse, "nvjpegJpegStreamParse");
      ::crema::detail::set_nvjpeg_window(params, output_format_, plan.geometries_[i].window);
      const std::optional<nvjpeg_library::lane> lane =
          library_->gpu_assisted_lane(parsed, params, plan.huffman_pixels_[i]);
      if (!lane) {
        ::crema::detail::fail<format_error>(
            "image {}: nvJPEG's GPU-assisted decoders do not take it", images[i].key);
      }
      const nvjpegJpegDecoder_t decoder = library_->decoder(*lane);
      nvjpegJpegState_t state = state_of(*lane, k);
      ::crema::detail::nvjpeg_host_phase(handle, decoder, state, params, parsed, images[i].key);
      CREMA_NVJPEG_TRY(nvjpegDecodeJpegTransferToDevice(handle, decoder, state, parsed, stream));
      nvjpegImage_t to = destination(plan, i);
      CREMA_NVJPEG_TRY(nvjpegDecodeJpegDevice(handle, decoder, state, &to, stream));
    }
  }

  // Lane `lane`'s k-th state, made with its buffers on first need.
  nvjpegJpegState_t state_of(nvjpeg_library::lane lane, std::size_t k) {
    std::vector<hybrid_state>& states = states_[static_cast<std::size_t>(lane)];
    const nvjpegHandle_t handle = library_->handle();
    while (states.size() <= k) {
      hybrid_state made;
      nvjpegBufferPinned_t pinned = nullptr;
      CREMA_NVJPEG_TRY(nvjpegBufferPinnedCreate(handle, nullptr, &pinned));
      made.pinned.reset(pinned);
      nvjpegBufferDevice_t device = nullptr;
      CREMA_NVJPEG_TRY(nvjpegBufferDeviceCreate(handle, nullptr, &device));
      made.device.reset(device);
      nvjpegJpegState_t state = nullptr;
      CREMA_NVJPEG_TRY(nvjpegDecoderStateCreate(handle, library_->decoder(lane), &state));
      made.state.reset(state);
      CREMA_NVJPEG_TRY(nvjpegStateAttachPinnedBuffer(state, pinned));
      CREMA_NVJPEG_TRY(nvjpegStateAttachDeviceBuffer(state, device));
      states.push_back(std::move(made));
    }
    return states[k].state.get();
  }

  void release() noexcept {
    // After a failure for good, nothing queued ends, and the nvJPEG objects on the device are
    // left undestroyed (the plan's decoding ahead leaves its own).
    const bool lost = library_ != nullptr && library_->failed_for_good();
    if (pending_ && done_ != nullptr && !lost) ::crema::detail::wait_unless_failed(done_);
    pending_ = false;
    own_plan_.reset();
    streams_.clear();
    params_.clear();
    for (std::vector<hybrid_state>& states : states_) {
      if (lost) {
        for (hybrid_state& made : states) {
          ::crema::detail::leave_undestroyed(made.state);
          ::crema::detail::leave_undestroyed(made.device);
          ::crema::detail::leave_undestroyed(made.pinned);
        }
      }
      states.clear();
    }
    if (lost) hardware_state_ = nullptr;
    for (::crema::detail::gpu_bytes* buffer :
         {&decoded_, &kept_, &block_, &staged_block_, &staged_samples_}) {
      buffer->release();
    }
    if (done_ != nullptr) (void)cudaEventDestroy(done_);
    done_ = nullptr;
    if (hardware_state_ != nullptr) (void)nvjpegJpegStateDestroy(hardware_state_);
    hardware_state_ = nullptr;
  }

  std::shared_ptr<const nvjpeg_library> library_;  // destroyed last: what follows is its
  Resampler resampler_;
  image_transform transform_;  // the CPU path, for what nvJPEG does not take
  nvjpegOutputFormat_t output_format_;
  resample_output format_;
  std::optional<nvjpeg_batch_plan> own_plan_;  // decode(images, ...)'s, made on first need
  nvjpegJpegState_t hardware_state_ = nullptr;
  int initialized_for_ = 0;  // the batch size hardware_state_ is set up for; 0: none
  int pooled_for_ = 0;       // the batch size its pool is set up for (the largest yet)
  std::array<std::vector<hybrid_state>, 2> states_;  // by lane
  // The engine's and the GPU-assisted decoder's images' parameters, and the latter parsed
  // again: the plan's are its producer's, maybe of another nvJPEG handle.
  std::vector<::crema::detail::nvjpeg_stream> streams_;
  std::vector<::crema::detail::nvjpeg_params> params_;
  cudaEvent_t done_ = nullptr;  // the last batch's work on the device
  bool pending_ = false;

  std::size_t on_engine_ = 0;             // the last batch's images decoded by the engine
  std::vector<std::size_t> hybrid_list_;  // and by the GPU-assisted decoder
  std::vector<const unsigned char*> batch_data_;
  std::vector<std::size_t> batch_lengths_;
  image_array batch_images_;
  std::vector<nvjpegDecodeParams_t> batch_params_;
  ::crema::detail::gpu_bytes decoded_;               // the decoded windows
  ::crema::detail::gpu_bytes kept_;                  // the horizontal pass's rows
  ::crema::detail::gpu_bytes block_;                 // the jobs and their table
  ::crema::detail::gpu_bytes staged_block_{true};    // block_'s bytes, made on the host (pinned)
  ::crema::detail::gpu_bytes staged_samples_{true};  // the CPU path's samples (pinned)
  nvjpeg_batch_counts counts_;
};

}  // namespace crema::cuda
