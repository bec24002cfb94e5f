#pragma once

#include <crema/core/error.hpp>
#include <crema/pipeline/detail/cursor_source.hpp>
#include <crema/pipeline/keyed_permutation.hpp>
#include <crema/pipeline/source.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace crema {

/// @brief A source made from two things a user has: how many records there are, and how to get
/// record `i` (what a PyTorch map-style dataset asks of its user). Sharding, positions, seeking
/// and an exact shuffle come from crema.
///
/// `at(i)` is called once per record read, from one thread at a time. With `shuffle(seed)`, each
/// pass visits the records in an order that is a permutation keyed by (seed, epoch): every record
/// exactly once per pass, another order every pass, the same orders on every run and on every
/// rank (so shards stay disjoint and complete in every pass). The first pass is epoch 0 and each
/// `rewind()` starts the next; `set_epoch` restores a saved one. Sharding, shuffling, seeking and
/// epochs are the `shard_cursor`'s, as for every indexed source (`cursor()` shows it).
/// @tparam Record what `at` returns; held by value until the next record is read
template <class Record>
class indexed_source : public detail::cursor_source<indexed_source<Record>> {
 public:
  using record_type = Record;
  static constexpr bool records_are_stable = false;
  static constexpr const char* source_name = "indexed_source";

  /// @param size the number of records
  /// @param at   `Record(std::size_t index)` for every index below `size`
  /// @param name names the data for `key()` ("indexed:<name>")
  template <class At>
  requires std::is_invocable_r_v<Record, At&, std::size_t> indexed_source(
      std::size_t size, At at, std::string name = "indexed")
      : detail::cursor_source<indexed_source>(size), at_(std::move(at)), name_(std::move(name)) {}

  [[nodiscard]] const Record* next() {
    if (cursor_.exhausted()) return nullptr;
    current_.reset();  // at() may throw: no stale record stays behind
    current_.emplace(at_(static_cast<std::size_t>(cursor_.next_index())));
    cursor_.advance();
    return &*current_;
  }
  [[nodiscard]] std::string key() const { return "indexed:" + name_; }

  /// @return the number of records this shard yields in one pass
  [[nodiscard]] std::size_t shard_size() const noexcept {
    return static_cast<std::size_t>(cursor_.size());
  }
  /// @return the index (into `at`) of the record at `position` of this shard's current pass
  [[nodiscard]] std::uint64_t index_at(record_position position) const noexcept {
    return cursor_.index_at(position);
  }

 private:
  using detail::cursor_source<indexed_source>::cursor_;

  std::function<Record(std::size_t)> at_;
  std::string name_;
  std::optional<Record> current_;
};

static_assert(record_source<indexed_source<int>>);

}  // namespace crema
