#pragma once

#include <crema/core/error.hpp>
#include <crema/memory/head.hpp>
#include <crema/memory/synced_buffer.hpp>

#include <cstddef>
#include <span>
#include <utility>

namespace crema {

/// @brief A `synced_buffer` whose head is part of its type.
///
/// Where the flow of a program is static (fill on the host, upload, run on the device, read the
/// result back), the head can be checked by the compiler instead of at run time. Every operation
/// that moves the head consumes the buffer (`std::move(buffer).to_device()`) and returns it with
/// its new head in the type, computed from the same `crema::transition` table the runtime buffer
/// uses. A call the head does not allow (an asynchronous upload from a buffer not at the host,
/// writing the host copy of a buffer that is not at the host) fails to compile with crema's own
/// message.
///
/// `as_typed<H>(std::move(runtime))` converts a runtime buffer, checking its head once;
/// `std::move(typed).untyped()` gives the runtime buffer back for free. Thread safety, blocking
/// and allocation are those of the `synced_buffer` member each operation calls.
///
/// @tparam T              the element type
/// @tparam Head           the head the buffer is known to have
/// @tparam HostResource   as for `synced_buffer`
/// @tparam DeviceResource as for `synced_buffer`
template <class T, head Head, host_resource HostResource = host_malloc_resource,
          device_resource DeviceResource = emulated_device_resource>
class typed_buffer {
 public:
  using buffer_type = synced_buffer<T, HostResource, DeviceResource>;
  using stream_type = typename buffer_type::stream_type;
  template <head Next>
  using with_head = typed_buffer<T, Next, HostResource, DeviceResource>;

  /// The head this buffer has.
  static constexpr head current_head = Head;

  /// @brief A new buffer of `count` elements; only `head::uninitialized` buffers are made new.
  /// @throws crema::length_error as `synced_buffer`'s constructor
  explicit typed_buffer(std::size_t count, HostResource host = HostResource{},
                        DeviceResource device = DeviceResource{}) requires(Head ==
                                                                           head::uninitialized)
      : buffer_(count, std::move(host), std::move(device)) {}

  /// @return the number of elements
  [[nodiscard]] std::size_t size() const noexcept { return buffer_.size(); }
  /// @return the number of the device that holds the device side
  [[nodiscard]] int device_id() const { return buffer_.device_id(); }

  /// @brief The host copy, for reading. Needs the newest data at the host.
  [[nodiscard]] std::span<const T> host() const {
    static_assert(Head == head::at_host || Head == head::synced,
                  "crema: host() needs head::at_host or head::synced; "
                  "call std::move(buffer).to_host() first");
    return buffer_.host();
  }
  /// @brief The host copy, for writing. Needs the host to be the head.
  [[nodiscard]] std::span<T> mutable_host() {
    static_assert(Head == head::at_host,
                  "crema: mutable_host() needs head::at_host, any other head makes the host "
                  "copy read-only; call std::move(buffer).claim_host() first");
    return buffer_.mutable_host();
  }
  /// @brief The device copy, for reading. Needs the newest data at the device.
  [[nodiscard]] device_span<const T> device() const {
    static_assert(Head == head::at_device || Head == head::synced,
                  "crema: device() needs head::at_device or head::synced; "
                  "call std::move(buffer).to_device() first");
    return buffer_.device();
  }
  /// @brief The device copy, for writing. Needs the device to be the head.
  [[nodiscard]] device_span<T> mutable_device() {
    static_assert(Head == head::at_device,
                  "crema: mutable_device() needs head::at_device, any other head makes the "
                  "device copy read-only; call std::move(buffer).claim_device() first");
    return buffer_.mutable_device();
  }

  /// @brief Brings the host copy up to date (allocating or copying as the table says).
  [[nodiscard]] auto to_host() && { return step<operation::read_host>(); }
  /// @brief Brings the device copy up to date (allocating or copying as the table says).
  [[nodiscard]] auto to_device() && { return step<operation::read_device>(); }
  /// @brief Makes the host the head, so that the host copy can be written.
  [[nodiscard]] auto claim_host() && { return step<operation::write_host>(); }
  /// @brief Makes the device the head, so that the device copy can be written.
  [[nodiscard]] auto claim_device() && { return step<operation::write_device>(); }

  /// @brief Makes `data` the host side, borrowed (see `synced_buffer::set_host_data`).
  [[nodiscard]] auto borrow_host(std::span<T> data) && {
    buffer_.set_host_data(data);
    return with_head<head::at_host>(std::move(buffer_));
  }
  /// @brief Makes `data` the device side, borrowed (see `synced_buffer::set_device_data`).
  [[nodiscard]] auto borrow_device(device_span<T> data) && {
    buffer_.set_device_data(data);
    return with_head<head::at_device>(std::move(buffer_));
  }

  /// @brief Starts copying the host copy to the device on `stream`. The result is `synced`:
  /// its accessors wait for the copy to finish.
  [[nodiscard]] auto upload_async(stream_type& stream) && {
    static_assert(Head == head::at_host,
                  "crema: upload_async() needs head::at_host, the newest data must be at the host "
                  "to be uploaded");
    buffer_.upload_async(stream);
    return with_head<head::synced>(std::move(buffer_));
  }
  /// @brief Starts copying the device copy to the host on `stream`; as `upload_async`.
  [[nodiscard]] auto download_async(stream_type& stream) && {
    static_assert(Head == head::at_device,
                  "crema: download_async() needs head::at_device, the newest data must be at the "
                  "device to be downloaded");
    buffer_.download_async(stream);
    return with_head<head::synced>(std::move(buffer_));
  }

  /// @brief The runtime buffer, with the same memory and head. Free.
  [[nodiscard]] buffer_type untyped() && noexcept { return std::move(buffer_); }

 private:
  template <class, head, host_resource, device_resource>
  friend class typed_buffer;
  template <head Expected, class U, class HR, class DR>
  friend typed_buffer<U, Expected, HR, DR> as_typed(synced_buffer<U, HR, DR>&&);

  explicit typed_buffer(buffer_type&& buffer) noexcept : buffer_(std::move(buffer)) {}

  template <operation Op>
  [[nodiscard]] auto step() {
    constexpr auto next = transition(Head, Op);
    static_assert(next.has_value());
    if constexpr (Op == operation::read_host) {
      (void)buffer_.host();
    } else if constexpr (Op == operation::read_device) {
      (void)buffer_.device();
    } else if constexpr (Op == operation::write_host) {
      (void)buffer_.mutable_host();
    } else {
      (void)buffer_.mutable_device();
    }
    return with_head<next->next>(std::move(buffer_));
  }

  buffer_type buffer_;
};

/// @brief Gives a runtime buffer its head in the type, after checking it.
///
/// Waits for a pending asynchronous copy first, so that the head it checks is final.
/// @tparam Expected the head the caller expects
/// @throws crema::state_error naming both heads if the buffer's head is not `Expected`; the
///         buffer is then left as it was
template <head Expected, class T, class HostResource, class DeviceResource>
[[nodiscard]] typed_buffer<T, Expected, HostResource, DeviceResource> as_typed(
    synced_buffer<T, HostResource, DeviceResource>&& buffer) {
  buffer.wait();
  if (buffer.head() != Expected) {
    detail::fail<state_error>("as_typed: expected head {}, the buffer is {}", to_string(Expected),
                              to_string(buffer.head()));
  }
  return typed_buffer<T, Expected, HostResource, DeviceResource>(std::move(buffer));
}

}  // namespace crema
