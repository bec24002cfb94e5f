#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/image/resample_jobs.hpp>
#include <crema/io/nvjpeg/detail/gpu_bytes.hpp>
#include <crema/io/nvjpeg/detail/nvjpeg_objects.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_plan.hpp>
#include <crema/io/nvjpeg/nvjpeg_library.hpp>
#include <crema/io/nvjpeg/nvjpeg_try.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <algorithm>
#include <array>
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

namespace crema::cuda {

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
