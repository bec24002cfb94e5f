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
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

/// @file
/// A shard on a local (or network) filesystem or behind a URL, read at byte offsets
/// (`shard_file`), and the shards of a data set, opened on demand and shared by the threads that
/// read them (`shard_set`): what the tar and TFRecord readers take. URLs are read through a
/// `shard_storage` (crema::http's `http_storage` reads HTTP, HTTPS and S3). Component: core.

namespace crema {

/// @brief Where shards named by a URL (`scheme://...`) are read from: crema::http's
/// `http_storage` (HTTP(S) and S3, through libcurl), or an engine's own. An implementation is
/// thread-safe: the producers read through one storage at once, each read of its own bytes.
class shard_storage {
 public:
  shard_storage() = default;
  shard_storage(const shard_storage&) = delete;
  shard_storage& operator=(const shard_storage&) = delete;
  virtual ~shard_storage() = default;

  /// @return the size in bytes of the object at `url`
  /// @throws crema::io_error naming the URL if it cannot be asked (after the storage's retries);
  ///         crema::config_error naming it for a scheme the storage does not read
  [[nodiscard]] virtual std::uint64_t size(const std::string& url) const = 0;
  /// @brief Reads `into.size()` bytes of the object at `url` from `offset`, all of them.
  /// @throws crema::io_error naming the URL and the byte offset if the read fails (after the
  ///         storage's retries) or the object ends first
  virtual void read(const std::string& url, std::uint64_t offset,
                    std::span<std::byte> into) const = 0;
};

/// @return whether `name` is a URL (`scheme://...`, the scheme letters, digits, `+`, `-` or `.`),
///         which a `shard_storage` reads, rather than a path
[[nodiscard]] inline bool is_url(std::string_view name) noexcept {
  const std::size_t colon = name.find("://");
  if (colon == std::string_view::npos || colon == 0) return false;
  return std::all_of(name.begin(), name.begin() + static_cast<std::ptrdiff_t>(colon), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '-' || c == '.';
  });
}

/// @brief One shard, opened for reading at any offset: a file (`pread`: one file serves several
/// threads at once, and nothing is read ahead of what is asked), or a URL read through a
/// `shard_storage` (one request a read).
class shard_file {
 public:
  /// @param path    a file's path, or a URL that `storage` reads
  /// @param storage where URLs are read from; none: `path` must be a file's
  /// @throws crema::io_error naming the path if it does not open or is not a regular file, or
  ///         as the storage does for a URL; crema::config_error naming a URL given no storage
  explicit shard_file(std::string path, std::shared_ptr<const shard_storage> storage = nullptr)
      : shard_file(std::move(path), std::move(storage), std::nullopt) {}
  /// @brief A URL whose size is known already (asked once by a `shard_set`): nothing is asked.
  shard_file(std::string path, std::shared_ptr<const shard_storage> storage,
             std::optional<std::uint64_t> url_size)
      : path_(std::move(path)) {
    if (is_url(path_)) {
      if (storage == nullptr) {
        detail::fail<config_error>(
            "shard {}: a URL, and no storage to read it through was given (crema::http's "
            "http_storage reads HTTP, HTTPS and S3 URLs)",
            path_);
      }
      size_ = url_size ? *url_size : storage->size(path_);
      storage_ = std::move(storage);
      return;
    }
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
      : path_(std::move(other.path_)),
        storage_(std::move(other.storage_)),
        fd_(std::exchange(other.fd_, -1)),
        size_(other.size_) {}
  shard_file& operator=(shard_file&& other) noexcept {
    std::swap(path_, other.path_);
    std::swap(storage_, other.storage_);
    std::swap(fd_, other.fd_);
    std::swap(size_, other.size_);
    return *this;
  }
  shard_file(const shard_file&) = delete;
  shard_file& operator=(const shard_file&) = delete;
  ~shard_file() {
    if (fd_ >= 0) ::close(fd_);
  }

  /// @return the shard's size in bytes, when it was opened
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// @return the path or URL it was opened by
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// @return whether it is read through a storage (a URL), not from a file
  [[nodiscard]] bool is_remote() const noexcept { return storage_ != nullptr; }

  /// @brief Reads `into.size()` bytes from `offset`, all of them.
  /// @throws crema::io_error naming the path and the offset if the shard ends first or a read
  ///         fails
  void read_at(std::uint64_t offset, std::span<std::byte> into) const {
    if (storage_ != nullptr) {
      if (offset > size_ || into.size() > size_ - offset) {
        detail::fail_with_code<io_error>(0, "shard {}: ends at byte {}, short of byte {}", path_,
                                         size_, offset + into.size());
      }
      storage_->read(path_, offset, into);
      return;
    }
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
  std::shared_ptr<const shard_storage> storage_;  // for a URL
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// @brief The shards of a data set by number, each opened when first read and kept open while
/// among the most recently used (at most `most_open` at once, so a data set of thousands of
/// shards stays within the process's file limit). Thread-safe: producers read samples of any
/// shard at once, each read holding its file open while it reads. Shards named by URL are read
/// through `storage`.
class shard_set {
 public:
  explicit shard_set(std::vector<std::string> paths,
                     std::shared_ptr<const shard_storage> storage = nullptr,
                     std::size_t most_open = 16)
      : paths_(std::move(paths)),
        storage_(std::move(storage)),
        most_open_(std::max<std::size_t>(1, most_open)) {}

  /// @return shard `s`'s path
  [[nodiscard]] const std::string& path(std::size_t s) const { return paths_.at(s); }
  /// @return the shards' paths
  [[nodiscard]] const std::vector<std::string>& paths() const noexcept { return paths_; }
  [[nodiscard]] std::size_t size() const noexcept { return paths_.size(); }
  /// @return where its URLs are read from (none where it was given none)
  [[nodiscard]] const std::shared_ptr<const shard_storage>& storage() const noexcept {
    return storage_;
  }

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
    // Opened with the lock released; a URL's size asked once, the first time.
    std::optional<std::uint64_t> known;
    {
      const std::scoped_lock lock(mutex_);
      if (s < url_sizes_.size() && url_sizes_[s] != unknown_size) known = url_sizes_[s];
    }
    auto opened = std::make_shared<const shard_file>(paths_.at(s), storage_, known);
    const std::scoped_lock lock(mutex_);
    if (opened->is_remote()) {
      url_sizes_.resize(paths_.size(), unknown_size);
      url_sizes_[s] = opened->size();
    }
    if (open_.size() >= most_open_) open_.pop_back();  // closed once its last read ends
    open_.insert(open_.begin(), {s, opened});
    return opened;
  }

 private:
  static constexpr std::uint64_t unknown_size = ~std::uint64_t{0};

  std::vector<std::string> paths_;
  std::shared_ptr<const shard_storage> storage_;
  std::size_t most_open_;
  mutable std::vector<std::uint64_t> url_sizes_;  // a URL's size once asked, else unknown_size
  mutable std::mutex mutex_;
  mutable std::vector<std::pair<std::size_t, std::shared_ptr<const shard_file>>> open_;
};

namespace detail {

// A source's key over `shards`: "<prefix>:<first shard>+<shards after it>".
[[nodiscard]] inline std::string shards_key(std::string_view prefix, const shard_set& shards) {
  return std::string(prefix) + ":" + shards.path(0) + "+" + std::to_string(shards.size() - 1);
}

}  // namespace detail
}  // namespace crema
