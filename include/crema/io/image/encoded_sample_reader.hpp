#pragma once

#include <crema/io/caffe/datum.hpp>
#include <crema/io/encoded_sample.hpp>
#include <crema/io/image/image_file.hpp>

#include <concepts>
#include <cstddef>
#include <vector>

/// @file
/// The one place that turns every kind of record an image batcher takes into an
/// `encoded_sample`: an image file (read into a buffer reused from one file to the next), an
/// encoded Datum (its bytes, in place), or a record that holds its image or reads it from a shard
/// (a WebDataset sample or record). The
/// batchers see encoded images only.

namespace crema {

/// @brief A record that hands its encoded image, class and name over itself (`encoded()`), as
/// `webdataset_sample` does.
template <class Record>
concept self_encoded_record = requires(const Record& record) {
  { record.encoded() } -> std::same_as<encoded_sample>;
};

/// @brief A record that reads its encoded image, class and name from where it lies into a buffer
/// its caller keeps (`read_encoded(buffer)`), as `webdataset_record` does: the bytes are read by
/// the producer that transforms it.
template <class Record>
concept readable_encoded_record = requires(const Record& record, std::vector<std::byte>& buffer) {
  { record.read_encoded(buffer) } -> std::same_as<encoded_sample>;
};

/// @brief Hands a record's encoded image over. One per producer (a batcher's copy): a file is
/// read into its own buffer, valid until the next file it reads.
class encoded_sample_reader {
 public:
  encoded_sample_reader() noexcept = default;
  explicit encoded_sample_reader(image_file_reader_options reading) noexcept : files_(reading) {}

  /// @brief An image file of a folder or a list, read on the calling thread.
  /// @throws crema::io_error naming the file, as `image_file_reader::read` does
  [[nodiscard]] encoded_sample operator()(const image_file& file) {
    return {files_.read(file), file.label, file.relative};
  }

  /// @brief An encoded Datum (what `convert_imageset --encoded` stores).
  /// @throws crema::format_error naming the record's key, as `encoded_datum` does
  template <datum_record Record>
  [[nodiscard]] encoded_sample operator()(const Record& record) const {
    return encoded_datum(record);
  }

  /// @brief A record that holds its encoded image and class itself (a `webdataset_sample`).
  /// @throws what its `encoded()` throws (a crema::format_error naming it)
  template <self_encoded_record Record>
  [[nodiscard]] encoded_sample operator()(const Record& record) const {
    return record.encoded();
  }

  /// @brief A record that reads its encoded image and class from where it lies into a buffer (a
  /// `webdataset_record`), read on the calling thread into this reader's buffer.
  /// @throws what its `read_encoded` throws (errors naming it)
  template <readable_encoded_record Record>
  [[nodiscard]] encoded_sample operator()(const Record& record) {
    return record.read_encoded(record_bytes_);
  }

 private:
  image_file_reader files_;
  std::vector<std::byte> record_bytes_;  // what a readable record last read
};

/// @brief A record an image batcher takes: an `image_file`, a `datum_record`, a
/// `self_encoded_record` or a `readable_encoded_record`.
template <class Record>
concept encoded_sample_record = requires(encoded_sample_reader& reader, const Record& record) {
  { reader(record) } -> std::same_as<encoded_sample>;
};

}  // namespace crema
