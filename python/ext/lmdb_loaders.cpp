// Loaders over Caffe LMDBs: encoded Datums through crema's ImageNet-style transform, or any
// Datum through Caffe's own transform.
#include "loader_core.hpp"

#include <crema/io/caffe/blob_proto.hpp>
#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_window_decoder.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>

#include <cstdint>
#include <memory>
#include <utility>

namespace crema::python {
namespace {

// Each start of the producers opens the database again (a source holds its own transaction).
std::function<lmdb_source()> prepared(const source_spec& spec, std::uint64_t seed) {
  return [spec, seed] {
    lmdb_source source(spec.path, {.permute = spec.shuffle, .seed = seed});
    source.shard(spec.rank, spec.world);
    source.balance(spec.balance);
    return source;
  };
}

template <class Transform>
std::unique_ptr<loader_core> lmdb_loader(const source_spec& source, Transform transform,
                                         const loader_spec& loader) {
  return std::make_unique<loader_model<lmdb_source, Transform>>(
      prepared(source, loader.options.seed), std::move(transform), loader.options);
}

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
  caffe_batcher batcher(input, caffe_transform(std::move(options)), python_batch<T>{}, decoder);
  return lmdb_loader(source, std::move(batcher), loader);
}

template <class T>
std::unique_ptr<loader_core> image_loader(const source_spec& source, const image_spec& spec,
                                          const loader_spec& loader) {
  return lmdb_loader(source, image_batcher(image_transform(image_options(spec)), python_batch<T>{}),
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
