#pragma once

#include <crema/core/error.hpp>
#include <crema/io/shards/shard_file.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace crema::detail {

// The shards of a source and the index of their samples, made when the source opens: each
// shard's entries (what `Index(shard_file)` finds in it), numbered across the shards in order.
// Entries and the shard set stay where they are when the source moves (records point at them).
template <class Entry>
class indexed_shards {
 public:
  template <class Index>
  indexed_shards(std::vector<std::string> paths, const char* source, Index&& index)
      : shards_(std::make_unique<shard_set>(std::move(paths))) {
    if (shards_->size() == 0) fail<config_error>("{}: no shard given", source);
    first_.reserve(shards_->size() + 1);
    first_.push_back(0);
    entries_.resize(shards_->size());
    for (std::size_t s = 0; s < shards_->size(); ++s) {
      entries_[s] = index(*shards_->open(s));
      if (entries_[s].empty()) {
        fail<config_error>("{}: shard {} holds no sample", source, shards_->path(s));
      }
      first_.push_back(first_.back() + entries_[s].size());
    }
  }

  // Sample `index` of the whole data: its shard and its entry.
  [[nodiscard]] std::pair<std::size_t, const Entry*> locate(std::uint64_t index) const {
    if (index >= first_.back()) throw std::out_of_range("crema: no such sample in the shards");
    const auto s = static_cast<std::size_t>(std::upper_bound(first_.begin(), first_.end(), index) -
                                            first_.begin() - 1);
    return {s, &entries_[s][static_cast<std::size_t>(index - first_[s])]};
  }

  [[nodiscard]] std::uint64_t samples() const noexcept { return first_.back(); }
  [[nodiscard]] const shard_set& shards() const noexcept { return *shards_; }
  [[nodiscard]] const std::vector<Entry>& entries(std::size_t s) const { return entries_.at(s); }

 private:
  std::unique_ptr<shard_set> shards_;
  std::vector<std::vector<Entry>> entries_;  // per shard
  std::vector<std::uint64_t> first_;         // per shard, its first sample's number; then the total
};

}  // namespace crema::detail
