#pragma once

#include <crema/core/error.hpp>
#include <crema/io/encoded_sample.hpp>
#include <crema/io/shards/detail/indexed_shards.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/shard_index.hpp>
#include <crema/io/shards/tfrecord.hpp>
#include <crema/pipeline/detail/cursor_source.hpp>
#include <crema/pipeline/source.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

/// @file
/// A record source over TFRecord files of `tf.train.Example`s on a filesystem, indexed when it
/// opens (every record's header read and its length's CRC checked, no data); its records say
/// where an Example lies, and the transforms read it (its data's CRC checked) on their
/// producers' threads. Component: core.

namespace crema {

/// @brief The features an image batcher takes from an Example: the encoded image and the class,
/// by default the names of the ImageNet TFRecords (whose classes are numbered from 1).
struct tf_image_features {
  std::string image = "image/encoded";
  std::string label = "image/class/label";
};

/// @brief Every TFRecord shard's records: their places, from the headers.
/// @throws crema::format_error naming the shard and offset of a damaged header
template <class Shard>
[[nodiscard]] std::vector<tfrecord_location> index_tfrecord(const Shard& shard) {
  std::vector<tfrecord_location> records;
  tfrecord_scanner<Shard> scanner(shard);
  while (auto record = scanner.next()) records.push_back(*record);
  return records;
}

/// @brief One record of a `tfrecord_source`: its shard and where its data lies there. Nothing
/// is read until a transform reads it, on its producer's thread: `read(into)` the Example's
/// bytes, `read_encoded(buffer)` its image and class (what the image batchers call).
class tfrecord_record {
 public:
  tfrecord_record() noexcept = default;
  tfrecord_record(const shard_set& shards, std::size_t shard, const tfrecord_location& place,
                  const tf_image_features& features) noexcept
      : shards_(&shards), shard_(shard), place_(place), features_(&features) {}

  /// @return its shard's path
  [[nodiscard]] const std::string& shard() const { return shards_->path(shard_); }
  /// @return where its data lies
  [[nodiscard]] const tfrecord_location& place() const noexcept { return place_; }
  /// @return "shard@offset" (of the record's header), what errors name it by
  [[nodiscard]] std::string name() const {
    return shard() + "@" + std::to_string(place_.offset - detail::tfrecord_header);
  }

  /// @brief Reads the record's data (an Example's bytes) into `into`, its CRC checked.
  /// @throws crema::format_error naming the shard and offset if the CRC fails;
  ///         crema::io_error if the read does
  void read(std::vector<std::byte>& into) const {
    read_tfrecord(*shards_->open(shard_), place_, into);
  }

  /// @brief Reads the record, decodes its Example and hands over its image (the first value of
  /// the image feature) and class (the first of the label feature), viewing `buffer`.
  /// @throws crema::format_error naming the record for a CRC that fails, an Example that does
  ///         not decode, a missing feature or a class outside int32
  [[nodiscard]] encoded_sample read_encoded(std::vector<std::byte>& buffer) const {
    const std::string record_name = name();
    read_tfrecord(*shards_->open(shard_), place_, buffer);
    const auto data_size = buffer.size();
    // The name after the data, so that the key the batcher's errors name lives as long as it.
    buffer.resize(data_size + record_name.size());
    std::copy(record_name.begin(), record_name.end(),
              reinterpret_cast<char*>(buffer.data() + data_size));
    const std::string_view key(reinterpret_cast<const char*>(buffer.data() + data_size),
                               record_name.size());
    const tf_example example(std::span<const std::byte>(buffer).first(data_size), key);
    const auto images = example.bytes(features_->image);
    const auto labels = example.int64s(features_->label);
    if (images.empty() || labels.empty()) {
      detail::fail<format_error>("tf.train.Example {}: feature '{}' holds no value", key,
                                 images.empty() ? features_->image : features_->label);
    }
    if (labels.front() < std::numeric_limits<std::int32_t>::min() ||
        labels.front() > std::numeric_limits<std::int32_t>::max()) {
      detail::fail<format_error>("tf.train.Example {}: its class {} is outside int32", key,
                                 labels.front());
    }
    return {images.front(), static_cast<std::int32_t>(labels.front()), key};
  }

 private:
  const shard_set* shards_ = nullptr;
  std::size_t shard_ = 0;
  tfrecord_location place_;
  const tf_image_features* features_ = nullptr;
};

/// @brief A source over TFRecord files of Examples: every record of every file, in file order,
/// then record order; an indexed source like `webdataset_source` (keyed shuffle, `shard`,
/// `balance`, exact `seek`), its records read by the producers. Copies share the index and the
/// open files.
class tfrecord_source
    : public detail::shard_source<tfrecord_source, tfrecord_location, tfrecord_record> {
 public:
  using record_type = tfrecord_record;
  static constexpr bool records_are_stable = false;
  static constexpr const char* source_name = "tfrecord_source";
  static constexpr const char* key_prefix = "tfrecord";
  static constexpr const char* unit = "record";

  /// @param shards   the files' paths (or URLs), in order
  /// @param features the features `read_encoded` takes the image and the class from
  /// @param storage  where shards named by URL are read from (crema::http's `http_storage`)
  /// @throws crema::config_error for no shard, or naming one that holds no record, or a URL
  ///         given no storage; crema::io_error naming one that does not open; crema::format_error
  ///         naming the shard and byte offset of a damaged header
  explicit tfrecord_source(std::vector<std::string> shards, tf_image_features features = {},
                           std::shared_ptr<const shard_storage> storage = nullptr)
      : shard_source(
            std::move(shards), std::move(storage),
            [](const shard_file& file, std::size_t /*shard*/) { return index_tfrecord(file); }),
        features_(std::make_shared<const tf_image_features>(std::move(features))) {}

  /// @brief The source over `shards` as their index files say (DALI's, `tfrecord2idx`'s or
  /// `crema-shards index`'s; shard_index.hpp): opened without reading the records' headers,
  /// each of which is checked when its record is read.
  /// @param indexes their index files (paths or URLs), one a file, in the same order
  /// @throws crema::config_error if the counts differ, or as the other constructor;
  ///         crema::io_error naming an index file that does not read; crema::format_error naming
  ///         the index, its line and the shard for an index that does not fit its shard
  tfrecord_source(std::vector<std::string> shards, shard_indexes indexes,
                  tf_image_features features = {},
                  std::shared_ptr<const shard_storage> storage = nullptr)
      : shard_source(with_index_files(shards, indexes.paths), storage,
                     [paths = indexes.paths, storage](const shard_file& file, std::size_t shard) {
                       return read_tfrecord_index(detail::read_index_file(paths[shard], storage),
                                                  paths[shard], file);
                     }),
        features_(std::make_shared<const tf_image_features>(std::move(features))) {}

  /// @return record `index` of the whole data (file order, then record order), not read yet
  /// @throws std::out_of_range past the last
  [[nodiscard]] tfrecord_record record(std::uint64_t index) const {
    const auto [s, place] = index_.locate(index);
    return {index_.shards(), s, *place, *features_};
  }

 private:
  std::shared_ptr<const tf_image_features> features_;  // where records point, shared by copies
};

static_assert(keyed_record_source<tfrecord_source>);
static_assert(epoch_record_source<tfrecord_source>);

}  // namespace crema
