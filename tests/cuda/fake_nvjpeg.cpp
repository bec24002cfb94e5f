// The fake nvJPEG (fake_nvjpeg.hpp): nvjpeg.h's own declarations, so that a change of signature
// fails to compile, implemented with TurboJPEG. "Device" memory is the counting runtime's, which
// is host memory: a decode writes the region of interest straight into the destination. The
// GPU-assisted decoder's phases pass the image on as nvJPEG's do: the host phase into the pinned
// buffer attached to the state, the transfer from there into the device buffer attached, the
// device phase from there; each phase refuses a state made for another decoder.

#include "fake_nvjpeg.hpp"

#include "counting_runtime.hpp"

#include <nvjpeg.h>
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace crema::test::fake_nvjpeg {
namespace {

std::mutex settings_lock;
behaviour settings;
std::atomic<std::size_t> batched_images{0};
std::atomic<std::size_t> hybrid_images{0};
std::atomic<std::size_t> host_huffman_phases{0};
std::atomic<std::size_t> gpu_huffman_phases{0};
std::atomic<std::size_t> parsed_streams{0};
std::atomic<std::size_t> initialized_states{0};
std::atomic<std::size_t> pooled_states{0};
std::atomic<std::size_t> pool_refusals{0};
std::atomic<std::size_t> pageable_inputs{0};
// The objects alive, each with the device it stands for one on (that current when it was made),
// or `on_host` (parsed streams and parameters). Those a test leaves undestroyed stay reachable
// here for LeakSanitizer, which looks at the process's exit, after static destructors: the map is
// never destroyed.
constexpr int on_host = -1;
struct live_object {
  int device = on_host;
  void (*destroy)(const void*) = nullptr;  // deletes it as what it is
};
std::mutex objects_lock;
auto& objects = *new std::unordered_map<const void*, live_object>;

template <class T>
constexpr bool on_device =
    !std::is_same_v<T, nvjpegJpegStream> && !std::is_same_v<T, nvjpegDecodeParams>;

behaviour current() {
  const std::lock_guard lock(settings_lock);
  return settings;
}

template <class T, class... Args>
T* make(Args&&... args) {
  T* const made = new T{std::forward<Args>(args)...};
  const std::lock_guard lock(objects_lock);
  objects.emplace(made,
                  live_object{on_device<T> ? crema::test::counting_cuda::current_device() : on_host,
                              [](const void* object) { delete static_cast<const T*>(object); }});
  return made;
}

template <class T>
nvjpegStatus_t destroy(T* object) {
  if (object == nullptr) return NVJPEG_STATUS_INVALID_PARAMETER;
  {
    const std::lock_guard lock(objects_lock);
    if (objects.erase(object) == 0) return NVJPEG_STATUS_INVALID_PARAMETER;
  }
  delete object;
  return NVJPEG_STATUS_SUCCESS;
}

}  // namespace

void set(const behaviour& how) noexcept {
  const std::lock_guard lock(settings_lock);
  settings = how;
}

decoded counts() noexcept {
  return {.batched = batched_images.load(),
          .hybrid = hybrid_images.load(),
          .host_huffman = host_huffman_phases.load(),
          .gpu_huffman = gpu_huffman_phases.load(),
          .parsed = parsed_streams.load(),
          .initialized = initialized_states.load(),
          .pooled = pooled_states.load(),
          .pool_refusals = pool_refusals.load(),
          .pageable_inputs = pageable_inputs.load()};
}

std::size_t live_objects() noexcept {
  const std::lock_guard lock(objects_lock);
  return objects.size();
}

std::size_t live_device_objects(int device) noexcept {
  const std::lock_guard lock(objects_lock);
  return static_cast<std::size_t>(
      std::count_if(objects.begin(), objects.end(), [&](const auto& object) {
        const int on = object.second.device;
        return on != on_host && (device == any_device || on == device);
      }));
}

std::size_t reclaim_objects() noexcept {
  std::unordered_map<const void*, live_object> left;
  {
    const std::lock_guard lock(objects_lock);
    left.swap(objects);
  }
  for (const auto& [object, what] : left) what.destroy(object);
  return left.size();
}

}  // namespace crema::test::fake_nvjpeg

namespace fake = crema::test::fake_nvjpeg;

struct nvjpegHandle {
  bool hardware = false;
  fake::behaviour how;
  int device = crema::test::counting_cuda::current_device();  // nvJPEG's, made there
};
struct nvjpegJpegStream {
  const unsigned char* data = nullptr;
  std::size_t size = 0;
  int width = 0;
  int height = 0;
  int components = 0;
  bool progressive = false;
};
struct nvjpegDecodeParams {
  nvjpegOutputFormat_t format = NVJPEG_OUTPUT_UNCHANGED;
  int left = 0;
  int top = 0;
  int width = -1;
  int height = -1;
};
struct nvjpegJpegDecoder {
  nvjpegBackend_t backend = NVJPEG_BACKEND_DEFAULT;
};
// A decoded window on its way: the host phase's result, then the transfer's.
struct fake_window {
  std::vector<unsigned char> pixels;
  int width = 0;
  int height = 0;
  int channels = 0;
  bool valid = false;
};
struct nvjpegBufferPinned {
  fake_window window;
};
struct nvjpegBufferDevice {
  fake_window window;
};
struct nvjpegJpegState {
  nvjpegJpegDecoder_t decoder = nullptr;  // a GPU-assisted decoder's state: made for it
  nvjpegBufferPinned_t pinned = nullptr;
  nvjpegBufferDevice_t device = nullptr;
  int batch_size = 0;
};

namespace {

int pixel_format(nvjpegOutputFormat_t format) {
  switch (format) {
    case NVJPEG_OUTPUT_RGBI:
      return TJPF_RGB;
    case NVJPEG_OUTPUT_BGRI:
      return TJPF_BGR;
    case NVJPEG_OUTPUT_Y:
      return TJPF_GRAY;
    default:
      return -1;
  }
}

// Decodes the whole image and keeps the parameters' region, interleaved, rows `pitch` apart.
nvjpegStatus_t decode_region(const nvjpegJpegStream& stream, const nvjpegDecodeParams& params,
                             unsigned char* to, std::size_t pitch) {
  const int format = pixel_format(params.format);
  if (format < 0 || to == nullptr) return NVJPEG_STATUS_INVALID_PARAMETER;
  const int width = params.width < 0 ? stream.width : params.width;
  const int height = params.height < 0 ? stream.height : params.height;
  if (params.left < 0 || params.top < 0 || params.left + width > stream.width ||
      params.top + height > stream.height) {
    return NVJPEG_STATUS_INVALID_PARAMETER;
  }
  const int channels = tjPixelSize[format];
  std::vector<unsigned char> whole(static_cast<std::size_t>(stream.width) * stream.height *
                                   channels);
  // Past what libjpeg only warns of, as nvJPEG does: an H100's engine decoded a stream cut
  // short without an error, the missing rows made up.
  tjhandle handle = tjInitDecompress();
  const int status = tjDecompress2(handle, stream.data, static_cast<unsigned long>(stream.size),
                                   whole.data(), stream.width, 0, stream.height, format, 0);
  const bool fatal = status != 0 && tjGetErrorCode(handle) == TJERR_FATAL;
  tjDestroy(handle);
  if (fatal) return NVJPEG_STATUS_BAD_JPEG;
  for (int y = 0; y < height; ++y) {
    std::memcpy(
        to + static_cast<std::size_t>(y) * pitch,
        whole.data() +
            (static_cast<std::size_t>(params.top + y) * stream.width + params.left) * channels,
        static_cast<std::size_t>(width) * channels);
  }
  return NVJPEG_STATUS_SUCCESS;
}

}  // namespace

namespace {

// Whether work of `handle` may be queued on `stream` into `destination` (device memory, or
// null): as on a GPU, from the handle's device, current, on a stream and into memory of it.
// What the counting runtime refuses it counts.
bool on_its_device(nvjpegHandle_t handle, cudaStream_t stream, const void* destination) {
  namespace counting = crema::test::counting_cuda;
  if (!counting::is_current(handle->device) || !counting::launchable_on(stream)) return false;
  if (destination == nullptr) return true;
  cudaPointerAttributes where{};
  return cudaPointerGetAttributes(&where, destination) == cudaSuccess &&
         where.type == cudaMemoryTypeDevice && counting::is_current(where.device);
}

}  // namespace

extern "C" {

nvjpegStatus_t NVJPEGAPI nvjpegCreateEx(nvjpegBackend_t backend, nvjpegDevAllocator_t*,
                                        nvjpegPinnedAllocator_t*, unsigned int,
                                        nvjpegHandle_t* handle) {
  const fake::behaviour how = fake::current();
  if (backend == NVJPEG_BACKEND_HARDWARE && !how.hardware_engine) {
    return NVJPEG_STATUS_ARCH_MISMATCH;
  }
  *handle = fake::make<nvjpegHandle>(backend == NVJPEG_BACKEND_HARDWARE, how);
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegDestroy(nvjpegHandle_t handle) { return fake::destroy(handle); }
nvjpegStatus_t NVJPEGAPI nvjpegGetProperty(libraryPropertyType type, int* value) {
  *value = type == MAJOR_VERSION ? 13 : 0;
  return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t NVJPEGAPI nvjpegJpegStateCreate(nvjpegHandle_t, nvjpegJpegState_t* state) {
  *state = fake::make<nvjpegJpegState>();
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegJpegStateDestroy(nvjpegJpegState_t state) {
  return fake::destroy(state);
}
nvjpegStatus_t NVJPEGAPI nvjpegDecoderCreate(nvjpegHandle_t, nvjpegBackend_t backend,
                                             nvjpegJpegDecoder_t* decoder) {
  if (backend != NVJPEG_BACKEND_HYBRID && backend != NVJPEG_BACKEND_GPU_HYBRID) {
    return NVJPEG_STATUS_INVALID_PARAMETER;
  }
  *decoder = fake::make<nvjpegJpegDecoder>(backend);
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegDecoderDestroy(nvjpegJpegDecoder_t decoder) {
  return fake::destroy(decoder);
}
nvjpegStatus_t NVJPEGAPI nvjpegDecoderStateCreate(nvjpegHandle_t, nvjpegJpegDecoder_t decoder,
                                                  nvjpegJpegState_t* state) {
  *state = fake::make<nvjpegJpegState>(decoder);
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegBufferPinnedCreate(nvjpegHandle_t, nvjpegPinnedAllocator_t*,
                                                  nvjpegBufferPinned_t* buffer) {
  *buffer = fake::make<nvjpegBufferPinned>();
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegBufferPinnedDestroy(nvjpegBufferPinned_t buffer) {
  return fake::destroy(buffer);
}
nvjpegStatus_t NVJPEGAPI nvjpegBufferDeviceCreate(nvjpegHandle_t, nvjpegDevAllocator_t*,
                                                  nvjpegBufferDevice_t* buffer) {
  *buffer = fake::make<nvjpegBufferDevice>();
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegBufferDeviceDestroy(nvjpegBufferDevice_t buffer) {
  return fake::destroy(buffer);
}
nvjpegStatus_t NVJPEGAPI nvjpegStateAttachPinnedBuffer(nvjpegJpegState_t state,
                                                       nvjpegBufferPinned_t buffer) {
  if (state == nullptr || buffer == nullptr) return NVJPEG_STATUS_INVALID_PARAMETER;
  state->pinned = buffer;
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegStateAttachDeviceBuffer(nvjpegJpegState_t state,
                                                       nvjpegBufferDevice_t buffer) {
  if (state == nullptr || buffer == nullptr) return NVJPEG_STATUS_INVALID_PARAMETER;
  state->device = buffer;
  return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t NVJPEGAPI nvjpegJpegStreamCreate(nvjpegHandle_t, nvjpegJpegStream_t* stream) {
  *stream = fake::make<nvjpegJpegStream>();
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegJpegStreamDestroy(nvjpegJpegStream_t stream) {
  return fake::destroy(stream);
}
}  // extern "C"

namespace {

// What nvjpegJpegStreamParse does, uncounted (the batched decoder's own parse of each image).
// Whether the frame header before the first scan is a progressive one (SOF2, SOF6, SOF10, SOF14).
bool is_progressive(const unsigned char* data, std::size_t length) {
  std::size_t i = 2;
  while (i + 4 <= length && data[i] == 0xFF) {
    const unsigned marker = data[i + 1];
    if (marker == 0xDA) return false;
    if (marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE) return true;
    i += 2 + (std::size_t{data[i + 2]} << 8 | data[i + 3]);
  }
  return false;
}

nvjpegStatus_t parse(const unsigned char* data, std::size_t length, nvjpegJpegStream_t stream) {
  tjhandle handle = tjInitDecompress();
  int width = 0;
  int height = 0;
  int subsampling = 0;
  int colorspace = 0;
  const int status = tjDecompressHeader3(handle, data, static_cast<unsigned long>(length), &width,
                                         &height, &subsampling, &colorspace);
  tjDestroy(handle);
  if (status != 0) return NVJPEG_STATUS_BAD_JPEG;
  stream->data = data;
  stream->size = length;
  stream->width = width;
  stream->height = height;
  stream->components = colorspace == TJCS_GRAY                                ? 1
                       : (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) ? 4
                                                                              : 3;
  stream->progressive = is_progressive(data, length);
  return NVJPEG_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

nvjpegStatus_t NVJPEGAPI nvjpegJpegStreamParse(nvjpegHandle_t, const unsigned char* data,
                                               size_t length, int, int, nvjpegJpegStream_t stream) {
  ++fake::parsed_streams;
  return parse(data, length, stream);
}
nvjpegStatus_t NVJPEGAPI nvjpegJpegStreamGetComponentsNum(nvjpegJpegStream_t stream,
                                                          unsigned int* components) {
  *components = static_cast<unsigned>(stream->components);
  return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t NVJPEGAPI nvjpegDecodeParamsCreate(nvjpegHandle_t, nvjpegDecodeParams_t* params) {
  *params = fake::make<nvjpegDecodeParams>();
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegDecodeParamsDestroy(nvjpegDecodeParams_t params) {
  return fake::destroy(params);
}
nvjpegStatus_t NVJPEGAPI nvjpegDecodeParamsSetOutputFormat(nvjpegDecodeParams_t params,
                                                           nvjpegOutputFormat_t format) {
  params->format = format;
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegDecodeParamsSetROI(nvjpegDecodeParams_t params, int left, int top,
                                                  int width, int height) {
  *params = {params->format, left, top, width, height};
  return NVJPEG_STATUS_SUCCESS;
}

// The engine takes baseline JPEGs only, as an H100's does.
nvjpegStatus_t NVJPEGAPI nvjpegDecodeBatchedSupportedEx(nvjpegHandle_t handle,
                                                        nvjpegJpegStream_t stream,
                                                        nvjpegDecodeParams_t, int* supported) {
  *supported = handle->hardware && handle->how.engine_takes_images && !stream->progressive ? 0 : 1;
  return NVJPEG_STATUS_SUCCESS;
}
// Neither GPU-assisted decoder takes four components; the GPU's Huffman decoding takes no
// progressive JPEG (NVIDIA's DALI never gives it one).
nvjpegStatus_t NVJPEGAPI nvjpegDecoderJpegSupported(nvjpegJpegDecoder_t decoder,
                                                    nvjpegJpegStream_t stream, nvjpegDecodeParams_t,
                                                    int* supported) {
  const bool refused = stream->components == 4 ||
                       (decoder->backend == NVJPEG_BACKEND_GPU_HYBRID && stream->progressive);
  *supported = refused ? 1 : 0;
  return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t NVJPEGAPI nvjpegDecodeBatchedPreAllocate(nvjpegHandle_t handle,
                                                        nvjpegJpegState_t state, int batch_size,
                                                        int width, int height,
                                                        nvjpegChromaSubsampling_t,
                                                        nvjpegOutputFormat_t format) {
  if (handle->how.pool_refused) {
    ++fake::pool_refusals;
    return NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED;
  }
  if (!handle->hardware || state == nullptr || batch_size <= 0 || width <= 0 || height <= 0 ||
      pixel_format(format) < 0) {
    return NVJPEG_STATUS_INVALID_PARAMETER;
  }
  ++fake::pooled_states;
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegDecodeBatchedInitialize(nvjpegHandle_t handle,
                                                       nvjpegJpegState_t state, int batch_size, int,
                                                       nvjpegOutputFormat_t) {
  if (!handle->hardware || batch_size <= 0) return NVJPEG_STATUS_INVALID_PARAMETER;
  state->batch_size = batch_size;
  ++fake::initialized_states;
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegDecodeBatchedEx(nvjpegHandle_t handle, nvjpegJpegState_t state,
                                               const unsigned char* const* data,
                                               const size_t* lengths, nvjpegImage_t* destinations,
                                               nvjpegDecodeParams_t* params, cudaStream_t queue) {
  if (!handle->hardware || state->batch_size <= 0) return NVJPEG_STATUS_INVALID_PARAMETER;
  for (int i = 0; i < state->batch_size; ++i) {
    if (!on_its_device(handle, queue, destinations[i].channel[0])) {
      return NVJPEG_STATUS_EXECUTION_FAILED;
    }
  }
  // A failed batch leaves the state to be set up again, as nvJPEG's header asks.
  const auto failed = [&](nvjpegStatus_t status) {
    state->batch_size = 0;
    return status;
  };
  if (handle->how.batch_fails) return failed(NVJPEG_STATUS_BAD_JPEG);
  for (int i = 0; i < state->batch_size; ++i) {
    cudaPointerAttributes where{};
    if (cudaPointerGetAttributes(&where, data[i]) != cudaSuccess ||
        where.type != cudaMemoryTypeHost) {
      ++fake::pageable_inputs;
    }
    nvjpegJpegStream stream;
    if (parse(data[i], lengths[i], &stream) != NVJPEG_STATUS_SUCCESS) {
      return failed(NVJPEG_STATUS_BAD_JPEG);
    }
    const nvjpegStatus_t status =
        decode_region(stream, *params[i], destinations[i].channel[0], destinations[i].pitch[0]);
    if (status != NVJPEG_STATUS_SUCCESS) return failed(status);
  }
  fake::batched_images += static_cast<std::size_t>(state->batch_size);
  return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t NVJPEGAPI nvjpegDecodeJpegHost(nvjpegHandle_t, nvjpegJpegDecoder_t decoder,
                                              nvjpegJpegState_t state, nvjpegDecodeParams_t params,
                                              nvjpegJpegStream_t stream) {
  const int format = pixel_format(params->format);
  if (format < 0 || state->decoder != decoder || state->pinned == nullptr) {
    return NVJPEG_STATUS_INVALID_PARAMETER;
  }
  if (fake::current().hybrid_fails) return NVJPEG_STATUS_BAD_JPEG;
  ++(decoder->backend == NVJPEG_BACKEND_HYBRID ? fake::host_huffman_phases
                                               : fake::gpu_huffman_phases);
  fake_window& window = state->pinned->window;
  window.channels = tjPixelSize[format];
  window.width = params->width < 0 ? stream->width : params->width;
  window.height = params->height < 0 ? stream->height : params->height;
  window.pixels.resize(static_cast<std::size_t>(window.width) * window.height * window.channels);
  const nvjpegStatus_t status =
      decode_region(*stream, *params, window.pixels.data(),
                    static_cast<std::size_t>(window.width) * window.channels);
  window.valid = status == NVJPEG_STATUS_SUCCESS;
  return status;
}
nvjpegStatus_t NVJPEGAPI nvjpegDecodeJpegTransferToDevice(nvjpegHandle_t handle,
                                                          nvjpegJpegDecoder_t decoder,
                                                          nvjpegJpegState_t state,
                                                          nvjpegJpegStream_t, cudaStream_t stream) {
  if (!on_its_device(handle, stream, nullptr)) return NVJPEG_STATUS_EXECUTION_FAILED;
  if (state->decoder != decoder || state->pinned == nullptr || !state->pinned->window.valid ||
      state->device == nullptr) {
    return NVJPEG_STATUS_INVALID_PARAMETER;
  }
  state->device->window = state->pinned->window;
  return NVJPEG_STATUS_SUCCESS;
}
nvjpegStatus_t NVJPEGAPI nvjpegDecodeJpegDevice(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder,
                                                nvjpegJpegState_t state, nvjpegImage_t* destination,
                                                cudaStream_t stream) {
  if (!on_its_device(handle, stream, destination->channel[0])) {
    return NVJPEG_STATUS_EXECUTION_FAILED;
  }
  if (state->decoder != decoder || state->device == nullptr || !state->device->window.valid ||
      destination->channel[0] == nullptr) {
    return NVJPEG_STATUS_INVALID_PARAMETER;
  }
  const fake_window& window = state->device->window;
  const std::size_t row = static_cast<std::size_t>(window.width) * window.channels;
  for (int y = 0; y < window.height; ++y) {
    std::memcpy(destination->channel[0] + y * destination->pitch[0], window.pixels.data() + y * row,
                row);
  }
  ++fake::hybrid_images;
  return NVJPEG_STATUS_SUCCESS;
}

}  // extern "C"
