#pragma once

#include <crema/core/error.hpp>
#include <crema/memory/device_span.hpp>
#include <crema/memory/emulated_device_resource.hpp>
#include <crema/memory/head.hpp>
#include <crema/memory/host_malloc_resource.hpp>
#include <crema/memory/resource.hpp>

#include <cstddef>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>

namespace crema {

/// @brief A buffer mirrored between host and device memory, moved lazily by a head-state machine.
///
/// Caffe's SyncedMemory, done properly. Each side is allocated on its first touch and filled with
/// zeros; a read copies only when the other side is newer and leaves the buffer `synced`; a
/// `mutable_*` access makes its side the head; in `synced` nothing is copied. Every access runs
/// through `crema::transition`, the table in `head.hpp`.
///
/// Asynchronous copies (`upload_async`, `download_async`) record an event on the stream: `head()`
/// reports `synced` only once the copy has finished, and the next access waits for it. A copy
/// that fails is reported once, by that access (or `wait()`), and the buffer returns to the state
/// it had before the copy.
///
/// Memory handed in by `set_host_data` / `set_device_data` is borrowed and never freed; memory the
/// buffer allocated is freed exactly once, by the buffer. Zero elements is a valid size that
/// allocates and copies nothing. Move-only.
///
/// Not thread-safe: one thread at a time may use a buffer (as with any standard container).
/// Accessors may allocate (first touch), may copy and may block (waiting for a pending
/// asynchronous copy); they never throw once both sides exist and no copy is pending.
///
/// @tparam T              the element type; trivially copyable, since copies are bytewise
/// @tparam HostResource   where the host side comes from (`host_malloc_resource`,
///                        `host_pinned_resource`, ...)
/// @tparam DeviceResource where the device side comes from, with its copies and stream type
///                        (`emulated_device_resource`, `cuda_device_resource`, ...)
template <class T, host_resource HostResource = host_malloc_resource,
          device_resource DeviceResource = emulated_device_resource>
class synced_buffer {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T> && !std::is_volatile_v<T>,
                "crema: synced_buffer elements must be trivially copyable and not const: "
                "they are copied bytewise between host and device");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using host_resource_type = HostResource;
  using device_resource_type = DeviceResource;
  using stream_type = typename DeviceResource::stream_type;
  using event_type = typename stream_type::event_type;

  /// @brief An empty buffer (zero elements).
  synced_buffer() noexcept(std::is_nothrow_default_constructible_v<HostResource>&&
                               std::is_nothrow_default_constructible_v<DeviceResource>) requires
      std::default_initializable<HostResource> && std::default_initializable<DeviceResource>
  = default;

  /// @brief A buffer of `count` elements; nothing is allocated until a side is first touched.
  /// @throws crema::length_error if `count` elements do not fit in a `std::ptrdiff_t` of bytes
  explicit synced_buffer(size_type count, HostResource host = HostResource{},
                         DeviceResource device = DeviceResource{})
      : host_resource_(std::move(host)), device_resource_(std::move(device)), size_(count) {
    if (count > max_size()) {
      detail::fail<length_error>(
          "synced_buffer: {} elements of {} bytes overflow the largest buffer ({} elements)", count,
          sizeof(T), max_size());
    }
  }

  synced_buffer(const synced_buffer&) = delete;
  synced_buffer& operator=(const synced_buffer&) = delete;

  /// @brief Takes over `other`'s memory, head and pending copy; `other` becomes empty.
  synced_buffer(synced_buffer&& other) noexcept
      : host_resource_(other.host_resource_),
        device_resource_(other.device_resource_),
        host_data_(std::exchange(other.host_data_, nullptr)),
        device_data_(std::exchange(other.device_data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        head_(std::exchange(other.head_, crema::head::uninitialized)),
        owns_host_(std::exchange(other.owns_host_, false)),
        owns_device_(std::exchange(other.owns_device_, false)),
        pending_(std::exchange(other.pending_, false)),
        pending_event_(std::move(other.pending_event_)),
        pending_head_(other.pending_head_) {}

  /// @brief Frees this buffer's memory, then takes over `other`'s.
  synced_buffer& operator=(synced_buffer&& other) noexcept {
    if (this != &other) {
      synced_buffer moved(std::move(other));
      swap(moved);
    }
    return *this;
  }

  /// @brief Waits for a pending asynchronous copy, then frees the memory the buffer allocated.
  ~synced_buffer() { release(); }

  /// @brief Exchanges everything, resources included, with `other`. Never throws.
  void swap(synced_buffer& other) noexcept {
    using std::swap;
    swap(host_resource_, other.host_resource_);
    swap(device_resource_, other.device_resource_);
    swap(host_data_, other.host_data_);
    swap(device_data_, other.device_data_);
    swap(size_, other.size_);
    swap(head_, other.head_);
    swap(owns_host_, other.owns_host_);
    swap(owns_device_, other.owns_device_);
    swap(pending_, other.pending_);
    swap(pending_event_, other.pending_event_);
    swap(pending_head_, other.pending_head_);
  }

  /// @return the number of elements
  [[nodiscard]] size_type size() const noexcept { return size_; }
  /// @return the number of bytes of each side
  [[nodiscard]] size_type size_bytes() const noexcept { return size_ * sizeof(T); }
  /// @return whether the buffer has no elements
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// @return the largest element count a buffer can have
  [[nodiscard]] static constexpr size_type max_size() noexcept {
    return static_cast<size_type>(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(T);
  }

  /// @brief Where the newest data is. `synced` is reported only once a pending asynchronous copy
  /// has finished; until then the head is the side it copies from. Never blocks.
  /// @throws whatever the stream reports of a copy that has finished and failed (once; see
  ///         `wait()`)
  [[nodiscard]] crema::head head() const {
    poll();
    return head_;
  }
  /// @return whether an asynchronous copy is still running; never blocks
  /// @throws as `head()`
  [[nodiscard]] bool transfer_pending() const {
    poll();
    return pending_;
  }
  /// @brief Blocks until a pending asynchronous copy has finished.
  /// @throws whatever the stream reports of a failed copy, once: the buffer is then back where
  ///         it was before the copy (the head on the side copied from, whose data is intact), and
  ///         the next access works normally (a read of the other side copies again)
  void wait() const {
    if (pending_) {
      try {
        pending_event_.wait();
      } catch (...) {
        abandon();
        throw;
      }
      settle();
    }
  }
  /// @return the number of the device that holds (or will hold) the device side
  [[nodiscard]] int device_id() const { return device_resource_.device_id(); }

  /// @brief The host copy for reading: allocates and zero-fills it on first touch, copies from
  /// the device if the device is newer (the buffer is then `synced`).
  /// @throws crema::allocation_error if the host side cannot be allocated
  [[nodiscard]] std::span<const T> host() const {
    access(operation::read_host);
    return {host_data_, size_};
  }
  /// @brief The host copy for writing: as `host()`, then the host becomes the head.
  [[nodiscard]] std::span<T> mutable_host() {
    access(operation::write_host);
    return {host_data_, size_};
  }
  /// @brief The device copy for reading: allocates and zero-fills it on first touch, copies from
  /// the host if the host is newer (the buffer is then `synced`).
  /// @throws crema::allocation_error if the device side cannot be allocated
  [[nodiscard]] device_span<const T> device() const {
    access(operation::read_device);
    return {device_data_, size_};
  }
  /// @brief The device copy for reading by work queued on `stream`, without blocking the host:
  /// an upload still in flight is waited for by `stream` (`stream.wait`), and a newer host copy
  /// is uploaded on `stream` itself (asynchronously), so `stream`'s later work sees the data.
  /// Otherwise as `device()`. The head becomes `synced` once the upload has finished.
  /// @throws crema::allocation_error if the device side cannot be allocated
  [[nodiscard]] device_span<const T> device(stream_type& stream) const {
    if (pending_) {
      if (head_ == crema::head::at_host) {  // an upload: the device side is not written yet
        stream.wait(pending_event_);
        return {device_data_, size_};
      }
      // A download reads the device side, which stays as it is: reading it too is fine.
      if (device_data_ != nullptr) return {device_data_, size_};
    }
    if (head_ == crema::head::at_host && size_ != 0) {
      access(operation::upload_async, &stream);
      return {device_data_, size_};
    }
    return device();
  }
  /// @brief The device copy for writing: as `device()`, then the device becomes the head.
  [[nodiscard]] device_span<T> mutable_device() {
    access(operation::write_device);
    return {device_data_, size_};
  }

  /// @brief Makes `data` the host side, borrowed: the buffer never frees it. Frees the host side
  /// the buffer allocated, if any. The host becomes the head. `data` must outlive its use here.
  /// @throws crema::length_error if `data.size() != size()`
  void set_host_data(std::span<T> data) {
    check_borrowed("set_host_data", data.data(), data.size());
    access(operation::borrow_host);
    free_host();
    host_data_ = data.data();
  }
  /// @brief Makes `data` the device side, borrowed; as `set_host_data`, for the device.
  /// @throws crema::length_error if `data.size() != size()`
  void set_device_data(device_span<T> data) {
    check_borrowed("set_device_data", data.data(), data.size());
    access(operation::borrow_device);
    free_device();
    device_data_ = data.data();
  }

  /// @brief Starts copying the host copy to the device on `stream` and returns at once.
  /// The head stays `at_host` until the copy has finished, then becomes `synced`; every access
  /// before that waits for it. Allocates the device side if it has none (without zero fill).
  /// @throws crema::state_error unless the head is `at_host`
  void upload_async(stream_type& stream) { access(operation::upload_async, &stream); }
  /// @brief Starts copying the device copy to the host on `stream`; as `upload_async`.
  /// @throws crema::state_error unless the head is `at_device`
  void download_async(stream_type& stream) { access(operation::download_async, &stream); }

  /// @return the resource of the host side
  [[nodiscard]] const HostResource& host_resource() const noexcept { return host_resource_; }
  /// @return the resource of the device side
  [[nodiscard]] const DeviceResource& device_resource() const noexcept { return device_resource_; }

 private:
  // Runs `op` through the table: wait for a pending copy, do the step's work, move the head.
  // The head moves only after the work succeeded, so a failed allocation changes nothing.
  void access(operation op, stream_type* stream = nullptr) const {
    if (pending_) [[unlikely]]
      wait();
    const auto next = transition(head_, op);
    if (!next) {
      detail::fail<state_error>(
          "synced_buffer: {} needs the newest data on its source side, "
          "but the head is {}",
          to_string(op), to_string(head_));
    }
    if (next->work != action::none) [[unlikely]]
      do_work(next->work, stream);
    if (stream != nullptr && size_ != 0) {
      pending_event_ = stream->record();
      pending_head_ = next->next;
      pending_ = true;
    } else {
      head_ = next->next;
    }
  }

  void do_work(action work, stream_type* stream) const {
    if (size_ == 0) return;  // an empty buffer allocates and copies nothing
    switch (work) {
      case action::none:
        break;
      case action::zero_fill_host:
        allocate_host();
        std::memset(host_data_, 0, size_bytes());
        break;
      case action::zero_fill_device:
        allocate_device();
        device_resource_.fill_zero(device_data_, size_bytes());
        break;
      case action::copy_to_host:
        allocate_host();
        if (stream != nullptr) {
          device_resource_.copy_to_host_async(host_data_, device_data_, size_bytes(), *stream);
        } else {
          device_resource_.copy_to_host(host_data_, device_data_, size_bytes());
        }
        break;
      case action::copy_to_device:
        allocate_device();
        if (stream != nullptr) {
          device_resource_.copy_to_device_async(device_data_, host_data_, size_bytes(), *stream);
        } else {
          device_resource_.copy_to_device(device_data_, host_data_, size_bytes());
        }
        break;
    }
  }

  void allocate_host() const {
    if (host_data_ == nullptr) {
      host_data_ = static_cast<T*>(host_resource_.allocate(size_bytes(), alignof(T)));
      owns_host_ = true;
    }
  }
  void allocate_device() const {
    if (device_data_ == nullptr) {
      device_data_ = static_cast<T*>(device_resource_.allocate(size_bytes(), alignof(T)));
      owns_device_ = true;
    }
  }
  void free_host() noexcept {
    if (owns_host_) host_resource_.deallocate(host_data_, size_bytes(), alignof(T));
    host_data_ = nullptr;
    owns_host_ = false;
  }
  void free_device() noexcept {
    if (owns_device_) device_resource_.deallocate(device_data_, size_bytes(), alignof(T));
    device_data_ = nullptr;
    owns_device_ = false;
  }

  // Settles a finished copy without blocking; wait() rethrows if it failed.
  void poll() const {
    if (pending_ && pending_event_.ready()) wait();
  }
  // The event goes back to its stream at once (a CUDA stream keeps it for its next record): so
  // a stream never holds more events than it has copies in flight.
  void settle() const noexcept {
    head_ = pending_head_;
    pending_ = false;
    pending_event_ = event_type{};
  }
  // A failed copy left the destination undefined; the head never moved off the source side, so
  // dropping the copy is all it takes to be consistent again.
  void abandon() const noexcept {
    pending_ = false;
    pending_event_ = event_type{};
  }

  void check_borrowed(const char* call, const T* data, size_type count) const {
    if (count != size_) {
      detail::fail<length_error>("synced_buffer::{}: {} elements given for a buffer of {}", call,
                                 count, size_);
    }
    if (data == nullptr && count != 0) {
      detail::fail<length_error>("synced_buffer::{}: null pointer given for {} elements", call,
                                 count);
    }
  }

  void release() noexcept {
    if (pending_) {
      // The copy may still be reading or writing our memory: it must end before the free.
      // A failed copy has nothing left to report to anyone here.
      try {
        pending_event_.wait();
      } catch (...) {
      }
      pending_ = false;
    }
    free_host();
    free_device();
  }

  // The accessors are const like Caffe's cpu_data(): reading may allocate or copy, but the
  // values a reader sees do not change.
  mutable HostResource host_resource_{};
  mutable DeviceResource device_resource_{};
  mutable T* host_data_ = nullptr;
  mutable T* device_data_ = nullptr;
  size_type size_ = 0;
  mutable crema::head head_ = crema::head::uninitialized;
  mutable bool owns_host_ = false;
  mutable bool owns_device_ = false;
  // An asynchronous copy in flight: the event recorded after it, and the head once it is done.
  mutable bool pending_ = false;
  mutable event_type pending_event_{};
  mutable crema::head pending_head_ = crema::head::uninitialized;
};

/// @brief Exchanges two buffers. Never throws.
template <class T, class HostResource, class DeviceResource>
void swap(synced_buffer<T, HostResource, DeviceResource>& a,
          synced_buffer<T, HostResource, DeviceResource>& b) noexcept {
  a.swap(b);
}

}  // namespace crema
