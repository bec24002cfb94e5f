// Loaders over Caffe LMDBs: encoded Datums through crema's ImageNet-style transform, or any
// Datum through Caffe's own transform.
#include "image_sources.hpp"
#include "loader_models.hpp"

#include <crema/io/caffe/blob_proto.hpp>
#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_window_decoder.hpp>

#include <cstdint>
#include <memory>
#include <utility>

namespace crema::python {
namespace {

template <class T>
std::unique_ptr<loader_core> caffe_loader(const source_spec& source, const caffe_spec& spec,
                                          const loader_spec& loader) {
  caffe_transform_options options;
  options.crop_size = spec.crop;
  options.mirror = spec.mirror;
  options.training = spec.training;
  options.scale = spec.scale;
  options.mean_values = spec.mean_values;
  if (!spec.mean_file.empty()) {
    options.mean_file = std::make_shared<const blob>(read_blob_proto(spec.mean_file));
  }
  // Encoded records are decoded only in their crop, in BGR as Caffe decodes them; the first
  // record gives the shape of them all, as in Caffe's data layer.
  image_window_decoder decoder({.channels = 0, .order = channel_order::bgr});
  record_shape input;
  {
    lmdb_source first(source.path);
    const lmdb_record* record = first.next();
    input = datum_shape(record->value, record->key_text(), decoder);
  }
  return loader_of<T>(
      prepared_lmdb(source, loader.options.seed),
      [&](auto make_batch) {
        return caffe_batcher(input, caffe_transform(std::move(options)), make_batch, decoder);
      },
      loader);
}

template <class T>
std::unique_ptr<loader_core> image_loader(const source_spec& source, const image_spec& spec,
                                          const loader_spec& loader) {
  return loader_of<T>(
      prepared_lmdb(source, loader.options.seed),
      [&](auto make_batch) {
        return image_batcher(image_transform(image_options(spec)), make_batch);
      },
      loader);
}

}  // namespace

std::unique_ptr<loader_core> make_lmdb_image_loader(const source_spec& source,
                                                    const image_spec& transform,
                                                    const loader_spec& loader) {
  return transform.bytes ? image_loader<std::uint8_t>(source, transform, loader)
                         : image_loader<float>(source, transform, loader);
}

std::unique_ptr<loader_core> make_lmdb_caffe_loader(const source_spec& source,
                                                    const caffe_spec& transform,
                                                    const loader_spec& loader) {
  return transform.bytes ? caffe_loader<std::uint8_t>(source, transform, loader)
                         : caffe_loader<float>(source, transform, loader);
}

}  // namespace crema::python
