#pragma once

#include <crema/memory/emulated_stream.hpp>
#include <crema/memory/host_malloc_resource.hpp>
#include <crema/memory/resource.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace crema {

/// @brief What an `emulated_device` has done, counted since it was made or last reset.
struct emulated_device_stats {
  std::uint64_t allocations = 0;       ///< successful `allocate` calls
  std::uint64_t deallocations = 0;     ///< `deallocate` calls
  std::uint64_t zero_fills = 0;        ///< `fill_zero` calls
  std::uint64_t uploads = 0;           ///< host-to-device copies, synchronous or not
  std::uint64_t downloads = 0;         ///< device-to-host copies, synchronous or not
  std::uint64_t bytes_uploaded = 0;    ///< bytes of those uploads
  std::uint64_t bytes_downloaded = 0;  ///< bytes of those downloads
  std::int64_t live_bytes = 0;         ///< bytes allocated and not yet deallocated

  friend bool operator==(const emulated_device_stats&, const emulated_device_stats&) = default;
};

/// @brief A device made of host memory, for running device logic where there is no GPU.
///
/// Owns the counters that every `emulated_device_resource` on it updates, so a test can assert
/// the exact number of transfers an access pattern costs. Neither copyable nor movable
/// (resources refer to it); it must outlive them. Every member is thread-safe and lock-free.
class emulated_device {
 public:
  /// @param id the device number that resources and buffers on it report
  explicit emulated_device(int id = 0) noexcept : id_(id) {}
  emulated_device(const emulated_device&) = delete;
  emulated_device& operator=(const emulated_device&) = delete;

  /// @return the device number
  [[nodiscard]] int id() const noexcept { return id_; }
  /// @return a snapshot of the counters
  [[nodiscard]] emulated_device_stats stats() const noexcept {
    emulated_device_stats s;
    s.allocations = allocations_.load(std::memory_order_relaxed);
    s.deallocations = deallocations_.load(std::memory_order_relaxed);
    s.zero_fills = zero_fills_.load(std::memory_order_relaxed);
    s.uploads = uploads_.load(std::memory_order_relaxed);
    s.downloads = downloads_.load(std::memory_order_relaxed);
    s.bytes_uploaded = bytes_uploaded_.load(std::memory_order_relaxed);
    s.bytes_downloaded = bytes_downloaded_.load(std::memory_order_relaxed);
    s.live_bytes = live_bytes_.load(std::memory_order_relaxed);
    return s;
  }
  /// @brief Sets every counter but `live_bytes` back to zero.
  void reset_stats() noexcept {
    for (auto* counter : {&allocations_, &deallocations_, &zero_fills_, &uploads_, &downloads_,
                          &bytes_uploaded_, &bytes_downloaded_}) {
      counter->store(0, std::memory_order_relaxed);
    }
  }

  /// @return the device that default-constructed resources use (number 0); one per program
  [[nodiscard]] static emulated_device& default_device() noexcept {
    static emulated_device device{0};
    return device;
  }

 private:
  friend class emulated_device_resource;

  static void add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) noexcept {
    counter.fetch_add(n, std::memory_order_relaxed);
  }

  int id_;
  std::atomic<std::uint64_t> allocations_{0};
  std::atomic<std::uint64_t> deallocations_{0};
  std::atomic<std::uint64_t> zero_fills_{0};
  std::atomic<std::uint64_t> uploads_{0};
  std::atomic<std::uint64_t> downloads_{0};
  std::atomic<std::uint64_t> bytes_uploaded_{0};
  std::atomic<std::uint64_t> bytes_downloaded_{0};
  std::atomic<std::int64_t> live_bytes_{0};
};

/// @brief Device memory on an `emulated_device`: host memory kept apart from the host side,
/// memcpy for transfers, every transfer counted.
///
/// A handle: copies refer to the same device. The asynchronous copies run on an
/// `emulated_stream`, on its worker thread unless the stream runs inline. All members are
/// thread-safe; `allocate` and the `_async` copies allocate.
class emulated_device_resource {
 public:
  using stream_type = emulated_stream;

  /// @brief Memory on `emulated_device::default_device()`.
  emulated_device_resource() noexcept : device_(&emulated_device::default_device()) {}
  /// @brief Memory on `device`, which must outlive this resource and its copies.
  explicit emulated_device_resource(emulated_device& device) noexcept : device_(&device) {}

  /// @brief `bytes` bytes of emulated device memory aligned to `alignment`.
  /// @throws crema::allocation_error if the host has no memory to stand in for it
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = alignof(std::max_align_t)) {
    void* pointer = detail::aligned_malloc(bytes, alignment, "device");
    emulated_device::add(device_->allocations_);
    device_->live_bytes_.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
    return pointer;
  }
  /// @brief Frees what `allocate` returned.
  void deallocate(void* pointer, std::size_t bytes,
                  std::size_t /*alignment*/ = alignof(std::max_align_t)) noexcept {
    std::free(pointer);
    emulated_device::add(device_->deallocations_);
    device_->live_bytes_.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  }

  /// @brief Fills `bytes` bytes of device memory with zeros (`cudaMemset`).
  void fill_zero(void* destination, std::size_t bytes) {
    std::memset(destination, 0, bytes);
    emulated_device::add(device_->zero_fills_);
  }
  /// @brief Copies host memory to device memory and returns when it is done.
  void copy_to_device(void* destination, const void* source, std::size_t bytes) {
    std::memcpy(destination, source, bytes);
    count_upload(bytes);
  }
  /// @brief Copies device memory to host memory and returns when it is done.
  void copy_to_host(void* destination, const void* source, std::size_t bytes) {
    std::memcpy(destination, source, bytes);
    count_download(bytes);
  }
  /// @brief Queues a host-to-device copy on `stream`; counted when queued.
  void copy_to_device_async(void* destination, const void* source, std::size_t bytes,
                            stream_type& stream) {
    count_upload(bytes);
    stream.launch([=] { std::memcpy(destination, source, bytes); });
  }
  /// @brief Queues a device-to-host copy on `stream`; counted when queued.
  void copy_to_host_async(void* destination, const void* source, std::size_t bytes,
                          stream_type& stream) {
    count_download(bytes);
    stream.launch([=] { std::memcpy(destination, source, bytes); });
  }

  /// @return the number of the device this memory lives on
  [[nodiscard]] int device_id() const noexcept { return device_->id(); }
  /// @return the device itself, for its counters
  [[nodiscard]] emulated_device& device() const noexcept { return *device_; }

  friend bool operator==(const emulated_device_resource&,
                         const emulated_device_resource&) = default;

 private:
  void count_upload(std::size_t bytes) noexcept {
    emulated_device::add(device_->uploads_);
    emulated_device::add(device_->bytes_uploaded_, bytes);
  }
  void count_download(std::size_t bytes) noexcept {
    emulated_device::add(device_->downloads_);
    emulated_device::add(device_->bytes_downloaded_, bytes);
  }

  emulated_device* device_;
};

static_assert(device_resource<emulated_device_resource>);

}  // namespace crema
