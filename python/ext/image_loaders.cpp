// Loaders over image folders, list files and shards (WebDataset, TFRecord), with crema's
// ImageNet-style transform.
#include "image_sources.hpp"
#include "loader_models.hpp"

#include <crema/io/image/image_batcher.hpp>

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
  return with_file_source(
      source, loader.options.seed, [&](auto make, std::vector<std::string> classes) {
        return image_loader(std::move(make), transform, loader, std::move(classes));
      });
}

}  // namespace crema::python
