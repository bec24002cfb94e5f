#pragma once

#include <crema/core/error.hpp>
#include <crema/io/image/detail/image_file_source.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace crema {

/// @brief A source over Caffe's `ImageData` list file: one `relative/path label` per line, the
/// paths under a root folder.
///
/// The label is the last word of a line (so paths may hold spaces) and an integer in the range
/// of `int`; blank lines are skipped, a line may end in "\r\n". Paths are relative to the root
/// and may not leave it (no absolute path, no ".." above it). Files are listed in the list's
/// order; nothing is read from them until a transform reads one (`image_file_reader`), and a
/// missing file is an error then, naming the file and its line.
///
/// An indexed source (`shard_cursor`): shuffle, shard, seek and epochs as every indexed source.
/// One thread at a time, as every source.
class image_list_source : public detail::image_file_source<image_list_source> {
 public:
  static constexpr const char* source_name = "image_list_source";

  /// @brief Reads the list once.
  /// @param list the list file (a `std::filesystem::path` converts to it, as a C string does)
  /// @param root the folder the paths are relative to
  /// @throws crema::io_error naming the list if it cannot be read; crema::format_error naming
  ///         the list and the line for a line without a label, a label that is not an integer
  ///         or is out of `int`'s range, or a path that is empty or leaves the root;
  ///         crema::config_error naming the list if it names no file
  image_list_source(const std::string& list, const std::string& root)
      : detail::image_file_source<image_list_source>(root, list, parse(list, root)) {}

  [[nodiscard]] std::string key() const { return "image_list:" + list() + "@" + this->root(); }
  /// @return the list file's path
  [[nodiscard]] std::string list() const { return std::string(file(0).list); }

 private:
  static detail::image_file_table parse(const std::string& list, const std::string& root);
  static void add_line(detail::image_file_table& table, std::string_view line,
                       const std::string& list, std::size_t number, const std::string& root);
};

static_assert(record_source<image_list_source>);
static_assert(keyed_record_source<image_list_source>);

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/image/detail/image_list_source_impl.hpp>
#endif
