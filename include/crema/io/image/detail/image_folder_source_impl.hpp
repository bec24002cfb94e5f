#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/image/image_folder_source.hpp>

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

// image_folder_source's scan: compiled once in the crema::image library (src/image/), or
// included by image_folder_source.hpp, inline, with CREMA_HEADER_ONLY.

namespace crema {

namespace detail {

[[noreturn]] CREMA_LIBRARY_INLINE void image_folder_unreadable(const std::filesystem::path& path,
                                                               const std::error_code& error) {
  fail_with_code<io_error>(error.value(), "image_folder_source: cannot read {}: {}", path.string(),
                           error.message());
}

}  // namespace detail

CREMA_LIBRARY_INLINE image_folder_source::image_folder_source(const std::string& root,
                                                              const image_folder_options& options)
    : image_folder_source(scan(root, options)) {}

CREMA_LIBRARY_INLINE image_folder_source::image_folder_source(scanned found)
    : detail::image_file_source<image_folder_source>(std::move(found.root), {},
                                                     std::move(found.table)),
      classes_(std::move(found.classes)) {}

CREMA_LIBRARY_INLINE bool image_folder_source::is_image(const std::string& name,
                                                        const image_folder_options& options) {
  return std::any_of(
      options.extensions.begin(), options.extensions.end(), [&](const std::string& extension) {
        return name.size() >= extension.size() &&
               std::equal(extension.rbegin(), extension.rend(), name.rbegin(), [](char a, char b) {
                 return std::tolower(static_cast<unsigned char>(a)) ==
                        std::tolower(static_cast<unsigned char>(b));
               });
      });
}

CREMA_LIBRARY_INLINE image_folder_source::scanned image_folder_source::scan(
    const std::string& root_name, const image_folder_options& options) {
  namespace fs = std::filesystem;
  const fs::path root(root_name);
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
  if (error) detail::image_folder_unreadable(root, error);
  for (const fs::directory_entry& entry : classes) {
    if (entry.is_directory(error)) found.classes.push_back(entry.path().filename().string());
  }
  std::sort(found.classes.begin(), found.classes.end());
  if (found.classes.empty()) {
    detail::fail<config_error>(
        "image_folder_source: {} holds no class folder (expected ROOT/CLASS/FILE)", root.string());
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
    if (error) detail::image_folder_unreadable(class_folder, error);
    for (; walk != fs::recursive_directory_iterator(); walk.increment(error)) {
      if (error) detail::image_folder_unreadable(class_folder, error);
      const fs::directory_entry& entry = *walk;
      if (entry.is_directory(error)) continue;
      std::string name = entry.path().filename().string();
      if (!is_image(name, options)) continue;
      files.emplace_back(entry.path().parent_path().lexically_relative(root).string(),
                         std::move(name));
    }
    if (error) detail::image_folder_unreadable(class_folder, error);
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

}  // namespace crema
