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
// Copies share the index and the open files (neither changes once made, and the files are
// thread-safe), so a source is copied cheaply, and records stay valid while any copy lives.
template <class Entry>
class indexed_shards {
 public:
  template <class Index>
  indexed_shards(std::vector<std::string> paths, const char* source, Index&& index) {
    auto made = std::make_shared<state>(std::move(paths));
    if (made->shards.size() == 0) fail<config_error>("{}: no shard given", source);
    made->first.reserve(made->shards.size() + 1);
    made->first.push_back(0);
    made->entries.resize(made->shards.size());
    for (std::size_t s = 0; s < made->shards.size(); ++s) {
      made->entries[s] = index(*made->shards.open(s));
      if (made->entries[s].empty()) {
        fail<config_error>("{}: shard {} holds no sample", source, made->shards.path(s));
      }
      made->first.push_back(made->first.back() + made->entries[s].size());
    }
    state_ = std::move(made);
  }

  // Sample `index` of the whole data: its shard and its entry.
  [[nodiscard]] std::pair<std::size_t, const Entry*> locate(std::uint64_t index) const {
    const auto& first = state_->first;
    if (index >= first.back()) throw std::out_of_range("crema: no such sample in the shards");
    const auto s = static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), index) -
                                            first.begin() - 1);
    return {s, &state_->entries[s][static_cast<std::size_t>(index - first[s])]};
  }

  [[nodiscard]] std::uint64_t samples() const noexcept { return state_->first.back(); }
  [[nodiscard]] const shard_set& shards() const noexcept { return state_->shards; }
  [[nodiscard]] const std::vector<Entry>& entries(std::size_t s) const {
    return state_->entries.at(s);
  }

 private:
  struct state {
    explicit state(std::vector<std::string> paths) : shards(std::move(paths)) {}
    shard_set shards;
    std::vector<std::vector<Entry>> entries;  // per shard
    std::vector<std::uint64_t> first;  // per shard, its first sample's number; then the total
  };
  std::shared_ptr<const state> state_;
};

}  // namespace crema::detail
