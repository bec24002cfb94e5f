#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/error.hpp>
#include <crema/io/decode_plan.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_try.hpp>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

// nvJPEG's objects, owned, and the calls on them that the decoder, a plan and its decoding ahead
// share.

namespace crema::detail {

// An nvJPEG object, owned: destroyed with `Destroy`.
template <auto Destroy>
struct nvjpeg_deleter {
  template <class Handle>
  void operator()(Handle handle) const noexcept {
    (void)Destroy(handle);
  }
};
template <class Handle, auto Destroy>
using nvjpeg_owned = std::unique_ptr<std::remove_pointer_t<Handle>, nvjpeg_deleter<Destroy>>;
using nvjpeg_stream = nvjpeg_owned<nvjpegJpegStream_t, &nvjpegJpegStreamDestroy>;
using nvjpeg_params = nvjpeg_owned<nvjpegDecodeParams_t, &nvjpegDecodeParamsDestroy>;
using nvjpeg_state = nvjpeg_owned<nvjpegJpegState_t, &nvjpegJpegStateDestroy>;
using nvjpeg_pinned_buffer = nvjpeg_owned<nvjpegBufferPinned_t, &nvjpegBufferPinnedDestroy>;
using nvjpeg_device_buffer = nvjpeg_owned<nvjpegBufferDevice_t, &nvjpegBufferDeviceDestroy>;

// Leaves owned nvJPEG objects to the process's end, undestroyed: after CUDA fails for good
// (`nvjpeg_library::failed_for_good`).
template <class Object, auto Destroy>
void leave_undestroyed(std::unique_ptr<Object, nvjpeg_deleter<Destroy>>& owned) noexcept {
  (void)owned.release();
}
template <class Owned, std::size_t Extent>
void leave_undestroyed(std::span<Owned, Extent> owned) noexcept {
  for (Owned& object : owned) leave_undestroyed(object);
}

// For destructors: waits for `event`, made with cudaEventBlockingSync, unless the runtime already
// reports a failure, as every call does after a kernel's fault. On a GPU, a test's teardown after
// such a fault has hung in a driver's wait, in a process whose sleeping waits were these or
// nvJPEG's own (benchmarks/HISTORY.md); a wait for work the fault stopped need not end.
inline void wait_unless_failed(cudaEvent_t event) noexcept {
  const cudaError_t status = cudaEventQuery(event);
  if (status != cudaErrorNotReady) return;  // done, or failed: nothing to wait for
  (void)cudaGetLastError();
  (void)cudaEventSynchronize(event);
}

// nvJPEG's host phase of one image with a GPU-assisted decoder: its errors name the image.
inline void nvjpeg_host_phase(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder,
                              nvjpegJpegState_t state, nvjpegDecodeParams_t params,
                              nvjpegJpegStream_t parsed, std::string_view key) {
  const nvjpegStatus_t status = nvjpegDecodeJpegHost(handle, decoder, state, params, parsed);
  if (status == NVJPEG_STATUS_SUCCESS) return;
  if (nvjpeg_blames_image(status)) {
    fail<format_error>("image {}: nvJPEG cannot decode it: {}", key, nvjpeg_status_name(status));
  }
  nvjpeg_check(status, "nvjpegDecodeJpegHost");
}

// Grows `streams` (or `params`) to `n`, made with `handle`.
inline void grow_nvjpeg(nvjpegHandle_t handle, std::size_t n, std::vector<nvjpeg_stream>& streams) {
  while (streams.size() < n) {
    nvjpegJpegStream_t stream = nullptr;
    CREMA_NVJPEG_TRY(nvjpegJpegStreamCreate(handle, &stream));
    streams.emplace_back(stream);
  }
}
inline void grow_nvjpeg(nvjpegHandle_t handle, std::size_t n, std::vector<nvjpeg_params>& params) {
  while (params.size() < n) {
    nvjpegDecodeParams_t made = nullptr;
    CREMA_NVJPEG_TRY(nvjpegDecodeParamsCreate(handle, &made));
    params.emplace_back(made);
  }
}

// The decode parameters of one window in `format`.
inline void set_nvjpeg_window(nvjpegDecodeParams_t params, nvjpegOutputFormat_t format,
                              const pixel_window& w) {
  CREMA_NVJPEG_TRY(nvjpegDecodeParamsSetOutputFormat(params, format));
  CREMA_NVJPEG_TRY(nvjpegDecodeParamsSetROI(params, static_cast<int>(w.left),
                                            static_cast<int>(w.top), static_cast<int>(w.width),
                                            static_cast<int>(w.height)));
}

[[nodiscard]] inline image_transform_options at_full_size(image_transform_options options) {
  options.decode.dct_scaling = false;  // nvJPEG does not scale the DCT
  return options;
}

[[nodiscard]] inline nvjpegOutputFormat_t nvjpeg_output_of(
    const image_transform_options& options) noexcept {
  if (options.decode.channels == 1) return NVJPEG_OUTPUT_Y;
  return options.decode.order == channel_order::rgb ? NVJPEG_OUTPUT_RGBI : NVJPEG_OUTPUT_BGRI;
}

}  // namespace crema::detail
