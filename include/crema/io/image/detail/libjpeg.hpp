#pragma once

// libjpeg's API (libjpeg-turbo's libjpeg62), made safe to call from C++: libjpeg reports errors
// by calling `error_exit`, which must not return, and crema's jumps back with longjmp. A longjmp
// must not leave a frame that has objects to destroy, so each call that may fail runs inside a
// function of its own that holds nothing but the setjmp, and returns false instead; the C++ code
// around it throws then, naming the record.

#include <cstddef>
#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>

namespace crema::detail {

struct libjpeg_errors {
  jpeg_error_mgr manager{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  bool accept_warnings = false;
};

extern "C" inline void crema_libjpeg_error_exit(j_common_ptr info) {
  auto* errors = reinterpret_cast<libjpeg_errors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// Level -1 is a warning: corrupt data that libjpeg would go on decoding past (a file cut short
// is "premature end of data"). Refused unless the caller accepts warnings; traces are ignored.
extern "C" inline void crema_libjpeg_emit_message(j_common_ptr info, int level) {
  if (level >= 0) return;
  auto* errors = reinterpret_cast<libjpeg_errors*>(info->err);
  ++info->err->num_warnings;
  if (errors->accept_warnings) return;
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// Each returns false where libjpeg failed; the message is in the error manager.
inline bool libjpeg_create(jpeg_decompress_struct& info, libjpeg_errors& errors) {
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = crema_libjpeg_error_exit;
  errors.manager.emit_message = crema_libjpeg_emit_message;
  if (setjmp(errors.jump)) return false;
  jpeg_create_decompress(&info);
  return true;
}

inline bool libjpeg_read_header(jpeg_decompress_struct& info, libjpeg_errors& errors,
                                const unsigned char* bytes, std::size_t size) {
  if (setjmp(errors.jump)) return false;
  errors.manager.num_warnings = 0;
  jpeg_mem_src(&info, bytes, static_cast<unsigned long>(size));
  return jpeg_read_header(&info, TRUE) == JPEG_HEADER_OK;
}

inline bool libjpeg_start(jpeg_decompress_struct& info, libjpeg_errors& errors) {
  if (setjmp(errors.jump)) return false;
  return jpeg_start_decompress(&info) == TRUE;
}

inline bool libjpeg_crop(jpeg_decompress_struct& info, libjpeg_errors& errors,
                         JDIMENSION& x_offset, JDIMENSION& width) {
  if (setjmp(errors.jump)) return false;
  jpeg_crop_scanline(&info, &x_offset, &width);
  return true;
}

inline bool libjpeg_skip(jpeg_decompress_struct& info, libjpeg_errors& errors,
                         JDIMENSION rows) {
  if (setjmp(errors.jump)) return false;
  return jpeg_skip_scanlines(&info, rows) == rows;
}

inline bool libjpeg_read(jpeg_decompress_struct& info, libjpeg_errors& errors, JSAMPARRAY rows,
                         JDIMENSION count, JDIMENSION& read) {
  if (setjmp(errors.jump)) return false;
  read = jpeg_read_scanlines(&info, rows, count);
  return true;
}

// Ends a decompression wherever it stands (rows below a window are never decoded); the object
// can decode the next image.
inline void libjpeg_abort(jpeg_decompress_struct& info) noexcept { jpeg_abort_decompress(&info); }

inline void libjpeg_destroy(jpeg_decompress_struct& info) noexcept {
  jpeg_destroy_decompress(&info);
}

}  // namespace crema::detail
