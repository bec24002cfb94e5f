#pragma once

// An emulated device resource that also remembers which thread started every copy to the
// device, and whether it was synchronous, so a test can prove where uploads happen.

#include <crema/memory/emulated_device_resource.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace crema::test {

class recording_device_resource {
 public:
  using stream_type = emulated_stream;

  struct upload {
    std::thread::id thread;
    bool asynchronous;
  };
  struct ledger {
    std::mutex mutex;
    std::vector<upload> uploads;
  };

  explicit recording_device_resource(emulated_device& device)
      : upstream_(device), ledger_(std::make_shared<ledger>()) {}

  void* allocate(std::size_t bytes, std::size_t alignment) {
    return upstream_.allocate(bytes, alignment);
  }
  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment) noexcept {
    upstream_.deallocate(pointer, bytes, alignment);
  }
  void fill_zero(void* destination, std::size_t bytes) { upstream_.fill_zero(destination, bytes); }
  void copy_to_device(void* destination, const void* source, std::size_t bytes) {
    note(false);
    upstream_.copy_to_device(destination, source, bytes);
  }
  void copy_to_host(void* destination, const void* source, std::size_t bytes) {
    upstream_.copy_to_host(destination, source, bytes);
  }
  void copy_to_device_async(void* destination, const void* source, std::size_t bytes,
                            stream_type& stream) {
    note(true);
    upstream_.copy_to_device_async(destination, source, bytes, stream);
  }
  void copy_to_host_async(void* destination, const void* source, std::size_t bytes,
                          stream_type& stream) {
    upstream_.copy_to_host_async(destination, source, bytes, stream);
  }
  [[nodiscard]] int device_id() const noexcept { return upstream_.device_id(); }

  /// Every copy to the device so far.
  [[nodiscard]] std::vector<upload> uploads() const {
    std::scoped_lock lock(ledger_->mutex);
    return ledger_->uploads;
  }

 private:
  void note(bool asynchronous) {
    std::scoped_lock lock(ledger_->mutex);
    ledger_->uploads.push_back({std::this_thread::get_id(), asynchronous});
  }

  emulated_device_resource upstream_;
  std::shared_ptr<ledger> ledger_;
};

static_assert(device_resource<recording_device_resource>);

}  // namespace crema::test
