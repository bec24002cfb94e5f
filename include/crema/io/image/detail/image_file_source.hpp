#pragma once

#include <crema/core/error.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/pipeline/detail/cursor_source.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crema::detail {

// Every file of an image data set: relative paths back to back in one string, and 24 bytes a
// file besides (ImageNet's 1.28 M files take about 60 MB, not a string object each).
class image_file_table {
 public:
  void add(std::string_view relative, std::int32_t label, std::size_t line) {
    entries_.push_back({paths_.size(), relative.size(), label, line});
    paths_.append(relative);
  }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  [[nodiscard]] std::string_view relative(std::size_t index) const noexcept {
    const entry& e = entries_[index];
    return std::string_view(paths_).substr(e.offset, e.length);
  }
  [[nodiscard]] std::int32_t label(std::size_t index) const noexcept {
    return entries_[index].label;
  }
  [[nodiscard]] std::size_t line(std::size_t index) const noexcept {
    return entries_[index].line;
  }
  void shrink_to_fit() {
    paths_.shrink_to_fit();
    entries_.shrink_to_fit();
  }

 private:
  struct entry {
    std::size_t offset;
    std::size_t length : 32;
    std::int32_t label;
    std::size_t line;
  };
  std::string paths_;
  std::vector<entry> entries_;
};

// What `image_folder_source` and `image_list_source` share: the table of files, the cursor, and
// `next()` building the record of the cursor's next index. Records are views into the table and
// the root, which live on the heap: valid for the source's life, wherever it moves.
template <class Derived>
class image_file_source : public cursor_source<Derived> {
 public:
  using record_type = image_file;
  static constexpr bool records_are_stable = false;

  /// @return the next file of this shard's pass (valid until the next call; its views for the
  ///         source's life), or nullptr at the end of the pass. Never throws: the file is read
  ///         by the transform.
  [[nodiscard]] const image_file* next() noexcept {
    if (cursor_.exhausted()) return nullptr;
    current_ = file(static_cast<std::size_t>(cursor_.next_index()));
    cursor_.advance();
    return &current_;
  }
  /// @return the file's path relative to the root: what errors and `sample_context::key()` show
  [[nodiscard]] std::string record_key(const image_file& file) const {
    return std::string(file.relative);
  }

  /// @return the files this shard reads in one pass
  [[nodiscard]] std::size_t size() const noexcept {
    return static_cast<std::size_t>(cursor_.size());
  }
  /// @return the files of the whole data set
  [[nodiscard]] std::size_t files() const noexcept { return data_->table.size(); }
  /// @return file `index` of the whole data set (in the source's order before any shuffle)
  [[nodiscard]] image_file file(std::size_t index) const noexcept {
    const image_file_table& table = data_->table;
    return {data_->root, table.relative(index), table.label(index), data_->list,
            table.line(index)};
  }
  /// @return the data set's folder
  [[nodiscard]] const std::string& root() const noexcept { return data_->root; }

 protected:
  image_file_source(std::string root, std::string list, image_file_table table)
      : cursor_source<Derived>(table.size()),
        data_(std::make_shared<const data>(std::move(root), std::move(list), std::move(table))) {}

  using cursor_source<Derived>::cursor_;

 private:
  // On the heap, so that the records' views stay valid when the source moves, and shared by its
  // copies (a copy is cheap: a loader makes one per restart).
  struct data {
    data(std::string root_path, std::string list_path, image_file_table files)
        : root(std::move(root_path)), list(std::move(list_path)), table(std::move(files)) {
      table.shrink_to_fit();
    }
    std::string root;
    std::string list;
    image_file_table table;
  };

  std::shared_ptr<const data> data_;  // shared by copies: immutable
  image_file current_{};
};

}  // namespace crema::detail
