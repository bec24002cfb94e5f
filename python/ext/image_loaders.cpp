// Loaders over image folders, list files and shards (WebDataset, TFRecord), with crema's
// ImageNet-style transform.
#include "loader_models.hpp"

#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/image/image_list_source.hpp>
#include <crema/io/shards/tfrecord_source.hpp>
#include <crema/io/shards/webdataset_source.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crema::python {

image_transform_options image_options(const image_spec& spec) {
  image_transform_options options;
  if (spec.random_crop) {
    options.geometry = random_resized_crop{spec.height,     spec.width,     spec.scale_low,
                                           spec.scale_high, spec.ratio_low, spec.ratio_high};
  } else {
    options.geometry = resize_center_crop{spec.resize, spec.height, spec.width};
  }
  options.mirror = spec.flip;
  options.jitter = {spec.jitter[0], spec.jitter[1], spec.jitter[2]};
  options.layout = spec.hwc ? pixel_layout::hwc : pixel_layout::chw;
  options.mean = spec.mean;
  options.std = spec.std;
  if (spec.reduced_detail) options.decode.detail = decode_detail::reduced;
  return options;
}

namespace {

// A source as the spec asks: sharded, balanced and shuffled, at its first pass. The prototype is
// scanned once; every start of the loader's producers copies it (the copies share its table).
template <class Source>
std::function<Source()> prepared(Source prototype, const source_spec& spec) {
  prototype.shard(spec.rank, spec.world);
  prototype.balance(spec.balance);
  return [prototype = std::make_shared<const Source>(std::move(prototype))] { return *prototype; };
}

template <class Source, class T>
std::unique_ptr<loader_core> image_loader(std::function<Source()> make, const image_spec& transform,
                                          const loader_spec& loader,
                                          std::vector<std::string> classes) {
  return loader_of<T>(
      std::move(make),
      [&](auto make_batch) {
        return image_batcher(image_transform(image_options(transform)), make_batch);
      },
      loader, std::move(classes));
}

template <class Source>
std::unique_ptr<loader_core> image_loader(std::function<Source()> make, const image_spec& transform,
                                          const loader_spec& loader,
                                          std::vector<std::string> classes = {}) {
  return transform.bytes
             ? image_loader<Source, std::uint8_t>(std::move(make), transform, loader,
                                                  std::move(classes))
             : image_loader<Source, float>(std::move(make), transform, loader, std::move(classes));
}

}  // namespace

std::unique_ptr<loader_core> make_image_file_loader(const source_spec& source,
                                                    const image_spec& transform,
                                                    const loader_spec& loader) {
  if (source.kind == "webdataset") {
    webdataset_source shards(source.shards);
    if (source.shuffle) shards.shuffle(loader.options.seed);
    return image_loader(prepared(std::move(shards), source), transform, loader);
  }
  if (source.kind == "tfrecord") {
    tfrecord_source records(source.shards, {source.image_feature, source.label_feature});
    if (source.shuffle) records.shuffle(loader.options.seed);
    return image_loader(prepared(std::move(records), source), transform, loader);
  }
  if (source.kind == "folder") {
    image_folder_source files(source.path, image_folder_options{source.extensions});
    if (source.shuffle) files.shuffle(loader.options.seed);
    std::vector<std::string> classes = files.classes();
    return image_loader(prepared(std::move(files), source), transform, loader, std::move(classes));
  }
  image_list_source files(source.path, source.root);
  if (source.shuffle) files.shuffle(loader.options.seed);
  return image_loader(prepared(std::move(files), source), transform, loader);
}

}  // namespace crema::python
