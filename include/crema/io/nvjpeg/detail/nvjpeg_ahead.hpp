#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/io/nvjpeg/detail/gpu_bytes.hpp>
#include <crema/io/nvjpeg/detail/nvjpeg_objects.hpp>
#include <crema/io/nvjpeg/nvjpeg_try.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <array>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace crema::detail {

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

}  // namespace crema::detail
