#pragma once

#include <crema/core/error.hpp>
#include <crema/io/image/detail/image_file_source.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/pipeline/source.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
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
  /// @throws crema::config_error naming the path if ROOT does not exist, is not a folder, holds
  ///         no class folder, or a class folder holds no image file; crema::io_error naming
  ///         the path if a folder cannot be read
  explicit image_folder_source(const std::filesystem::path& root,
                               const image_folder_options& options = {})
      : image_folder_source(scan(root, options)) {}

  [[nodiscard]] std::string key() const { return "image_folder:" + root(); }
  /// @return the class names, by label
  [[nodiscard]] const std::vector<std::string>& classes() const noexcept { return classes_; }

 private:
  struct scanned {
    std::string root;
    detail::image_file_table table;
    std::vector<std::string> classes;
  };

  explicit image_folder_source(scanned found)
      : detail::image_file_source<image_folder_source>(std::move(found.root), {},
                                                       std::move(found.table)),
        classes_(std::move(found.classes)) {}

  static bool is_image(const std::string& name, const image_folder_options& options) {
    return std::any_of(options.extensions.begin(), options.extensions.end(),
                       [&](const std::string& extension) {
                         return name.size() >= extension.size() &&
                                std::equal(extension.rbegin(), extension.rend(), name.rbegin(),
                                           [](char a, char b) {
                                             return std::tolower(static_cast<unsigned char>(a)) ==
                                                    std::tolower(static_cast<unsigned char>(b));
                                           });
                       });
  }

  [[noreturn]] static void io_failed(const std::filesystem::path& path,
                                     const std::error_code& error) {
    detail::fail_with_code<io_error>(error.value(), "image_folder_source: cannot read {}: {}",
                                     path.string(), error.message());
  }

  static scanned scan(const std::filesystem::path& root, const image_folder_options& options) {
    namespace fs = std::filesystem;
    std::error_code error;
    if (!fs::exists(root, error)) {
      detail::fail<config_error>("image_folder_source: {} does not exist", root.string());
    }
    if (!fs::is_directory(root, error)) {
      detail::fail<config_error>("image_folder_source: {} is not a folder", root.string());
    }
    scanned found;
    found.root = root.string();
    fs::directory_iterator classes(root, error);
    if (error) io_failed(root, error);
    for (const fs::directory_entry& entry : classes) {
      if (entry.is_directory(error)) found.classes.push_back(entry.path().filename().string());
    }
    std::sort(found.classes.begin(), found.classes.end());
    if (found.classes.empty()) {
      detail::fail<config_error>(
          "image_folder_source: {} holds no class folder (expected ROOT/CLASS/FILE)",
          root.string());
    }
    if (found.classes.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
      detail::fail<config_error>("image_folder_source: {} holds {} classes, more than labels hold",
                                 root.string(), found.classes.size());
    }

    // A class's files as torchvision lists them: sorted(os.walk(folder)) orders by the folder's
    // path, then each folder's files by name.
    std::vector<std::pair<std::string, std::string>> files;  // (folder, name), relative to root
    for (std::size_t label = 0; label < found.classes.size(); ++label) {
      const fs::path class_folder = root / found.classes[label];
      files.clear();
      fs::recursive_directory_iterator walk(class_folder,
                                            fs::directory_options::follow_directory_symlink, error);
      if (error) io_failed(class_folder, error);
      for (; walk != fs::recursive_directory_iterator(); walk.increment(error)) {
        if (error) io_failed(class_folder, error);
        const fs::directory_entry& entry = *walk;
        if (entry.is_directory(error)) continue;
        std::string name = entry.path().filename().string();
        if (!is_image(name, options)) continue;
        files.emplace_back(entry.path().parent_path().lexically_relative(root).string(),
                           std::move(name));
      }
      if (error) io_failed(class_folder, error);
      if (files.empty()) {
        detail::fail<config_error>("image_folder_source: class folder {} holds no image file",
                                   class_folder.string());
      }
      std::sort(files.begin(), files.end());
      for (const auto& [folder, name] : files) {
        found.table.add(folder + '/' + name, static_cast<std::int32_t>(label), 0);
      }
    }
    return found;
  }

  std::vector<std::string> classes_;
};

static_assert(record_source<image_folder_source>);
static_assert(keyed_record_source<image_folder_source>);

}  // namespace crema
