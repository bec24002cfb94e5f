#pragma once

#include <crema/core/batch_label.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/image/encoded_sample_reader.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <type_traits>
#include <utility>

namespace crema {

/// @brief A batch transform for the pipeline over image files (`image_folder_source`,
/// `image_list_source`) or encoded Datums (an LMDB of JPEGs): record `i` of a batch gets the
/// `image_transform` of its image, and its label. Copied once per producer; each copy reads files
/// into its own buffer (in parallel with the other producers) and decodes with its own decoder.
/// @tparam MakeBatch `Batch(const batch_context&, record_shape)`: makes one batch per slot, with
///         `record(i)` (a span of float or std::uint8_t) and `set_label(i, label)`
template <class MakeBatch>
class image_batcher {
 public:
  using batch_type = std::invoke_result_t<const MakeBatch&, const batch_context&, record_shape>;
  /// What `set_label` takes: the batch's `label_type` (float for `host_batch` and `device_batch`
  /// of 8-bit samples), or its element type. An image whose label it cannot hold exactly (a
  /// class past 255 in 8-bit labels) is a `format_error` naming its path or key.
  using label_type = typename detail::batch_label_of<batch_type>::type;

  image_batcher(image_transform transform, MakeBatch make, image_file_reader_options reading = {})
      : transform_(std::move(transform)), make_(std::move(make)), reader_(reading) {}

  /// @return one sample's shape in a batch
  [[nodiscard]] record_shape shape() const noexcept { return transform_.shape(); }

  [[nodiscard]] batch_type make_batch(const batch_context& where) const {
    return make_(where, transform_.shape());
  }

  /// @brief A record's encoded image (an image file, read on this producer's thread, or an
  /// encoded Datum): decoded, transformed, written with its label.
  template <encoded_sample_record Record>
  void operator()(const Record& record, batch_type& batch, const sample_context& context) {
    const encoded_sample image = reader_(record);
    transform_(image.bytes, batch.record(context.index), context.rng(), image.key);
    batch.set_label(context.index, detail::exact_label<label_type>(image.label, image.key));
  }

  [[nodiscard]] const image_transform& transform() const noexcept { return transform_; }

 private:
  image_transform transform_;
  MakeBatch make_;
  encoded_sample_reader reader_;
};

}  // namespace crema
