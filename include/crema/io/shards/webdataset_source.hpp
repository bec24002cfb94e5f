#pragma once

#include <crema/core/error.hpp>
#include <crema/io/encoded_sample.hpp>
#include <crema/io/shards/detail/indexed_shards.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/shard_index.hpp>
#include <crema/io/shards/webdataset.hpp>
#include <crema/pipeline/detail/cursor_source.hpp>
#include <crema/pipeline/source.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

/// @file
/// A record source over WebDataset tar shards on a filesystem, indexed when it opens (every
/// shard's headers read, no data); its records say where a sample lies, and the transforms read
/// it on their producers' threads. Component: core.

namespace crema {

/// @brief One sample of a `webdataset_source`: its shard and where its members lie there (the
/// source's index, valid while the source lives). Nothing is read until a transform reads it, on
/// its producer's thread, so producers read in parallel: `read(sample)` reads every member,
/// `read_encoded(buffer)` its image and class (what the image batchers call).
class webdataset_record {
 public:
  webdataset_record() noexcept = default;
  webdataset_record(const shard_set& shards, std::size_t shard,
                    const webdataset_entry& entry) noexcept
      : shards_(&shards), shard_(shard), entry_(&entry) {}

  /// @return the sample's key
  [[nodiscard]] std::string_view key() const noexcept { return entry_->key; }
  /// @return its shard's path
  [[nodiscard]] const std::string& shard() const { return shards_->path(shard_); }
  /// @return "shard:key", what errors name it by
  [[nodiscard]] std::string name() const { return shard() + ":" + entry_->key; }
  /// @return its members' extensions and places, as the index has them
  [[nodiscard]] const webdataset_entry& entry() const noexcept { return *entry_; }

  /// @brief Reads every member of the sample into `into` (its memory reused).
  /// @throws crema::io_error naming the shard and offset if the read fails
  void read(webdataset_sample& into) const {
    into.assign(shard(), *entry_);
    if (!entry_->members.empty()) {
      shards_->open(shard_)->read_at(entry_->members.front().offset, into.data());
    }
  }

  /// @brief Reads the sample's image (its first `jpg`, `jpeg`, `png` or `webp` member) and its
  /// `cls` into `buffer` (its memory reused), and hands them over with its name, all viewing
  /// `buffer`.
  /// @throws crema::format_error naming the sample if it has no image, no `cls`, or a `cls` that
  ///         is not a number; crema::io_error naming the shard and offset if a read fails
  [[nodiscard]] encoded_sample read_encoded(std::vector<std::byte>& buffer) const {
    const webdataset_member* image = nullptr;
    for (const std::string_view extension : detail::image_extensions) {
      if ((image = find(extension)) != nullptr) break;
    }
    if (image == nullptr) detail::missing_member(name(), "jpg", entry_->members);
    const webdataset_member* label = find("cls");
    if (label == nullptr) detail::missing_member(name(), "cls", entry_->members);
    const std::string& path = shard();
    const auto image_size = static_cast<std::size_t>(image->size);
    const auto label_size = static_cast<std::size_t>(std::min<std::uint64_t>(label->size, 64));
    const std::size_t name_size = path.size() + 1 + entry_->key.size();
    // One read where the two lie close, as a sample's members do (a request less over HTTP):
    // the stretch from the first to the last, then the class moved after the image.
    const std::uint64_t from = std::min(image->offset, label->offset);
    const std::uint64_t to = std::max(image->offset + image->size, label->offset + label_size);
    const bool one_read = to - from <= image_size + label_size + most_read_between;
    buffer.resize(std::max(image_size + label_size + name_size,
                           one_read ? static_cast<std::size_t>(to - from) : 0));
    const std::span<std::byte> all(buffer);
    const auto file = shards_->open(shard_);
    if (one_read) {
      file->read_at(from, all.first(static_cast<std::size_t>(to - from)));
      std::array<std::byte, 64> label_bytes{};
      std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(label->offset - from), label_size,
                  label_bytes.begin());
      if (image->offset != from) {
        std::memmove(buffer.data(), buffer.data() + (image->offset - from), image_size);
      }
      std::copy_n(label_bytes.begin(), label_size,
                  all.begin() + static_cast<std::ptrdiff_t>(image_size));
    } else {
      file->read_at(image->offset, all.first(image_size));
      file->read_at(label->offset, all.subspan(image_size, label_size));
    }
    // The name after them, so that the key the batcher's errors name lives as long as the bytes.
    char* name_at = reinterpret_cast<char*>(buffer.data() + image_size + label_size);
    std::copy(path.begin(), path.end(), name_at);
    name_at[path.size()] = ':';
    std::copy(entry_->key.begin(), entry_->key.end(), name_at + path.size() + 1);
    const std::string_view name_view(name_at, name_size);
    const std::string_view digits(reinterpret_cast<const char*>(buffer.data() + image_size),
                                  label_size);
    return {all.first(image_size), detail::class_number(digits, name_view), name_view};
  }

 private:
  [[nodiscard]] const webdataset_member* find(std::string_view extension) const noexcept {
    for (const webdataset_member& member : entry_->members) {
      if (member.extension == extension) return &member;
    }
    return nullptr;
  }

  // What one read of both members may take beside them (their headers, a small member between).
  static constexpr std::size_t most_read_between = 4096;

  const shard_set* shards_ = nullptr;
  std::size_t shard_ = 0;
  const webdataset_entry* entry_ = nullptr;
};

/// @brief A source over WebDataset tar shards (`train-{000000..001023}.tar`, through
/// `shard_paths`): every sample of every shard, in shard order, then sample order.
///
/// Opening it reads every shard's headers (not their data) into an index of where each sample's
/// members lie; `next()` hands over a `webdataset_record`, which the transform reads on its
/// producer's thread (the image batchers do so themselves), so samples are read in parallel as
/// image files are. It is an indexed source like the others: `shuffle(seed)` visits the samples
/// in a permutation keyed by (seed, epoch), `shard(rank, world)` keeps every `world`-th sample of
/// the pass from `rank` (disjoint, together complete), `balance` gives every rank as many samples
/// (and so batches), and `position()` / `seek()` resume exactly, all through the `shard_cursor`
/// every indexed source shares. Copies share the index and the open files. Used by one thread at
/// a time; its records are read by any, while any copy of the source lives.
class webdataset_source
    : public detail::shard_source<webdataset_source, webdataset_entry, webdataset_record> {
 public:
  using record_type = webdataset_record;
  static constexpr bool records_are_stable = false;
  static constexpr const char* source_name = "webdataset_source";
  static constexpr const char* key_prefix = "webdataset";
  static constexpr const char* unit = "sample";

  /// @param shards  the shards' paths (or URLs), in order
  /// @param storage where shards named by URL are read from (crema::http's `http_storage`)
  /// @throws crema::config_error for no shard, or naming a shard that holds no sample, or a URL
  ///         given no storage; crema::io_error naming a shard that does not open;
  ///         crema::format_error naming the shard and byte offset where one is not a tar archive
  explicit webdataset_source(std::vector<std::string> shards,
                             std::shared_ptr<const shard_storage> storage = nullptr)
      : shard_source(
            std::move(shards), std::move(storage),
            [](const shard_file& file, std::size_t /*shard*/) { return index_webdataset(file); }) {}

  /// @brief The source over `shards` as their index files say (DALI's, `wds2idx`'s or
  /// `crema-shards index`'s; shard_index.hpp): opened without reading the shards' headers, one
  /// read of an index file a shard instead (one request a shard over HTTP).
  /// @param shards  the shards' paths (or URLs), in order
  /// @param indexes their index files (paths or URLs), one a shard, in the same order
  /// @param storage where shards and index files named by URL are read from
  /// @throws crema::config_error if the counts differ, or as the other constructor;
  ///         crema::io_error naming an index file that does not read; crema::format_error naming
  ///         the index, its line and the shard for an index that does not fit its shard
  webdataset_source(std::vector<std::string> shards, shard_indexes indexes,
                    std::shared_ptr<const shard_storage> storage = nullptr)
      : shard_source(with_index_files(shards, indexes.paths), storage,
                     [paths = indexes.paths, storage](const shard_file& file, std::size_t shard) {
                       return read_webdataset_index(detail::read_index_file(paths[shard], storage),
                                                    paths[shard], file);
                     }) {}

  /// @return sample `index` of the whole data (shard order, then sample order), not read yet
  /// @throws std::out_of_range past the last
  [[nodiscard]] webdataset_record record(std::uint64_t index) const {
    const auto [s, entry] = index_.locate(index);
    return {index_.shards(), s, *entry};
  }
};

static_assert(keyed_record_source<webdataset_source>);
static_assert(epoch_record_source<webdataset_source>);

}  // namespace crema
