#pragma once

#include <concepts>
#include <cstddef>

/// @file
/// The policies a `synced_buffer` is built from. A resource is a small copyable handle: copies
/// refer to the same underlying memory source, so a buffer can hold its resources by value.

namespace crema {

/// @brief Memory the host can read and write: malloc, pinned memory, an adaptor over either.
///
/// `allocate(bytes, alignment)` returns memory aligned to `alignment` (a power of two) or throws
/// `crema::allocation_error` naming the bytes; `deallocate(p, bytes, alignment)` takes back what
/// `allocate` returned with the same arguments and never throws.
template <class Resource>
concept host_resource = std::copy_constructible<Resource> &&
    requires(Resource& resource, void* pointer, std::size_t bytes, std::size_t alignment) {
  { resource.allocate(bytes, alignment) } -> std::same_as<void*>;
  { resource.deallocate(pointer, bytes, alignment) }
  noexcept;
};

/// @brief An event recorded on a stream: it becomes ready when the work queued before it ends.
/// A default-constructed event has nothing to wait for.
///
/// `ready()` asks without blocking; `wait()` blocks until the event is ready and rethrows an
/// error of the work it waited for.
template <class Event>
concept stream_event = std::movable<Event> && std::default_initializable<Event> &&
    requires(const Event& event) {
  { event.ready() } -> std::same_as<bool>;
  event.wait();
};

/// @brief An ordered queue of device work: a CUDA stream, or its emulated twin.
///
/// `record()` returns an event that becomes ready when the work queued so far has finished;
/// `synchronize()` blocks until all of it has; `wait(event)` makes the work queued from now on
/// wait for `event`, without blocking the host (`cudaStreamWaitEvent`), which is how one stream
/// uses what another produced.
template <class Stream>
concept stream_policy = stream_event<typename Stream::event_type> &&
    requires(Stream& stream, const typename Stream::event_type& event) {
  { stream.record() } -> std::same_as<typename Stream::event_type>;
  stream.synchronize();
  stream.wait(event);
};

/// @brief Device memory and the copies between it and host memory.
///
/// Allocation follows `host_resource`. `fill_zero`, `copy_to_device` and `copy_to_host` return
/// when their work is done; the `_async` copies are queued on `stream` and done when an event
/// recorded after them is ready. `device_id()` names the device the memory lives on.
template <class Resource>
concept device_resource = std::copy_constructible<Resource> &&
    stream_policy<typename Resource::stream_type> &&
    requires(Resource& resource, const Resource& const_resource, void* destination,
             const void* source, std::size_t bytes, std::size_t alignment,
             typename Resource::stream_type& stream) {
  { resource.allocate(bytes, alignment) } -> std::same_as<void*>;
  { resource.deallocate(destination, bytes, alignment) }
  noexcept;
  resource.fill_zero(destination, bytes);
  resource.copy_to_device(destination, source, bytes);
  resource.copy_to_host(destination, source, bytes);
  resource.copy_to_device_async(destination, source, bytes, stream);
  resource.copy_to_host_async(destination, source, bytes, stream);
  { const_resource.device_id() } -> std::same_as<int>;
};

}  // namespace crema
