#pragma once

#include <crema/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

/// @file
/// One image file of a data set (`image_file`, what the image sources yield) and a reader that
/// loads its bytes into a buffer it reuses (`image_file_reader`, one per producer's transform).

namespace crema {

/// @brief One image of a folder or list-file data set: where its file is and its label. The
/// views point into the source's own tables and stay valid for the source's life; nothing of
/// the file has been read (a transform reads it with an `image_file_reader`, on its producer's
/// thread, so files are read in parallel).
struct image_file {
  std::string_view root;      ///< the data set's folder
  std::string_view relative;  ///< the file, relative to `root` ("n01440764/n01440764_10026.JPEG")
  std::int32_t label = 0;     ///< the class (a folder's index) or the list file's label
  std::string_view list;      ///< the list file that named it; empty for a folder source
  std::size_t line = 0;       ///< its line in `list` (1 for the first); 0 for a folder source

  /// @return root/relative
  [[nodiscard]] std::string path() const {
    std::string joined;
    joined.reserve(root.size() + 1 + relative.size());
    append_path(joined);
    return joined;
  }
  /// @brief Appends root/relative to `out` (which allocates only if it must grow).
  void append_path(std::string& out) const {
    const std::size_t start = out.size();
    out.append(root);
    if (out.size() > start && out.back() != '/') out.push_back('/');
    out.append(relative);
  }
  /// @return the path, and for a listed file where it was listed ("... (line 7 of train.txt)")
  [[nodiscard]] std::string describe() const;
};

/// @brief How an `image_file_reader` reads.
struct image_file_reader_options {
  /// Files larger than this are refused before anything is allocated for them.
  std::size_t max_bytes = std::size_t{1} << 30;
};

/// @brief Reads image files into one buffer that it reuses: once the buffer has grown to the
/// largest file, reading allocates nothing. One per thread (a transform's copy per producer);
/// not thread-safe; movable.
class image_file_reader {
 public:
  image_file_reader() noexcept = default;
  explicit image_file_reader(image_file_reader_options options) noexcept : options_(options) {}
  image_file_reader(const image_file_reader& other) : options_(other.options_) {}
  image_file_reader& operator=(const image_file_reader& other) {
    options_ = other.options_;
    return *this;
  }
  image_file_reader(image_file_reader&&) noexcept = default;
  image_file_reader& operator=(image_file_reader&&) noexcept = default;
  ~image_file_reader() = default;

  /// @brief Reads the whole file.
  /// @return its bytes, valid until the next call
  /// @throws crema::io_error naming the file (and the list line it came from) if it does not
  ///         exist, is not a regular file, cannot be read, is empty, or is over `max_bytes`
  std::span<const std::byte> read(const image_file& file) {
    path_.clear();  // its capacity is kept: no allocation once it has grown
    file.append_path(path_);
    return read_path(path_, file, "image file");
  }

  /// @brief Reads a file given by its path.
  /// @param what names the kind of file in errors ("image list /data/train.txt: is empty")
  std::span<const std::byte> read(const std::string& path, std::string_view what = "file") {
    return read_path(path, {}, what);
  }

  [[nodiscard]] const image_file_reader_options& options() const noexcept { return options_; }

 private:
  std::span<const std::byte> read_path(const std::string& path, const image_file& file,
                                       std::string_view what);

  image_file_reader_options options_{};
  std::string path_;  // the file being read, reused
  std::unique_ptr<std::byte[]> buffer_;
  std::size_t capacity_ = 0;
};

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/image/detail/image_file_impl.hpp>
#endif
