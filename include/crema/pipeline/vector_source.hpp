#pragma once

#include <crema/core/error.hpp>
#include <crema/pipeline/detail/cursor_source.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace crema {

/// @brief A source over records held in memory (a `std::vector<Record>`), read in order or
/// shuffled.
///
/// Its records stay where they are, so the pipeline refers to them instead of copying.
/// Sharding, shuffling, epochs and seeking work as for every indexed source (`shard_cursor`).
template <class Record>
class vector_source : public detail::cursor_source<vector_source<Record>> {
 public:
  using record_type = Record;
  static constexpr bool records_are_stable = true;
  static constexpr const char* source_name = "vector_source";

  /// @param records the records, owned by the source
  /// @param name    names the data for `key()` ("vector:<name>")
  explicit vector_source(std::vector<Record> records, std::string name = "memory")
      : detail::cursor_source<vector_source>(records.size()),
        records_(std::move(records)),
        name_(std::move(name)) {}

  [[nodiscard]] const Record* next() noexcept {
    if (cursor_.exhausted()) return nullptr;
    const auto index = static_cast<std::size_t>(cursor_.next_index());
    cursor_.advance();
    return &records_[index];
  }
  [[nodiscard]] std::string key() const { return "vector:" + name_; }

  /// @return the number of records this shard yields in one pass
  [[nodiscard]] std::size_t size() const noexcept {
    return static_cast<std::size_t>(cursor_.size());
  }
  /// @return the record at `index` of the whole (unsharded) data
  [[nodiscard]] const Record& operator[](std::size_t index) const { return records_.at(index); }

 private:
  using detail::cursor_source<vector_source>::cursor_;

  std::vector<Record> records_;
  std::string name_;
};

static_assert(record_source<vector_source<int>>);

}  // namespace crema
