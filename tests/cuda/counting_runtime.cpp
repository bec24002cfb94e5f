// The counting CUDA runtime (counting_runtime.hpp): the entry points crema's host code calls,
// with cuda_runtime_api.h's own declarations, so that a change of signature fails to compile.
// One device, 0, unless a test asks for more (`set_devices`); each thread has its current device.
// Streams and events are heap objects that remember the device current when they were made; a
// stream runs its work at once (a copy is done when cudaMemcpyAsync returns), so every event is
// complete as soon as it is recorded.

#include "counting_runtime.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <utility>

namespace crema::test::counting_cuda {
namespace {

std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(call::count_)> every_thread{};
thread_local counts calling_thread{};

std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(call::count_)> callers{};

void count(call c) noexcept {
  const auto i = static_cast<std::size_t>(c);
  every_thread[i].fetch_add(1, std::memory_order_relaxed);
  if (calling_thread.of[i]++ == 0) callers[i].fetch_add(1, std::memory_order_relaxed);
}

// What fail_call set: the kind of call to fail (count_: none), the device whose calls it counts
// (any_device: all), the calls still to let through, the error, and, once a sticky failure has
// happened, the error every call on its device returns.
struct injected_failure {
  std::atomic<std::size_t> kind{static_cast<std::size_t>(call::count_)};
  std::atomic<int> device{any_device};
  std::atomic<std::int64_t> left{-1};
  std::atomic<int> error{cudaSuccess};
  std::atomic<bool> sticky{false};
  std::array<std::atomic<int>, max_devices> stuck{};  // by device; cudaSuccess where none
  std::atomic<std::uint64_t> failed{0};
};
injected_failure injected;

std::atomic<int> devices{1};
thread_local int current = 0;  // the calling thread's device
std::atomic<std::uint64_t> misplaced{0};

// Peer access: whether devices can reach each other's memory, and which (device, peer) pairs
// have enabled it.
std::atomic<bool> peers_reach{true};
std::mutex peers_lock;
std::set<std::pair<int, int>> peers_enabled;

// CUDA's named default streams (legacy, per-thread): the default stream here, as the null one.
cudaStream_t plain(cudaStream_t stream) noexcept {
  return stream == cudaStreamLegacy || stream == cudaStreamPerThread ? nullptr : stream;
}

// What a handle points at: a tag, so that a handle this runtime did not make is refused.
struct stream_object {
  std::uint32_t tag = 0x5354524d;  // "STRM"
  std::atomic<int> callers{0};     // calls on this stream running now
  int device = current;
};

std::atomic<std::uint64_t> overlaps{0};

// Marks a call on `stream` while it runs; counts an overlap if another was running. The call
// lingers a moment, as a runtime call does, so that threads sharing a stream are caught at it.
class stream_call {
 public:
  explicit stream_call(cudaStream_t stream) noexcept
      : stream_(reinterpret_cast<stream_object*>(plain(stream))) {
    if (stream_ == nullptr) return;
    if (stream_->callers.fetch_add(1, std::memory_order_acq_rel) != 0) {
      overlaps.fetch_add(1, std::memory_order_relaxed);
    }
    for (int i = 0; i < 200; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  stream_call(const stream_call&) = delete;
  stream_call& operator=(const stream_call&) = delete;
  ~stream_call() {
    if (stream_ != nullptr) stream_->callers.fetch_sub(1, std::memory_order_acq_rel);
  }

 private:
  stream_object* stream_;
};
struct event_object {
  std::uint32_t tag = 0x45564e54;  // "EVNT"
  bool blocking = false;           // made with cudaEventBlockingSync
  int device = current;
};
std::atomic<std::uint64_t> spinning{0};  // cudaEventSynchronize on events without it

// Streams and events made and not yet destroyed.
std::atomic<std::size_t> live_streams{0};
std::atomic<std::size_t> live_events{0};

thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t error) noexcept {
  last_error = error;
  return error;
}
// A call real CUDA refuses for mixing devices: counted, and answered as CUDA does.
cudaError_t refuse_across_devices() noexcept {
  misplaced.fetch_add(1, std::memory_order_relaxed);
  return fail(cudaErrorInvalidResourceHandle);
}
// The error device `device` fails every call with after a sticky failure (cudaSuccess: none).
int stuck_on(int device) noexcept {
  return device >= 0 && device < max_devices
             ? injected.stuck[static_cast<std::size_t>(device)].load(std::memory_order_acquire)
             : cudaSuccess;
}
// Counts call `c` on device `device` (and, for a stream's wait for another device's event,
// `also`) and returns the error it fails with (cudaSuccess where it does not).
cudaError_t enter(call c, int device = current, int also = current) noexcept {
  count(c);
  for (const int on : {device, also}) {
    if (const int stuck = stuck_on(on); stuck != cudaSuccess && c != call::get_device) {
      injected.failed.fetch_add(1, std::memory_order_relaxed);
      return fail(static_cast<cudaError_t>(stuck));
    }
  }
  if (injected.kind.load(std::memory_order_acquire) != static_cast<std::size_t>(c)) {
    return cudaSuccess;
  }
  if (const int only = injected.device.load(std::memory_order_relaxed);
      (only != any_device && only != device) ||
      injected.left.fetch_sub(1, std::memory_order_acq_rel) != 0) {
    return cudaSuccess;
  }
  const int error = injected.error.load(std::memory_order_relaxed);
  if (injected.sticky.load(std::memory_order_relaxed) && device >= 0 && device < max_devices) {
    injected.stuck[static_cast<std::size_t>(device)].store(error, std::memory_order_release);
  }
  injected.failed.fetch_add(1, std::memory_order_relaxed);
  return fail(static_cast<cudaError_t>(error));
}
bool is_stream(cudaStream_t stream) noexcept {
  stream = plain(stream);
  return stream == nullptr || reinterpret_cast<stream_object*>(stream)->tag == stream_object{}.tag;
}
bool is_event(cudaEvent_t event) noexcept {
  return event != nullptr && reinterpret_cast<event_object*>(event)->tag == event_object{}.tag;
}
// The device a call on `stream` or `event` is on: theirs, or the current one for the default
// stream and handles this runtime did not make.
int device_of_stream(cudaStream_t stream) noexcept {
  stream = plain(stream);
  return stream != nullptr && is_stream(stream) ? reinterpret_cast<stream_object*>(stream)->device
                                                : current;
}
int device_of_event(cudaEvent_t event) noexcept {
  return is_event(event) ? reinterpret_cast<event_object*>(event)->device : current;
}

}  // namespace

std::string_view name_of(call c) noexcept {
  constexpr std::array<std::string_view, static_cast<std::size_t>(call::count_)> names{
      "cudaMemcpyAsync",
      "cudaMemcpy",
      "cudaEventRecord",
      "cudaStreamWaitEvent",
      "cudaEventCreate",
      "cudaEventDestroy",
      "cudaEventQuery",
      "cudaEventSynchronize",
      "cudaStreamCreate",
      "cudaStreamDestroy",
      "cudaStreamSynchronize",
      "cudaSetDevice",
      "cudaGetDevice",
      "cudaMalloc",
      "cudaFree",
      "cudaDeviceEnablePeerAccess"};
  return names.at(static_cast<std::size_t>(c));
}

counts all_threads() noexcept {
  counts result;
  for (std::size_t i = 0; i < result.of.size(); ++i) {
    result.of[i] = every_thread[i].load(std::memory_order_relaxed);
  }
  return result;
}

counts this_thread() noexcept { return calling_thread; }

std::uint64_t threads_calling(call c) noexcept {
  return callers[static_cast<std::size_t>(c)].load(std::memory_order_relaxed);
}

void fail_call(call c, std::uint64_t after, cudaError_t error, bool sticky, int on) noexcept {
  heal();
  injected.failed.store(0, std::memory_order_relaxed);
  injected.device.store(on, std::memory_order_relaxed);
  injected.error.store(error, std::memory_order_relaxed);
  injected.sticky.store(sticky, std::memory_order_relaxed);
  injected.left.store(static_cast<std::int64_t>(after), std::memory_order_relaxed);
  injected.kind.store(static_cast<std::size_t>(c), std::memory_order_release);
}

void heal() noexcept {
  injected.kind.store(static_cast<std::size_t>(call::count_), std::memory_order_release);
  for (std::atomic<int>& stuck : injected.stuck) {
    stuck.store(cudaSuccess, std::memory_order_release);
  }
  injected.left.store(-1, std::memory_order_relaxed);
}

std::uint64_t failed_calls() noexcept { return injected.failed.load(std::memory_order_relaxed); }

std::uint64_t stream_overlaps() noexcept { return overlaps.load(std::memory_order_relaxed); }

std::uint64_t spinning_waits() noexcept { return spinning.load(std::memory_order_relaxed); }

void set_devices(int count, bool reach) noexcept {
  devices.store(std::clamp(count, 1, max_devices), std::memory_order_relaxed);
  peers_reach.store(reach, std::memory_order_relaxed);
  const std::lock_guard lock(peers_lock);
  peers_enabled.clear();
  current = 0;
}
std::uint64_t calls_across_devices() noexcept { return misplaced.load(std::memory_order_relaxed); }

bool peer_access_enabled(int device, int peer) noexcept {
  const std::lock_guard lock(peers_lock);
  return peers_enabled.contains({device, peer});
}

int current_device() noexcept { return current; }

int device_of(cudaStream_t stream) noexcept {
  stream = plain(stream);
  return stream == nullptr ? current : reinterpret_cast<const stream_object*>(stream)->device;
}

bool is_current(int device) noexcept {
  if (device == current) return true;
  (void)refuse_across_devices();
  return false;
}

bool launchable_on(cudaStream_t stream) noexcept { return is_current(device_of(stream)); }

}  // namespace crema::test::counting_cuda

using crema::test::counting_cuda::call;
using crema::test::counting_cuda::current;
using crema::test::counting_cuda::device_of_event;
using crema::test::counting_cuda::device_of_stream;
using crema::test::counting_cuda::devices;
using crema::test::counting_cuda::enter;
using crema::test::counting_cuda::event_object;
using crema::test::counting_cuda::fail;
using crema::test::counting_cuda::is_event;
using crema::test::counting_cuda::is_stream;
using crema::test::counting_cuda::last_error;
using crema::test::counting_cuda::live_events;
using crema::test::counting_cuda::live_streams;
using crema::test::counting_cuda::peers_enabled;
using crema::test::counting_cuda::peers_lock;
using crema::test::counting_cuda::peers_reach;
using crema::test::counting_cuda::refuse_across_devices;
using crema::test::counting_cuda::spinning;
using crema::test::counting_cuda::stream_call;
using crema::test::counting_cuda::stream_object;

namespace {

// What was allocated where, for cudaPointerGetAttributes: start address to size, kind and the
// device current when it was made.
struct allocation {
  std::size_t bytes;
  cudaMemoryType type;
  int device;
};
std::mutex allocations_lock;
std::map<std::uintptr_t, allocation> allocations;

cudaError_t allocate(void** pointer, std::size_t bytes, cudaMemoryType type) {
  *pointer = nullptr;
  if (const cudaError_t error = enter(call::allocate)) return error;
  *pointer = std::malloc(bytes == 0 ? 1 : bytes);
  if (*pointer == nullptr) return fail(cudaErrorMemoryAllocation);
  const std::lock_guard lock(allocations_lock);
  allocations[reinterpret_cast<std::uintptr_t>(*pointer)] = {bytes, type, current};
  return cudaSuccess;
}

// The device of the allocation that starts at `pointer`: the current one where none does.
int device_of_allocation(const void* pointer) {
  const std::lock_guard lock(allocations_lock);
  const auto found = allocations.find(reinterpret_cast<std::uintptr_t>(pointer));
  return found != allocations.end() ? found->second.device : current;
}

// The allocation that `pointer` points into, if any.
std::optional<allocation> allocation_holding(const void* pointer) {
  const auto at = reinterpret_cast<std::uintptr_t>(pointer);
  const std::lock_guard lock(allocations_lock);
  auto after = allocations.upper_bound(at);
  if (after == allocations.begin()) return std::nullopt;
  const auto& [start, made] = *std::prev(after);
  if (at >= start + made.bytes) return std::nullopt;
  return made;
}

// The device of the device memory that `pointer` points into; -1 where it points into none.
int device_of_memory(const void* pointer) {
  const std::optional<allocation> made = allocation_holding(pointer);
  return made && made->type == cudaMemoryTypeDevice ? made->device : -1;
}

}  // namespace

crema::test::counting_cuda::held_objects crema::test::counting_cuda::held() {
  const std::lock_guard lock(allocations_lock);
  return {.allocations = allocations.size(),
          .streams = live_streams.load(std::memory_order_relaxed),
          .events = live_events.load(std::memory_order_relaxed)};
}

extern "C" {

cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  *count = devices.load(std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  *device = current;
  return enter(call::get_device);
}
cudaError_t CUDARTAPI cudaSetDevice(int device) {
  if (const cudaError_t error = enter(call::set_device, device)) return error;
  if (device < 0 || device >= devices.load(std::memory_order_relaxed)) {
    return fail(cudaErrorInvalidDevice);
  }
  current = device;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGetLastError() { return std::exchange(last_error, cudaSuccess); }
// The names of the errors crema's tests meet; the others, one for all.
const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorPeerAccessUnsupported:
      return "cudaErrorPeerAccessUnsupported";
    case cudaErrorPeerAccessAlreadyEnabled:
      return "cudaErrorPeerAccessAlreadyEnabled";
    default:
      return "cudaError (counting runtime)";
  }
}
const char* CUDARTAPI cudaGetErrorString(cudaError_t error) { return cudaGetErrorName(error); }

// As a GPU's runtime: a device cannot be its own peer; enabling access twice is an error (which
// the caller clears), and so is enabling it where the devices cannot reach each other.
cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  *can_access = 0;
  if (const cudaError_t error = enter(call::peer_access, device)) return error;
  const int count = devices.load(std::memory_order_relaxed);
  if (device < 0 || device >= count || peer < 0 || peer >= count) {
    return fail(cudaErrorInvalidDevice);
  }
  *can_access = device != peer && peers_reach.load(std::memory_order_relaxed) ? 1 : 0;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (const cudaError_t error = enter(call::peer_access)) return error;
  if (flags != 0) return fail(cudaErrorInvalidValue);
  if (peer < 0 || peer >= devices.load(std::memory_order_relaxed) || peer == current) {
    return fail(cudaErrorInvalidDevice);
  }
  if (!peers_reach.load(std::memory_order_relaxed)) return fail(cudaErrorPeerAccessUnsupported);
  const std::lock_guard lock(peers_lock);
  if (!peers_enabled.emplace(current, peer).second) {
    return fail(cudaErrorPeerAccessAlreadyEnabled);
  }
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMalloc(void** pointer, size_t bytes) {
  return allocate(pointer, bytes, cudaMemoryTypeDevice);
}
cudaError_t CUDARTAPI cudaHostAlloc(void** pointer, size_t bytes, unsigned int /*flags*/) {
  return allocate(pointer, bytes, cudaMemoryTypeHost);
}
cudaError_t CUDARTAPI cudaMallocHost(void** pointer, size_t bytes) {
  return allocate(pointer, bytes, cudaMemoryTypeHost);
}
cudaError_t CUDARTAPI cudaFree(void* pointer) {
  // Freed all the same: see fail_call.
  const cudaError_t error = enter(call::free, device_of_allocation(pointer));
  if (pointer != nullptr) {
    const std::lock_guard lock(allocations_lock);
    allocations.erase(reinterpret_cast<std::uintptr_t>(pointer));
  }
  std::free(pointer);
  return error;
}
cudaError_t CUDARTAPI cudaFreeHost(void* pointer) { return cudaFree(pointer); }
// Device memory and pinned memory as they were allocated; anything else is pageable.
cudaError_t CUDARTAPI cudaPointerGetAttributes(cudaPointerAttributes* attributes,
                                               const void* pointer) {
  *attributes = {};
  attributes->type = cudaMemoryTypeUnregistered;
  if (const std::optional<allocation> made = allocation_holding(pointer)) {
    attributes->type = made->type;
    attributes->device = made->device;
  }
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemset(void* destination, int value, size_t bytes) {
  if (const cudaError_t error = enter(call::memcpy)) return error;
  std::memset(destination, value, bytes);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpy(void* destination, const void* source, size_t bytes,
                                 cudaMemcpyKind /*kind*/) {
  if (const cudaError_t error = enter(call::memcpy)) return error;
  std::memcpy(destination, source, bytes);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpyAsync(void* destination, const void* source, size_t bytes,
                                      cudaMemcpyKind /*kind*/, cudaStream_t stream) {
  if (const cudaError_t error = enter(call::memcpy_async, device_of_stream(stream))) {
    return error;
  }
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  const stream_call on(stream);
  std::memcpy(destination, source, bytes);
  return cudaSuccess;
}

// A peer copy names both devices: memory given for another device than the one named is refused,
// as mixing devices is.
cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void* destination, int destination_device,
                                          const void* source, int source_device, size_t bytes,
                                          cudaStream_t stream) {
  if (const cudaError_t error = enter(call::memcpy_async, device_of_stream(stream))) {
    return error;
  }
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  const int count = devices.load(std::memory_order_relaxed);
  if (destination_device < 0 || destination_device >= count || source_device < 0 ||
      source_device >= count) {
    return fail(cudaErrorInvalidDevice);
  }
  if (device_of_memory(destination) != destination_device ||
      device_of_memory(source) != source_device) {
    return refuse_across_devices();
  }
  const stream_call on(stream);
  std::memcpy(destination, source, bytes);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* stream) {
  *stream = nullptr;
  if (const cudaError_t error = enter(call::stream_create)) return error;
  *stream = reinterpret_cast<cudaStream_t>(new (std::nothrow) stream_object);
  if (*stream == nullptr) return fail(cudaErrorMemoryAllocation);
  live_streams.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int /*flags*/) {
  return cudaStreamCreate(stream);
}
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  // Destroyed all the same.
  const cudaError_t error = enter(call::stream_destroy, device_of_stream(stream));
  if (stream == nullptr || !is_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<stream_object*>(stream);
  live_streams.fetch_sub(1, std::memory_order_relaxed);
  return error;
}
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  if (const cudaError_t error = enter(call::stream_synchronize, device_of_stream(stream))) {
    return error;
  }
  return is_stream(stream) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                          unsigned int /*flags*/) {
  if (const cudaError_t error =
          enter(call::stream_wait_event, device_of_stream(stream), device_of_event(event))) {
    return error;
  }
  const stream_call on(is_stream(stream) ? stream : nullptr);
  return is_stream(stream) && is_event(event) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) {
  *event = nullptr;
  if (const cudaError_t error = enter(call::event_create)) return error;
  *event = reinterpret_cast<cudaEvent_t>(new (std::nothrow) event_object);
  if (*event == nullptr) return fail(cudaErrorMemoryAllocation);
  live_events.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  const cudaError_t status = cudaEventCreate(event);
  if (status == cudaSuccess) {
    reinterpret_cast<event_object*>(*event)->blocking = (flags & cudaEventBlockingSync) != 0;
  }
  return status;
}
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  // Destroyed all the same.
  const cudaError_t error = enter(call::event_destroy, device_of_event(event));
  if (!is_event(event)) return fail(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<event_object*>(event);
  live_events.fetch_sub(1, std::memory_order_relaxed);
  return error;
}
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (const cudaError_t error = enter(call::event_record, device_of_event(event))) return error;
  if (!is_event(event) || !is_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  // As on a GPU: an event is recorded on a stream of the device it was made on.
  if (reinterpret_cast<const event_object*>(event)->device !=
      crema::test::counting_cuda::device_of(stream)) {
    return refuse_across_devices();
  }
  const stream_call on(stream);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
  if (const cudaError_t error = enter(call::event_query, device_of_event(event))) return error;
  return is_event(event) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  if (const cudaError_t error = enter(call::event_synchronize, device_of_event(event))) {
    return error;
  }
  if (!is_event(event)) return fail(cudaErrorInvalidResourceHandle);
  if (!reinterpret_cast<const event_object*>(event)->blocking) {
    spinning.fetch_add(1, std::memory_order_relaxed);
  }
  return cudaSuccess;
}

}  // extern "C"
