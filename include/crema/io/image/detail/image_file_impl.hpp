#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/image/image_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

// image_file's and image_file_reader's work: compiled once in the crema::image library
// (src/image/), or included by image_file.hpp, inline, with CREMA_HEADER_ONLY.

namespace crema {

namespace detail {
// An open file, closed at scope's end.
struct file_descriptor {
  int fd = -1;
  file_descriptor() = default;
  file_descriptor(const file_descriptor&) = delete;
  file_descriptor& operator=(const file_descriptor&) = delete;
  ~file_descriptor() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace detail

CREMA_LIBRARY_INLINE std::string image_file::describe() const {
  std::string text = path();
  if (!list.empty()) {
    text += " (line " + std::to_string(line) + " of " + std::string(list) + ")";
  }
  return text;
}

CREMA_LIBRARY_INLINE std::span<const std::byte> image_file_reader::read_path(
    const std::string& path, const image_file& file, std::string_view what) {
  const auto name = [&] { return file.relative.empty() ? path : file.describe(); };
  detail::file_descriptor handle;
  handle.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (handle.fd < 0) {
    const int code = errno;
    if (code == ENOENT) {
      detail::fail_with_code<io_error>(code, "{} {}: does not exist", what, name());
    }
    detail::fail_with_code<io_error>(code, "{} {}: cannot be opened: {}", what, name(),
                                     std::strerror(code));
  }
  struct stat status {};
  if (::fstat(handle.fd, &status) != 0) {
    const int code = errno;
    detail::fail_with_code<io_error>(code, "{} {}: cannot be read: {}", what, name(),
                                     std::strerror(code));
  }
  if (!S_ISREG(status.st_mode)) {
    detail::fail_with_code<io_error>(0, "{} {}: is not a regular file", what, name());
  }
  const auto size = static_cast<std::size_t>(status.st_size);
  if (size == 0) detail::fail_with_code<io_error>(0, "{} {}: is empty", what, name());
  if (size > options_.max_bytes) {
    detail::fail_with_code<io_error>(0, "{} {}: {} bytes is over the limit of {}", what, name(),
                                     size, options_.max_bytes);
  }
  if (size > capacity_) {
    buffer_ = std::make_unique_for_overwrite<std::byte[]>(size);
    capacity_ = size;
  }
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(handle.fd, buffer_.get() + done, size - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      const int code = errno;
      detail::fail_with_code<io_error>(code, "{} {}: cannot be read: {}", what, name(),
                                       std::strerror(code));
    }
    if (got == 0) break;  // shrunk since fstat: what is there is the file
    done += static_cast<std::size_t>(got);
  }
  if (done == 0) detail::fail_with_code<io_error>(0, "{} {}: is empty", what, name());
  return {buffer_.get(), done};
}

}  // namespace crema
