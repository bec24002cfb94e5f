#pragma once

#include <crema/core/error.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace crema {

/// @brief A source over records held in memory (a `std::vector<Record>`), read in order.
///
/// Its records stay where they are, so the pipeline refers to them instead of copying.
template <class Record>
class vector_source {
 public:
  using record_type = Record;
  static constexpr bool records_are_stable = true;

  /// @param records the records, owned by the source
  /// @param name    names the data for `key()` ("vector:<name>")
  explicit vector_source(std::vector<Record> records, std::string name = "memory")
      : records_(std::move(records)), name_(std::move(name)) {}

  [[nodiscard]] const Record* next() noexcept {
    const std::size_t index = rank_ + next_ * world_;
    if (index >= records_.size()) return nullptr;
    ++next_;
    return &records_[index];
  }
  void rewind() noexcept { next_ = 0; }
  void shard(std::size_t rank, std::size_t world) {
    detail::check_shard(rank, world);
    rank_ = rank;
    world_ = world;
    next_ = 0;
  }
  [[nodiscard]] record_position position() const noexcept { return next_; }
  /// @throws crema::config_error if `position` is past the end of this shard's pass
  void seek(record_position position) {
    if (position > size()) {
      detail::fail<config_error>(
          "vector_source: position {} is past the end of {} (shard {} of {} holds {} records)",
          position, key(), rank_, world_, size());
    }
    next_ = position;
  }
  [[nodiscard]] std::string key() const { return "vector:" + name_; }

  /// @return the number of records this shard yields in one pass
  [[nodiscard]] std::size_t size() const noexcept {
    return records_.size() > rank_ ? (records_.size() - rank_ + world_ - 1) / world_ : 0;
  }
  /// @return the record at `index` of the whole (unsharded) data
  [[nodiscard]] const Record& operator[](std::size_t index) const { return records_.at(index); }

 private:
  std::vector<Record> records_;
  std::string name_;
  std::size_t rank_ = 0;
  std::size_t world_ = 1;
  record_position next_ = 0;
};

static_assert(record_source<vector_source<int>>);

}  // namespace crema
