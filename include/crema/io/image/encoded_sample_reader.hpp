#pragma once

#include <crema/io/caffe/datum.hpp>
#include <crema/io/encoded_sample.hpp>
#include <crema/io/image/image_file.hpp>

#include <concepts>

/// @file
/// The one place that turns every kind of record an image batcher takes into an
/// `encoded_sample`: an image file (read into a buffer reused from one file to the next), an
/// encoded Datum (its bytes, in place) or a record that holds its image (a WebDataset sample). The
/// batchers see encoded images only.

namespace crema {

/// @brief A record that hands its encoded image, class and name over itself (`encoded()`), as
/// `webdataset_sample` does.
template <class Record>
concept self_encoded_record = requires(const Record& record) {
  { record.encoded() } -> std::same_as<encoded_sample>;
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

  /// @brief A record that holds its encoded image and class itself (a WebDataset sample).
  /// @throws what its `encoded()` throws (a crema::format_error naming it)
  template <self_encoded_record Record>
  [[nodiscard]] encoded_sample operator()(const Record& record) const {
    return record.encoded();
  }

 private:
  image_file_reader files_;
};

/// @brief A record an image batcher takes: an `image_file`, a `datum_record` or a
/// `self_encoded_record`.
template <class Record>
concept encoded_sample_record = requires(encoded_sample_reader& reader, const Record& record) {
  { reader(record) } -> std::same_as<encoded_sample>;
};

}  // namespace crema
