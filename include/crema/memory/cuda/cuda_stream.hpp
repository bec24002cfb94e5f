#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/memory/resource.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace crema {

/// @brief How a thread waits on the host for a stream's events (`cuda_event::wait`).
enum class host_wait : std::uint8_t {
  /// Polling on its core (the runtime's default): back the soonest, for waits that are short,
  /// as for the upload of a batch.
  spin,
  /// Asleep until the event completes (`cudaEventBlockingSync`): the core goes to other
  /// threads meanwhile, for waits as long as a batch's decoding on the GPU.
  sleep,
};

namespace detail {

// The CUDA events of one stream that no `cuda_event` holds any more, kept to be recorded again:
// a pipeline records an event per upload and per release, and making and destroying each one
// costs two more runtime calls, which contend with every other thread's calls. Shared by the
// stream and the events it recorded, so that it lives until the last of them is gone; then it
// destroys the events it kept. Thread-safe.
class cuda_event_pool {
 public:
  cuda_event_pool(int device, host_wait waits) noexcept
      : device_(device),
        flags_(cudaEventDisableTiming | (waits == host_wait::sleep ? cudaEventBlockingSync : 0U)) {}
  cuda_event_pool(const cuda_event_pool&) = delete;
  cuda_event_pool& operator=(const cuda_event_pool&) = delete;
  ~cuda_event_pool() {
    for (cudaEvent_t event : kept_) (void)cudaEventDestroy(event);
  }

  // An event of this pool's device: one kept, else a new one.
  // Throws crema::cuda_error if a new one cannot be made.
  cudaEvent_t take() {
    {
      std::scoped_lock lock(mutex_);
      if (!kept_.empty()) {
        cudaEvent_t event = kept_.back();
        kept_.pop_back();
        return event;
      }
    }
    cuda::scoped_device on(device_);
    cudaEvent_t event = nullptr;
    CREMA_CUDA_TRY(cudaEventCreateWithFlags(&event, flags_));
    return event;
  }
  [[nodiscard]] int device() const noexcept { return device_; }

  // Keeps `event` for a later `take`; re-recording an event that may still be pending is fine,
  // since waits already queued on it keep what it stood for then. Destroys it if it cannot be
  // kept (no memory).
  void give_back(cudaEvent_t event) noexcept {
    try {
      std::scoped_lock lock(mutex_);
      kept_.push_back(event);
    } catch (...) {
      (void)cudaEventDestroy(event);
    }
  }

 private:
  int device_;
  unsigned flags_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> kept_;
};

}  // namespace detail

/// @brief A CUDA event recorded on a `cuda_stream` (owning, move-only).
///
/// A default-constructed event has nothing to wait for and is always ready. `ready()` never
/// blocks; `wait()` blocks the calling thread until the event has completed. The stream that
/// recorded it made it or reused one of its earlier events; destroying it gives it back to that
/// stream for a later record. Thread-safe as the CUDA runtime is; allocates on the host only when
/// the stream's set of events grows.
class cuda_event {
 public:
  cuda_event() noexcept = default;
  cuda_event(cuda_event&& other) noexcept
      : event_(std::exchange(other.event_, nullptr)), pool_(std::move(other.pool_)) {}
  cuda_event& operator=(cuda_event&& other) noexcept {
    std::swap(event_, other.event_);
    std::swap(pool_, other.pool_);
    return *this;
  }
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  ~cuda_event() {
    if (event_ != nullptr) pool_->give_back(event_);
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
    detail::cuda_check(status, "cudaEventQuery(event_)", pool_->device());
    return true;
  }
  /// @brief Blocks until the work recorded before the event has finished.
  /// @throws crema::cuda_error if that work failed
  void wait() const {
    if (event_ != nullptr) CREMA_CUDA_TRY_ON(pool_->device(), cudaEventSynchronize(event_));
  }
  /// @return the CUDA handle, for `cudaStreamWaitEvent` and friends
  [[nodiscard]] cudaEvent_t native_handle() const noexcept { return event_; }

 private:
  friend class cuda_stream;
  cuda_event(cudaEvent_t event, std::shared_ptr<detail::cuda_event_pool> pool) noexcept
      : event_(event), pool_(std::move(pool)) {}

  cudaEvent_t event_ = nullptr;
  std::shared_ptr<detail::cuda_event_pool> pool_;  // where `event_` goes back; set with it
};

/// @brief A CUDA stream: owned (made by the constructor) or borrowed from the engine (`wrap`).
///
/// Move-only. Remembers its device. `record()` records one of the stream's events, made on first
/// need and reused once the `cuda_event` that held it is gone, so that steady recording makes
/// and destroys none. Threads wait on the host for its events as its `host_wait` says (spinning
/// by default). Thread-safe as the CUDA runtime is.
class cuda_stream {
 public:
  using event_type = cuda_event;

  /// @brief A new non-blocking stream on the current device.
  /// @throws crema::cuda_error if the stream cannot be created (no device, for one)
  cuda_stream()
      : device_(cuda::current_device()),
        owned_(true),
        events_(std::make_shared<detail::cuda_event_pool>(device_, host_wait::spin)) {
    CREMA_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  /// @brief A new non-blocking stream on device `device` (the caller's current device is kept),
  /// whose events are waited for as `waits` says.
  /// @throws crema::cuda_error if the device cannot be made current or the stream created
  explicit cuda_stream(int device, host_wait waits = host_wait::spin)
      : device_(device),
        owned_(true),
        events_(std::make_shared<detail::cuda_event_pool>(device_, waits)) {
    cuda::scoped_device on(device_);
    CREMA_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  /// @brief A view of a stream someone else owns and destroys; `device` is where it lives.
  /// The view keeps its own events (see `record`).
  [[nodiscard]] static cuda_stream wrap(cudaStream_t stream, int device) {
    return cuda_stream(stream, device);
  }
  cuda_stream(cuda_stream&& other) noexcept
      : stream_(std::exchange(other.stream_, nullptr)),
        device_(other.device_),
        owned_(std::exchange(other.owned_, false)),
        events_(std::move(other.events_)) {}
  cuda_stream& operator=(cuda_stream&& other) noexcept {
    std::swap(stream_, other.stream_);
    std::swap(device_, other.device_);
    std::swap(owned_, other.owned_);
    std::swap(events_, other.events_);
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
    cuda_event event(events_->take(), events_);
    CREMA_CUDA_TRY(cudaEventRecord(event.native_handle(), stream_));
    return event;
  }
  /// @brief Blocks until the work queued so far has finished.
  void synchronize() { CREMA_CUDA_TRY_ON(device_, cudaStreamSynchronize(stream_)); }

  /// @brief Makes the work queued on this stream from now on wait for `event`
  /// (`cudaStreamWaitEvent`); the host does not wait. An empty event is nothing to wait for.
  /// @throws crema::cuda_error if CUDA refuses
  void wait(const cuda_event& event) {
    if (event.native_handle() != nullptr) {
      CREMA_CUDA_TRY_ON(device_, cudaStreamWaitEvent(stream_, event.native_handle(), 0));
    }
  }

  /// @return the CUDA handle
  [[nodiscard]] cudaStream_t native_handle() const noexcept { return stream_; }
  /// @return the device the stream belongs to
  [[nodiscard]] int device_id() const noexcept { return device_; }

 private:
  cuda_stream(cudaStream_t stream, int device)
      : stream_(stream),
        device_(device),
        owned_(false),
        events_(std::make_shared<detail::cuda_event_pool>(device, host_wait::spin)) {}

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  bool owned_ = false;
  std::shared_ptr<detail::cuda_event_pool> events_;  // shared with the events it recorded
};

static_assert(stream_policy<cuda_stream>);

}  // namespace crema
