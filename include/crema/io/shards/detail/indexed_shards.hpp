#pragma once

#include <crema/core/error.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/pipeline/detail/cursor_source.hpp>
#include <crema/pipeline/keyed_permutation.hpp>
#include <crema/pipeline/shard_cursor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace crema::detail {

// The shards of a source and the index of their samples, made when the source opens: each
// shard's entries (what `Index(shard_file)` finds in it), numbered across the shards in order.
// Copies share the index and the open files (neither changes once made, and the files are
// thread-safe), so a source is copied cheaply, and records stay valid while any copy lives.
// `Index(shard_file, s)` gives shard s's entries.
template <class Entry>
class indexed_shards {
 public:
  template <class Index>
  indexed_shards(std::vector<std::string> paths, std::shared_ptr<const shard_storage> storage,
                 const char* source, Index&& index) {
    auto made = std::make_shared<state>(std::move(paths), std::move(storage));
    if (made->shards.size() == 0) fail<config_error>("{}: no shard given", source);
    made->first.reserve(made->shards.size() + 1);
    made->first.push_back(0);
    made->entries.resize(made->shards.size());
    for (std::size_t s = 0; s < made->shards.size(); ++s) {
      made->entries[s] = index(*made->shards.open(s), s);
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
  // Shard s's first sample's number (s = the shard count: the total).
  [[nodiscard]] std::uint64_t first(std::size_t s) const { return state_->first.at(s); }
  [[nodiscard]] const shard_set& shards() const noexcept { return state_->shards; }
  [[nodiscard]] const std::vector<Entry>& entries(std::size_t s) const {
    return state_->entries.at(s);
  }

 private:
  struct state {
    state(std::vector<std::string> paths, std::shared_ptr<const shard_storage> storage)
        : shards(std::move(paths), std::move(storage)) {}
    shard_set shards;
    std::vector<std::vector<Entry>> entries;  // per shard
    std::vector<std::uint64_t> first;  // per shard, its first sample's number; then the total
  };
  std::shared_ptr<const state> state_;
};

// The shard-aware order of a pass: the shards in an order keyed by (seed, epoch), cut into blocks
// of `per_block` consecutive shards of that order; the pass reads block after block, each
// block's samples in an order keyed by (seed, epoch, block) of their own. `index(ordinal)` is
// the sample (its number in shard order) that the pass's ordinal-th read is. The epoch's table
// (the shard order and where each block starts) is made once per epoch.
class shard_block_order {
 public:
  shard_block_order(std::uint64_t seed, std::size_t per_block) noexcept
      : seed_(seed), per_block_(per_block) {}

  template <class Entry>
  [[nodiscard]] std::uint64_t index(std::uint64_t ordinal, std::uint64_t epoch,
                                    const indexed_shards<Entry>& shards) {
    if (epoch != epoch_ || order_.empty()) remake(epoch, shards);
    const auto block = static_cast<std::size_t>(
        std::upper_bound(block_first_.begin(), block_first_.end(), ordinal) - block_first_.begin() -
        1);
    const std::uint64_t size = block_first_[block + 1] - block_first_[block];
    std::uint64_t within =
        epoch_permutation(size, block_key(block), epoch)(ordinal - block_first_[block]);
    const std::size_t end = std::min(order_.size(), (block + 1) * per_block_);
    for (std::size_t at = block * per_block_; at < end; ++at) {
      const std::size_t s = order_[at];
      const std::uint64_t count = shards.first(s + 1) - shards.first(s);
      if (within < count) return shards.first(s) + within;
      within -= count;
    }
    return shards.samples() - 1;  // not reached: the block's samples add up to its size
  }

 private:
  template <class Entry>
  void remake(std::uint64_t epoch, const indexed_shards<Entry>& shards) {
    const std::size_t count = shards.shards().size();
    const keyed_permutation shard_order = epoch_permutation(count, seed_ ^ shard_key, epoch);
    order_.resize(count);
    for (std::size_t i = 0; i < count; ++i) order_[i] = static_cast<std::size_t>(shard_order(i));
    block_first_.assign(1, 0);
    for (std::size_t at = 0; at < count; at += per_block_) {
      std::uint64_t size = 0;
      for (std::size_t i = at; i < std::min(count, at + per_block_); ++i) {
        size += shards.first(order_[i] + 1) - shards.first(order_[i]);
      }
      block_first_.push_back(block_first_.back() + size);
    }
    epoch_ = epoch;
  }

  [[nodiscard]] std::uint64_t block_key(std::size_t block) const noexcept {
    return seed_ ^ ((block + 1) * 0x9e3779b97f4a7c15ULL);
  }

  static constexpr std::uint64_t shard_key = 0x5bd1e9955bd1e995ULL;

  std::uint64_t seed_;
  std::size_t per_block_;
  std::uint64_t epoch_ = 0;
  std::vector<std::size_t> order_;          // the epoch's shards, in order
  std::vector<std::uint64_t> block_first_;  // each block's first ordinal, then the total
};

// What a source over indexed shards answers the same way whatever the format: `next()` (a record
// that says where an entry lies, nothing read), the rank's share (refused where it would be
// empty), the key, the counts, the shards and their index; the cursor's shuffle, balance, seek
// and epochs (cursor_source). `Derived` gives `source_name`, `key_prefix` ("webdataset"), `unit`
// ("sample") and `Record record(index) const`; its records have `name()`.
template <class Derived, class Entry, class Record>
class shard_source : public cursor_source<Derived> {
 public:
  /// @return the next entry of this rank's pass (valid until the next call), or nullptr at the
  ///         end of the pass; nothing of it is read yet
  [[nodiscard]] const Record* next() {
    if (this->cursor_.exhausted()) return nullptr;
    const std::uint64_t ordinal = this->cursor_.next_index();  // in order when blocked
    current_ = static_cast<const Derived&>(*this).record(
        blocks_ ? blocks_->index(ordinal, this->cursor_.epoch(), index_) : ordinal);
    this->cursor_.advance();
    return &current_;
  }

  /// @brief Visits the samples in a permutation keyed by (seed, epoch), any sample after any
  /// other, from now on; the pass starts again.
  Derived& shuffle(std::uint64_t seed) noexcept {
    blocks_.reset();
    return cursor_source<Derived>::shuffle(seed);
  }
  /// @brief Visits the samples shard by shard, as a reader over a network wants them: each
  /// pass takes the shards in an order keyed by (seed, epoch) and reads them `shards_per_block`
  /// at a time, the samples of those shards in an order keyed by (seed, epoch, block) of their
  /// own. A rank then reads from a few shards at once (what `http_options::cache_bytes` holds),
  /// and a sample meets only the others of its block. Sharding, balance, `seek` and resuming
  /// on another world size work on this order as on the other; the pass starts again.
  /// @throws crema::config_error if `shards_per_block` is 0
  Derived& shuffle_shards(std::uint64_t seed, std::size_t shards_per_block) {
    if (shards_per_block == 0) {
      fail<config_error>("{}: shuffle_shards needs at least one shard a block",
                         Derived::source_name);
    }
    this->cursor_.shuffle(std::nullopt);  // ordinals in order, mapped through the blocks
    blocks_.emplace(seed, shards_per_block);
    return static_cast<Derived&>(*this);
  }

  /// @brief Keeps every `world`-th entry of the pass, from `rank`; the pass starts again.
  /// @throws crema::config_error if `world` is 0, `rank` is not below it, or the rank would get
  ///         nothing (more ranks than entries)
  void shard(std::size_t rank, std::size_t world) {
    this->cursor_.shard(rank, world);
    if (this->cursor_.size() == 0) {
      fail<config_error>("{}: rank {} of {} gets no {}: the {} shards hold {} {}s",
                         Derived::source_name, rank, world, Derived::unit, index_.shards().size(),
                         this->cursor_.records(), Derived::unit);
    }
  }

  /// @return the format, the first shard's path and the number of shards after it
  [[nodiscard]] std::string key() const { return shards_key(Derived::key_prefix, index_.shards()); }
  /// @return what errors name an entry by
  [[nodiscard]] std::string record_key(const Record& record) const { return record.name(); }
  /// @return the entries of this rank's pass
  [[nodiscard]] std::size_t size() const noexcept {
    return static_cast<std::size_t>(this->cursor_.size());
  }
  /// @return the entries of every shard
  [[nodiscard]] std::size_t records() const noexcept {
    return static_cast<std::size_t>(this->cursor_.records());
  }
  /// @return the shards' paths
  [[nodiscard]] const std::vector<std::string>& shards() const noexcept {
    return index_.shards().paths();
  }
  /// @return where its shards named by URL are read from (none where it was given none)
  [[nodiscard]] const std::shared_ptr<const shard_storage>& storage() const noexcept {
    return index_.shards().storage();
  }
  /// @return shard `s`'s entries, as its index has them
  [[nodiscard]] const std::vector<Entry>& entries(std::size_t s) const { return index_.entries(s); }

 protected:
  template <class Index>
  shard_source(std::vector<std::string> paths, std::shared_ptr<const shard_storage> storage,
               Index&& index)
      : cursor_source<Derived>(0),
        index_(std::move(paths), std::move(storage), Derived::source_name,
               std::forward<Index>(index)) {
    this->cursor_ = shard_cursor(index_.samples());
  }

  // `shards` (moved from), once found to have an index file each in `indexes`.
  static std::vector<std::string> with_index_files(std::vector<std::string>& shards,
                                                   const std::vector<std::string>& indexes) {
    if (indexes.size() != shards.size()) {
      fail<config_error>("{}: {} index files for {} shards; give one a shard, in their order",
                         Derived::source_name, indexes.size(), shards.size());
    }
    return std::move(shards);
  }

  indexed_shards<Entry> index_;

 private:
  Record current_;
  std::optional<shard_block_order> blocks_;  // the shard-aware order, where chosen
};

}  // namespace crema::detail
