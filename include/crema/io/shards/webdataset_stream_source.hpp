#pragma once

#include <crema/io/encoded_sample.hpp>
#include <crema/io/shards/detail/shard_stream.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/webdataset.hpp>
#include <crema/io/shards/webdataset_source.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

/// @file
/// A record source that reads WebDataset tar shards without an index: each rank its own shards,
/// each from its start to its end as it goes, through a shuffle buffer. Component: core.

namespace crema {

/// @brief One sample of a `webdataset_stream_source`: its shard and where its members lie there,
/// owned (it stays valid after the source has moved on). Read as a `webdataset_record` is: by the
/// transform, on its producer's thread.
class webdataset_stream_record {
 public:
  webdataset_stream_record() = default;
  webdataset_stream_record(std::shared_ptr<const shard_set> shards, std::size_t shard,
                           webdataset_entry entry) noexcept
      : shards_(std::move(shards)), shard_(shard), entry_(std::move(entry)) {}

  [[nodiscard]] std::string_view key() const noexcept { return entry_.key; }
  [[nodiscard]] const std::string& shard() const { return shards_->path(shard_); }
  [[nodiscard]] std::string name() const { return shard() + ":" + entry_.key; }
  [[nodiscard]] const webdataset_entry& entry() const noexcept { return entry_; }

  /// @brief Reads every member of the sample into `into`, as `webdataset_record::read`.
  void read(webdataset_sample& into) const { as_record().read(into); }
  /// @brief Reads the image and the class, as `webdataset_record::read_encoded`.
  [[nodiscard]] encoded_sample read_encoded(std::vector<std::byte>& buffer) const {
    return as_record().read_encoded(buffer);
  }

 private:
  [[nodiscard]] webdataset_record as_record() const noexcept { return {*shards_, shard_, entry_}; }

  std::shared_ptr<const shard_set> shards_;
  std::size_t shard_ = 0;
  webdataset_entry entry_;
};

/// @brief A source over WebDataset tar shards read without an index, as a stream: what shards
/// too many to index, or behind a network, call for (WebDataset's own way of reading).
///
/// `shard(rank, world)` gives each rank every `world`-th shard (in an order keyed by (seed,
/// epoch) once `shuffle(seed)` is set); a rank reads its shards one after the other, each from its
/// start to its end, headers as it meets them (a URL's through its storage: with a cache, a
/// request a chunk). `shuffle` with `shard_stream_options::shuffle_buffer` draws each sample at
/// random from that many held back. `pass_size(n)` makes every pass exactly n samples on every
/// rank (the ranks' shards rarely hold as many). `position()` counts the pass's samples and
/// `seek()` replays the pass to one (headers only), exact for the same shards, world, seed and
/// buffer. A shard that holds no sample is an error when it is reached, a world of more ranks
/// than shards when it is set: never a silent skip, never a loop. Used by one thread at a time;
/// its records, which own where their sample lies, are read by any.
class webdataset_stream_source
    : public detail::shard_stream<webdataset_stream_source, webdataset_entry,
                                  webdataset_stream_record, webdataset_scanner<shard_file>> {
 public:
  static constexpr const char* source_name = "webdataset_stream_source";
  static constexpr const char* key_prefix = "webdataset-stream";
  static constexpr const char* unit = "sample";

  /// @param shards  the shards' paths (or URLs), in order
  /// @param storage where shards named by URL are read from (crema::http's `http_storage`)
  /// @throws crema::config_error for no shard
  explicit webdataset_stream_source(std::vector<std::string> shards,
                                    std::shared_ptr<const shard_storage> storage = nullptr,
                                    shard_stream_options options = {})
      : shard_stream(std::move(shards), std::move(storage), options) {}

  [[nodiscard]] static webdataset_scanner<shard_file> scan(const shard_file& file) noexcept {
    return webdataset_scanner<shard_file>(file);
  }
  [[nodiscard]] static webdataset_stream_record record(std::shared_ptr<const shard_set> shards,
                                                       std::size_t shard, webdataset_entry entry) {
    return {std::move(shards), shard, std::move(entry)};
  }
};

static_assert(keyed_record_source<webdataset_stream_source>);
static_assert(epoch_record_source<webdataset_stream_source>);

}  // namespace crema
