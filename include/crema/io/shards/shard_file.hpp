#pragma once

#include <crema/core/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

/// @file
/// A shard on a local (or network) filesystem, read at byte offsets (`shard_file`), and the
/// shards of a data set, opened on demand and shared by the threads that read them
/// (`shard_set`): what the tar and TFRecord readers take. Component: core.

namespace crema {

/// @brief One shard file, opened for reading at any offset (`pread`: one file serves several
/// threads at once, and nothing is read ahead of what is asked).
class shard_file {
 public:
  /// @throws crema::io_error naming the path if it does not open or is not a regular file
  explicit shard_file(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      detail::fail_with_code<io_error>(errno, "shard {}: cannot open: {}", path_,
                                       std::generic_category().message(errno));
    }
    struct stat status {};
    if (::fstat(fd_, &status) != 0 || !S_ISREG(status.st_mode)) {
      const int code = errno;
      ::close(fd_);
      detail::fail_with_code<io_error>(code, "shard {}: not a regular file", path_);
    }
    size_ = static_cast<std::uint64_t>(status.st_size);
  }
  shard_file(shard_file&& other) noexcept
      : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}
  shard_file& operator=(shard_file&& other) noexcept {
    std::swap(path_, other.path_);
    std::swap(fd_, other.fd_);
    std::swap(size_, other.size_);
    return *this;
  }
  shard_file(const shard_file&) = delete;
  shard_file& operator=(const shard_file&) = delete;
  ~shard_file() {
    if (fd_ >= 0) ::close(fd_);
  }

  /// @return the file's size in bytes, when it was opened
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// @return the path it was opened by
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  /// @brief Reads `into.size()` bytes from `offset`, all of them.
  /// @throws crema::io_error naming the path and the offset if the file ends first or a read
  ///         fails
  void read_at(std::uint64_t offset, std::span<std::byte> into) const {
    std::size_t done = 0;
    while (done < into.size()) {
      const ::ssize_t got =
          ::pread(fd_, into.data() + done, into.size() - done, static_cast<::off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        detail::fail_with_code<io_error>(errno, "shard {}: cannot read {} bytes at byte {}: {}",
                                         path_, into.size(), offset + done,
                                         std::generic_category().message(errno));
      }
      if (got == 0) {
        detail::fail_with_code<io_error>(0, "shard {}: ends at byte {}, {} bytes short of byte {}",
                                         path_, offset + done, into.size() - done,
                                         offset + into.size());
      }
      done += static_cast<std::size_t>(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// @brief The shards of a data set by number, each opened when first read and kept open while
/// among the most recently used (at most `most_open` at once, so a data set of thousands of
/// shards stays within the process's file limit). Thread-safe: producers read samples of any
/// shard at once, each read holding its file open while it reads.
class shard_set {
 public:
  explicit shard_set(std::vector<std::string> paths, std::size_t most_open = 16)
      : paths_(std::move(paths)), most_open_(std::max<std::size_t>(1, most_open)) {}

  /// @return shard `s`'s path
  [[nodiscard]] const std::string& path(std::size_t s) const { return paths_.at(s); }
  /// @return the shards' paths
  [[nodiscard]] const std::vector<std::string>& paths() const noexcept { return paths_; }
  [[nodiscard]] std::size_t size() const noexcept { return paths_.size(); }

  /// @return shard `s`, opened now if it is not open
  /// @throws crema::io_error naming the path if it does not open
  [[nodiscard]] std::shared_ptr<const shard_file> open(std::size_t s) const {
    {
      const std::scoped_lock lock(mutex_);
      const auto found = std::find_if(open_.begin(), open_.end(),
                                      [&](const auto& entry) { return entry.first == s; });
      if (found != open_.end()) {
        std::rotate(open_.begin(), found, found + 1);  // to the front: used last
        return open_.front().second;
      }
    }
    auto opened = std::make_shared<const shard_file>(paths_.at(s));  // the lock released
    const std::scoped_lock lock(mutex_);
    if (open_.size() >= most_open_) open_.pop_back();  // closed once its last read ends
    open_.insert(open_.begin(), {s, opened});
    return opened;
  }

 private:
  std::vector<std::string> paths_;
  std::size_t most_open_;
  mutable std::mutex mutex_;
  mutable std::vector<std::pair<std::size_t, std::shared_ptr<const shard_file>>> open_;
};

}  // namespace crema
