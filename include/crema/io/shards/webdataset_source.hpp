#pragma once

#include <crema/core/error.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/webdataset.hpp>
#include <crema/pipeline/detail/cursor_source.hpp>
#include <crema/pipeline/source.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

/// @file
/// A record source over WebDataset tar shards on a filesystem, indexed when it opens (every
/// shard's headers read, no data), then read sample by sample at their offsets. Component: core.

namespace crema {

/// @brief A source over WebDataset tar shards (`train-{000000..001023}.tar`, through
/// `shard_paths`): every sample of every shard, in shard order, then sample order.
///
/// Opening it reads every shard's headers (not their data) into an index of where each sample's
/// members lie; `next()` then reads one sample's members with one read. So it is an indexed
/// source like the others: `shuffle(seed)` visits the samples in a permutation keyed by (seed,
/// epoch), `shard(rank, world)` keeps every `world`-th sample of the pass from `rank` (disjoint,
/// together complete), `balance` gives every rank as many samples (and so batches), and
/// `position()` / `seek()` resume exactly, all through the `shard_cursor` every indexed source
/// shares. `records_are_stable` is false: a sample owns its bytes, and the pipeline keeps its own
/// copy. Used by one thread at a time.
class webdataset_source : public detail::cursor_source<webdataset_source> {
 public:
  using record_type = webdataset_sample;
  static constexpr bool records_are_stable = false;
  static constexpr const char* source_name = "webdataset_source";

  /// @param shards the shards' paths, in order
  /// @throws crema::config_error for no shard, or naming a shard that holds no sample;
  ///         crema::io_error naming a shard that does not open; crema::format_error naming the
  ///         shard and byte offset where one is not a tar archive
  explicit webdataset_source(std::vector<std::string> shards)
      : detail::cursor_source<webdataset_source>(0), paths_(std::move(shards)) {
    if (paths_.empty()) detail::fail<config_error>("webdataset_source: no shard given");
    first_.reserve(paths_.size() + 1);
    first_.push_back(0);
    entries_.resize(paths_.size());
    for (std::size_t s = 0; s < paths_.size(); ++s) {
      entries_[s] = index_webdataset(file(s));
      if (entries_[s].empty()) {
        detail::fail<config_error>("webdataset_source: shard {} holds no sample", paths_[s]);
      }
      first_.push_back(first_.back() + entries_[s].size());
    }
    cursor_ = shard_cursor(first_.back());
  }

  /// @return the next sample of this shard's pass (valid until the next call), or nullptr at the
  ///         end of the pass
  /// @throws crema::io_error naming the shard and offset if a read fails
  [[nodiscard]] const webdataset_sample* next() {
    if (cursor_.exhausted()) return nullptr;
    const std::uint64_t index = cursor_.next_index();
    const std::size_t s = static_cast<std::size_t>(
        std::upper_bound(first_.begin(), first_.end(), index) - first_.begin() - 1);
    const webdataset_entry& entry = entries_[s][static_cast<std::size_t>(index - first_[s])];
    current_.assign(paths_[s], entry);
    if (!entry.members.empty()) file(s).read_at(entry.members.front().offset, current_.data());
    cursor_.advance();
    return &current_;
  }

  /// @brief Keeps every `world`-th sample of the pass, from `rank`; the pass starts again.
  /// @throws crema::config_error if `world` is 0, `rank` is not below it, or the rank would get
  ///         no sample (more ranks than samples)
  void shard(std::size_t rank, std::size_t world) {
    cursor_.shard(rank, world);
    if (cursor_.size() == 0) {
      detail::fail<config_error>(
          "webdataset_source: rank {} of {} gets no sample: the {} shards hold {} samples", rank,
          world, paths_.size(), cursor_.records());
    }
  }

  /// @return "webdataset:" and the first shard's path, with the number of shards
  [[nodiscard]] std::string key() const {
    return "webdataset:" + paths_.front() + "+" + std::to_string(paths_.size() - 1);
  }
  /// @return "shard:key" of a sample
  [[nodiscard]] std::string record_key(const webdataset_sample& sample) const {
    return sample.name();
  }
  /// @return the samples of this shard's pass
  [[nodiscard]] std::size_t size() const noexcept {
    return static_cast<std::size_t>(cursor_.size());
  }
  /// @return the samples of every shard
  [[nodiscard]] std::size_t records() const noexcept {
    return static_cast<std::size_t>(cursor_.records());
  }
  /// @return the shards' paths
  [[nodiscard]] const std::vector<std::string>& shards() const noexcept { return paths_; }
  /// @return shard `s`'s samples, as its index has them
  [[nodiscard]] const std::vector<webdataset_entry>& entries(std::size_t s) const {
    return entries_.at(s);
  }

 private:
  static constexpr std::size_t most_open = 8;  // files kept open, the latest used

  // Shard `s`, opened if it is not among the last few used.
  const shard_file& file(std::size_t s) {
    const auto found = std::find_if(open_.begin(), open_.end(),
                                    [&](const auto& entry) { return entry.first == s; });
    if (found != open_.end()) {
      std::rotate(open_.begin(), found, found + 1);  // to the front: used last
      return *open_.front().second;
    }
    if (open_.size() == most_open) open_.pop_back();
    open_.insert(open_.begin(), {s, std::make_unique<shard_file>(paths_[s])});
    return *open_.front().second;
  }

  std::vector<std::string> paths_;
  std::vector<std::vector<webdataset_entry>> entries_;  // per shard
  std::vector<std::uint64_t> first_;  // per shard, the index of its first sample; then the total
  std::vector<std::pair<std::size_t, std::unique_ptr<shard_file>>> open_;
  webdataset_sample current_;
};

static_assert(keyed_record_source<webdataset_source>);
static_assert(epoch_record_source<webdataset_source>);

}  // namespace crema
