#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/error.hpp>
#include <crema/io/nvjpeg/nvjpeg_try.hpp>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

/// @file
/// nvJPEG on one device (`nvjpeg_library`), shared by the decoders and the producers that plan
/// batches, and how it decodes (`nvjpeg_options`). Component `crema::nvjpeg`.

namespace crema::cuda {

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
  /// destroying them waits on the device, and a feed's teardown after such a fault has hung on a
  /// GPU (benchmarks/HISTORY.md).
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

}  // namespace crema::cuda
