// Caffe's data layer in crema: an LMDB of Datums (made here, as convert_imageset would) read by
// a pipeline that decodes, crops, mirrors, subtracts the mean, scales and batches on its
// producers, while the consumer takes ready batches.
#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include <fmt/core.h>

#include <cstddef>
#include <filesystem>
#include <vector>

int main() {
  const auto path = std::filesystem::temp_directory_path() / "crema-example-lmdb";
  std::filesystem::remove_all(path);
  {
    crema::lmdb_writer writer(path);  // 1,000 Datums of 3 x 32 x 32, label i % 10
    std::vector<std::byte> pixels(3 * 32 * 32);
    std::vector<std::byte> value;
    for (int i = 0; i < 1000; ++i) {
      for (std::size_t p = 0; p < pixels.size(); ++p) pixels[p] = std::byte(p * 7 + i);
      value.clear();
      crema::encode_datum(
          {.channels = 3, .height = 32, .width = 32, .label = i % 10, .data = pixels}, value);
      writer.put(fmt::format("{:08}_image{}.png", i, i), value);
    }
  }

  // What Caffe's TransformationParameter says: crop 28, mirror, mean values, scale.
  crema::caffe_transform transform(
      {.crop_size = 28, .mirror = true, .scale = 0.017f, .mean_values = {104.0f, 117.0f, 123.0f}});
  crema::caffe_batcher batcher({3, 32, 32}, transform, crema::make_host_batch<float>{});
  crema::double_buffered_pipeline pipe{crema::lmdb_source(path, {.shuffle_buffer = 256}),
                                       batcher,
                                       {.batch_size = 64,
                                        .producers = 2,
                                        .threads = 2,
                                        .mode = crema::pipeline_mode::single_pass,
                                        .last_batch = crema::partial_batch::drop,
                                        .seed = 42}};
  std::size_t samples = 0;
  for (auto batch : pipe.consumer(0)) {
    samples += batch->size();  // batch->data: [64, 3, 28, 28] floats; batch->labels: [64]
  }
  fmt::print("{} samples in {} full batches of 3 x 28 x 28\n", samples, samples / 64);
  std::filesystem::remove_all(path);
}
