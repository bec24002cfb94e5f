#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/memory/resource.hpp>

#include <cuda_runtime_api.h>

#include <utility>

namespace crema {

/// @brief A CUDA event recorded on a `cuda_stream` (owning, move-only).
///
/// A default-constructed event has nothing to wait for and is always ready. `ready()` never
/// blocks; `wait()` blocks the calling thread until the event has completed. Thread-safe as the
/// CUDA runtime is; never allocates on the host.
class cuda_event {
 public:
  cuda_event() noexcept = default;
  cuda_event(cuda_event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  cuda_event& operator=(cuda_event&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  ~cuda_event() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }

  /// @return whether the work recorded before the event has finished; never blocks
  /// @throws crema::cuda_error if that work failed
  [[nodiscard]] bool ready() const {
    if (event_ == nullptr) return true;
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    CREMA_CUDA_TRY(status);
    return true;
  }
  /// @brief Blocks until the work recorded before the event has finished.
  /// @throws crema::cuda_error if that work failed
  void wait() const {
    if (event_ != nullptr) CREMA_CUDA_TRY(cudaEventSynchronize(event_));
  }
  /// @return the CUDA handle, for `cudaStreamWaitEvent` and friends
  [[nodiscard]] cudaEvent_t native_handle() const noexcept { return event_; }

 private:
  friend class cuda_stream;
  explicit cuda_event(cudaEvent_t event) noexcept : event_(event) {}

  cudaEvent_t event_ = nullptr;
};

/// @brief A CUDA stream: owned (made by the constructor) or borrowed from the engine (`wrap`).
///
/// Move-only. Remembers its device. `record()` creates an event each call. Thread-safe as the
/// CUDA runtime is.
class cuda_stream {
 public:
  using event_type = cuda_event;

  /// @brief A new non-blocking stream on the current device.
  /// @throws crema::cuda_error if the stream cannot be created (no device, for one)
  cuda_stream() : device_(cuda::current_device()), owned_(true) {
    CREMA_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  /// @brief A view of a stream someone else owns and destroys; `device` is where it lives.
  [[nodiscard]] static cuda_stream wrap(cudaStream_t stream, int device) noexcept {
    return cuda_stream(stream, device);
  }
  cuda_stream(cuda_stream&& other) noexcept
      : stream_(std::exchange(other.stream_, nullptr)),
        device_(other.device_),
        owned_(std::exchange(other.owned_, false)) {}
  cuda_stream& operator=(cuda_stream&& other) noexcept {
    std::swap(stream_, other.stream_);
    std::swap(device_, other.device_);
    std::swap(owned_, other.owned_);
    return *this;
  }
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  ~cuda_stream() {
    if (owned_ && stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  /// @return an event that completes when the work queued so far has finished
  /// @throws crema::cuda_error if the event cannot be created or recorded
  [[nodiscard]] cuda_event record() {
    cuda::scoped_device on(device_);
    cudaEvent_t event = nullptr;
    CREMA_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    cuda_event owned(event);
    CREMA_CUDA_TRY(cudaEventRecord(event, stream_));
    return owned;
  }
  /// @brief Blocks until the work queued so far has finished.
  void synchronize() { CREMA_CUDA_TRY(cudaStreamSynchronize(stream_)); }

  /// @brief Makes the work queued on this stream from now on wait for `event`
  /// (`cudaStreamWaitEvent`); the host does not wait. An empty event is nothing to wait for.
  /// @throws crema::cuda_error if CUDA refuses
  void wait(const cuda_event& event) {
    if (event.native_handle() != nullptr) {
      CREMA_CUDA_TRY(cudaStreamWaitEvent(stream_, event.native_handle(), 0));
    }
  }

  /// @return the CUDA handle
  [[nodiscard]] cudaStream_t native_handle() const noexcept { return stream_; }
  /// @return the device the stream belongs to
  [[nodiscard]] int device_id() const noexcept { return device_; }

 private:
  cuda_stream(cudaStream_t stream, int device) noexcept
      : stream_(stream), device_(device), owned_(false) {}

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  bool owned_ = false;
};

static_assert(stream_policy<cuda_stream>);

}  // namespace crema
