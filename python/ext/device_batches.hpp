#pragma once

// Batches on a CUDA device for crema.Loader(device="cuda:N"): the producers fill pinned host
// memory and start its upload to the device; the consumer's stream (PyTorch's current stream, or
// the one given to __dlpack__) waits for the upload's event, and the slot is refilled only after
// an event recorded on that stream once the last Python object over the batch is gone. Only in
// builds with CUDA (CREMA_PYTHON_CUDA).

#include "loader_core.hpp"

#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace crema::python {

/// Makes the device batches of a loader's slots, on device `device`, with int64 labels.
template <class T>
struct python_device_batch {
  int device = 0;

  [[nodiscard]] cuda::device_batch<T, std::int64_t> operator()(const batch_context& where,
                                                               record_shape shape) const {
    return cuda::device_batch<T, std::int64_t>(where.batch_size, shape, host_pinned_resource{},
                                               cuda_device_resource(device));
  }
};

/// The consumers' streams, wrapped once each: a wrapped stream keeps the events it records for
/// reuse, so a steady loop creates none. Process-wide, as CUDA's streams are; never destroyed
/// (at exit, the driver may be gone before static destructors run).
class consumer_streams {
 public:
  static consumer_streams& instance() {
    static auto* streams = new consumer_streams;
    return *streams;
  }

  /// The wrapped stream `handle` of device `device` (a `cudaStream_t` as an integer; 0 the
  /// default stream, 1 and 2 CUDA's legacy and per-thread default streams).
  std::shared_ptr<cuda_stream> of(std::uintptr_t handle, int device) {
    const std::lock_guard lock(mutex_);
    for (const auto& known : streams_) {
      if (known.handle == handle && known.device == device) return known.stream;
    }
    auto stream = std::make_shared<cuda_stream>(
        cuda_stream::wrap(reinterpret_cast<cudaStream_t>(handle), device));
    // A program that makes streams without end (one per step) would grow this: keep the newest.
    if (streams_.size() == capacity) streams_.erase(streams_.begin());
    streams_.push_back({handle, device, stream});
    return stream;
  }

 private:
  static constexpr std::size_t capacity = 64;
  struct known_stream {
    std::uintptr_t handle;
    int device;
    std::shared_ptr<cuda_stream> stream;
  };
  std::mutex mutex_;
  std::vector<known_stream> streams_;
};

/// A delivered device batch. `use_on` makes a consumer's stream wait for the upload and gives
/// the device pointers; the destructor (the last Python object over the batch gone) gives the
/// slot back after the work those streams had queued by then.
template <class Lease>
struct device_lease_batch final : held_batch {
  explicit device_lease_batch(Lease held) : lease(std::move(held)) {
    device = lease->device_id();
    size = lease.size();
    padding = lease.padding();
    epoch = lease.epoch();
  }
  device_lease_batch(const device_lease_batch&) = delete;
  device_lease_batch& operator=(const device_lease_batch&) = delete;

  ~device_lease_batch() override {
    if (users_.empty()) return;  // the lease gives the slot back as it goes
    try {
      // One event for the lease: the last stream waits for the others' work first.
      cuda_stream& last = *users_.back();
      for (std::size_t i = 0; i + 1 < users_.size(); ++i) last.wait(users_[i]->record());
      lease.release_after(last.record());
    } catch (...) {
      // The device failed: its next call fails too, and the next batch's upload names it. Wait
      // for what can still be waited for, so that no upload overwrites a batch in use.
      for (const auto& stream : users_) {
        try {
          stream->synchronize();
        } catch (...) {  // NOLINT(bugprone-empty-catch): the device is gone either way
        }
      }
    }
  }

  void use_on(std::intptr_t stream) override {
    view_type view;
    if (stream == no_sync) {
      view = lease->device();  // the host waits for the upload: the consumer syncs itself
    } else {
      std::shared_ptr<cuda_stream> user =
          consumer_streams::instance().of(static_cast<std::uintptr_t>(stream), device);
      view = lease->device(*user);
      if (std::ranges::find(users_, user) == users_.end()) users_.push_back(std::move(user));
    }
    data = const_cast<void*>(static_cast<const void*>(view.data.data()));
    labels = const_cast<std::int64_t*>(view.labels.data());
  }

  using view_type = typename std::remove_cvref_t<decltype(*std::declval<Lease&>())>::view_type;
  Lease lease;

 private:
  std::vector<std::shared_ptr<cuda_stream>> users_;  // the consumers' streams given to use_on
};

}  // namespace crema::python
