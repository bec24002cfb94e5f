#pragma once

// A CUDA runtime that counts: the calls crema's CUDA code makes, implemented on the host (one
// device unless a test asks for more, device memory from malloc, every copy done at once, every
// event complete), so that a test linked against it instead of libcudart runs crema's real CUDA
// classes without a GPU and asserts how many runtime calls each step costs, and that a runtime
// which fails (`fail_call`), on every device or one, stops the work with an error, never a hang
// or a crash. counting_runtime.cpp defines the runtime.

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace crema::test::counting_cuda {

/// The runtime calls counted.
enum class call : std::size_t {
  memcpy_async,        // cudaMemcpyAsync, cudaMemcpyPeerAsync
  memcpy,              // cudaMemcpy, cudaMemset
  event_record,        // cudaEventRecord
  stream_wait_event,   // cudaStreamWaitEvent
  event_create,        // cudaEventCreate, cudaEventCreateWithFlags
  event_destroy,       // cudaEventDestroy
  event_query,         // cudaEventQuery
  event_synchronize,   // cudaEventSynchronize
  stream_create,       // cudaStreamCreate, cudaStreamCreateWithFlags
  stream_destroy,      // cudaStreamDestroy
  stream_synchronize,  // cudaStreamSynchronize
  set_device,          // cudaSetDevice
  get_device,          // cudaGetDevice
  allocate,            // cudaMalloc, cudaHostAlloc, cudaMallocHost
  free,                // cudaFree, cudaFreeHost
  peer_access,         // cudaDeviceCanAccessPeer, cudaDeviceEnablePeerAccess
  count_               // not a call: the number of them
};

/// @return the call's runtime name, for messages
std::string_view name_of(call c) noexcept;

/// Calls made, by kind.
struct counts {
  std::array<std::uint64_t, static_cast<std::size_t>(call::count_)> of{};

  [[nodiscard]] std::uint64_t operator[](call c) const noexcept {
    return of[static_cast<std::size_t>(c)];
  }
  [[nodiscard]] friend counts operator-(counts a, const counts& b) noexcept {
    for (std::size_t i = 0; i < a.of.size(); ++i) a.of[i] -= b.of[i];
    return a;
  }
};

/// @return the calls made so far by every thread
counts all_threads() noexcept;
/// @return how many calls on a stream (a copy, a record, a wait) found another call on the same
///         stream still running: threads that shared a stream at the same moment
std::uint64_t stream_overlaps() noexcept;
/// @return how many cudaEventSynchronize calls waited on an event made without
///         cudaEventBlockingSync: on a GPU such a wait spins on a core until the event completes
std::uint64_t spinning_waits() noexcept;
/// What the runtime holds now, made and not yet freed or destroyed.
struct held_objects {
  std::size_t allocations = 0;  // device and pinned memory
  std::size_t streams = 0;
  std::size_t events = 0;
  friend bool operator==(const held_objects&, const held_objects&) = default;
};
/// @return what the runtime holds now, for every thread: a test that compares it before and
///         after some work sees what the work left behind
held_objects held();
/// @return the calls made so far by the calling thread
counts this_thread() noexcept;
/// @return how many threads have made call `c` at least once so far: a feed whose copies all go
///         through one thread adds one
std::uint64_t threads_calling(call c) noexcept;

/// For `fail_call`: calls on any device.
inline constexpr int any_device = -1;
/// The most devices `set_devices` gives.
inline constexpr int max_devices = 8;

/// @brief Makes the runtime fail, as a GPU's does: the call of kind `c` on device `on` (that of
/// the stream, event or memory it is given, else the current one) that comes after `after` more
/// such calls, from any thread, returns `error` and does nothing. With `sticky`, every call on
/// that device from then on returns `error` too (cudaGetDevice aside), as a GPU's runtime answers
/// every call on a device after a kernel's fault there (cudaErrorIllegalAddress), until `heal`;
/// the other devices' calls go on. A stream's wait for an event fails where either's device
/// failed. A free or a destroy that fails still frees what it is given, so that a test's memory
/// stays clean.
void fail_call(call c, std::uint64_t after, cudaError_t error, bool sticky = false,
               int on = any_device) noexcept;
/// Ends the failures `fail_call` set: every call succeeds again.
void heal() noexcept;
/// @return the calls made to fail since the last `fail_call`
std::uint64_t failed_calls() noexcept;

/// @brief Makes the runtime have `count` devices (1 at the start, at most `max_devices`), 0
/// current on the calling thread, and no peer access enabled. Memory, streams and events belong
/// to the device current when they are made, and the runtime refuses what a GPU's refuses across
/// devices (an event recorded on another device's stream, and for `launchable_on`, a kernel
/// launched on one); copies and stream waits across devices pass, as they do on a GPU. With
/// `peers_reach`, every two devices can access each other's memory once enabled, as GPUs on one
/// switch; without, none can (cudaDeviceCanAccessPeer says 0), as GPUs on two sockets' buses.
void set_devices(int count, bool peers_reach = true) noexcept;
/// @brief `set_devices(count, peers_reach)` for a scope: one device again when it ends, even on
/// a failure.
struct devices_for_scope {
  explicit devices_for_scope(int count, bool peers_reach = true) noexcept {
    set_devices(count, peers_reach);
  }
  devices_for_scope(const devices_for_scope&) = delete;
  devices_for_scope& operator=(const devices_for_scope&) = delete;
  ~devices_for_scope() { set_devices(1); }
};
/// @return the calls refused so far for mixing devices
std::uint64_t calls_across_devices() noexcept;
/// @return whether `device` has enabled its access to `peer`'s memory
/// (cudaDeviceEnablePeerAccess(peer) made with `device` current)
bool peer_access_enabled(int device, int peer) noexcept;
/// @return the calling thread's device, as cudaGetDevice gives it but not counted
int current_device() noexcept;
/// @return the device of `stream` (the calling thread's for the default stream)
int device_of(cudaStream_t stream) noexcept;
/// @return whether `device` is the calling thread's; counted among `calls_across_devices` where
/// not. For fakes of libraries whose objects belong to a device, such as nvJPEG's handles.
bool is_current(int device) noexcept;
/// @return whether a kernel may be launched on `stream` from the calling thread: whether its
/// device is the current one (`is_current`)
bool launchable_on(cudaStream_t stream) noexcept;

}  // namespace crema::test::counting_cuda
