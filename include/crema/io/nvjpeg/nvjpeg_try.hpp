#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/error.hpp>

#include <nvjpeg.h>

#include <string_view>

/// @file
/// Checking nvJPEG calls: a failed call becomes a `crema::cuda_error` naming the call, the device
/// and the status (its code is the `nvjpegStatus_t`). Component `crema::nvjpeg`.

/// @brief Runs an nvJPEG call and throws `crema::cuda_error` unless it returns
/// `NVJPEG_STATUS_SUCCESS`: "<call> failed on device <D>: <status name>", D the current device.
#define CREMA_NVJPEG_TRY(call) ::crema::detail::nvjpeg_check((call), #call)

namespace crema::detail {

/// @return the status's name, as nvjpeg.h spells it
[[nodiscard]] constexpr std::string_view nvjpeg_status_name(nvjpegStatus_t status) noexcept {
  switch (status) {
    case NVJPEG_STATUS_SUCCESS:
      return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED:
      return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER:
      return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG:
      return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED:
      return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH:
      return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR:
      return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
      return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
  }
  return "an unknown nvJPEG status";
}

/// @return whether the status says the image is at fault (corrupt, cut short, or of a kind
///         nvJPEG does not decode), not the library or the device
[[nodiscard]] constexpr bool nvjpeg_blames_image(nvjpegStatus_t status) noexcept {
  return status == NVJPEG_STATUS_BAD_JPEG || status == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
         status == NVJPEG_STATUS_INCOMPLETE_BITSTREAM;
}

/// Throws `crema::cuda_error` for a failed `status`; `call` is the call's source text.
inline void nvjpeg_check(nvjpegStatus_t status, const char* call) {
  if (status != NVJPEG_STATUS_SUCCESS) [[unlikely]] {
    fail_with_code<cuda_error>(static_cast<int>(status), "{} failed{}: {}", call,
                               on_current_device(), nvjpeg_status_name(status));
  }
}

}  // namespace crema::detail
