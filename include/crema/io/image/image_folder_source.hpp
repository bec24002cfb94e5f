#pragma once

#include <crema/core/error.hpp>
#include <crema/io/image/detail/image_file_source.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/pipeline/source.hpp>

#include <string>
#include <vector>

namespace crema {

/// @brief How an `image_folder_source` finds its files.
struct image_folder_options {
  /// File names ending in one of these (compared without case) are images; others are left
  /// out. Those crema decodes by default.
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png"};
};

/// @brief A source over an ImageNet-style folder: ROOT/CLASS/FILE, one folder per class.
///
/// Numbered as torchvision's `ImageFolder` numbers it, so labels and order agree with it: the
/// classes are the sorted names of ROOT's folders (label 0 for the first); each class's files
/// are found in its folder and every folder below it (links followed), ordered by folder path
/// and then by file name. Files whose names end in one of `extensions` are kept.
///
/// An indexed source (`shard_cursor`): `shuffle(seed)` visits each pass in an exact permutation
/// keyed by (seed, epoch), `shard(rank, world)` keeps every world-th file, `seek` and
/// `set_epoch` resume. Records (`image_file`) name a file and its label; nothing is read until a
/// transform reads the file (`image_file_reader`), on its producer's thread. One thread at a
/// time, as every source.
class image_folder_source : public detail::image_file_source<image_folder_source> {
 public:
  static constexpr const char* source_name = "image_folder_source";

  /// @brief Scans the folder once.
  /// @param root    the folder; a `std::filesystem::path` converts to it, as a C string does
  /// @param options which files are images
  /// @throws crema::config_error naming the path if ROOT does not exist, is not a folder, holds
  ///         no class folder, or a class folder holds no image file; crema::io_error naming
  ///         the path if a folder cannot be read
  explicit image_folder_source(const std::string& root, const image_folder_options& options = {});

  [[nodiscard]] std::string key() const { return "image_folder:" + root(); }
  /// @return the class names, by label
  [[nodiscard]] const std::vector<std::string>& classes() const noexcept { return classes_; }

 private:
  struct scanned {
    std::string root;
    detail::image_file_table table;
    std::vector<std::string> classes;
  };

  explicit image_folder_source(scanned found);

  static bool is_image(const std::string& name, const image_folder_options& options);
  static scanned scan(const std::string& root, const image_folder_options& options);

  std::vector<std::string> classes_;
};

static_assert(record_source<image_folder_source>);
static_assert(keyed_record_source<image_folder_source>);

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/image/detail/image_folder_source_impl.hpp>
#endif
