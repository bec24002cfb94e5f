#pragma once

#include <crema/io/encoded_sample.hpp>
#include <crema/io/shards/detail/shard_stream.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/tfrecord.hpp>
#include <crema/io/shards/tfrecord_source.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

/// @file
/// A record source that reads TFRecord files without an index: each rank its own files, each
/// from its start to its end, through a shuffle buffer. Component: core.

namespace crema {

/// @brief One record of a `tfrecord_stream_source`: its file and where its data lies there,
/// owned. Read as a `tfrecord_record` is: by the transform, on its producer's thread.
class tfrecord_stream_record {
 public:
  tfrecord_stream_record() = default;
  tfrecord_stream_record(std::shared_ptr<const shard_set> shards, std::size_t shard,
                         tfrecord_location place,
                         std::shared_ptr<const tf_image_features> features) noexcept
      : shards_(std::move(shards)), shard_(shard), place_(place), features_(std::move(features)) {}

  [[nodiscard]] const std::string& shard() const { return shards_->path(shard_); }
  [[nodiscard]] const tfrecord_location& place() const noexcept { return place_; }
  [[nodiscard]] std::string name() const { return as_record().name(); }

  /// @brief Reads the record's data, its CRC checked, as `tfrecord_record::read`.
  void read(std::vector<std::byte>& into) const { as_record().read(into); }
  /// @brief Reads the image and the class, as `tfrecord_record::read_encoded`.
  [[nodiscard]] encoded_sample read_encoded(std::vector<std::byte>& buffer) const {
    return as_record().read_encoded(buffer);
  }

 private:
  [[nodiscard]] tfrecord_record as_record() const noexcept {
    return {*shards_, shard_, place_, *features_};
  }

  std::shared_ptr<const shard_set> shards_;
  std::size_t shard_ = 0;
  tfrecord_location place_;
  std::shared_ptr<const tf_image_features> features_;
};

/// @brief A source over TFRecord files read without an index, as a stream: each rank its own
/// files, each read from its start to its end, through a shuffle buffer; a pass of a fixed size;
/// positions resumed by replay. As `webdataset_stream_source`, for TFRecord files of Examples.
class tfrecord_stream_source
    : public detail::shard_stream<tfrecord_stream_source, tfrecord_location, tfrecord_stream_record,
                                  tfrecord_scanner<shard_file>> {
 public:
  static constexpr const char* source_name = "tfrecord_stream_source";
  static constexpr const char* key_prefix = "tfrecord-stream";
  static constexpr const char* unit = "record";

  /// @param shards   the files' paths (or URLs), in order
  /// @param features the features `read_encoded` takes the image and the class from
  /// @param storage  where files named by URL are read from (crema::http's `http_storage`)
  /// @throws crema::config_error for no file
  explicit tfrecord_stream_source(std::vector<std::string> shards, tf_image_features features = {},
                                  std::shared_ptr<const shard_storage> storage = nullptr,
                                  shard_stream_options options = {})
      : shard_stream(std::move(shards), std::move(storage), options),
        features_(std::make_shared<const tf_image_features>(std::move(features))) {}

  [[nodiscard]] static tfrecord_scanner<shard_file> scan(const shard_file& file) noexcept {
    return tfrecord_scanner<shard_file>(file);
  }
  [[nodiscard]] tfrecord_stream_record record(std::shared_ptr<const shard_set> shards,
                                              std::size_t shard, tfrecord_location place) const {
    return {std::move(shards), shard, place, features_};
  }

 private:
  std::shared_ptr<const tf_image_features> features_;
};

static_assert(keyed_record_source<tfrecord_stream_source>);
static_assert(epoch_record_source<tfrecord_stream_source>);

}  // namespace crema
