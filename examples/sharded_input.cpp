// Training input from WebDataset tar shards: every epoch a new permutation of all their samples,
// the same on every rank, this rank's share of it, as many samples as every other rank's (so a
// data-parallel job never waits on a short rank), each decoded only in its sample's window.
//   sharded_input PATTERN [RANK WORLD]     (PATTERN: "train-{000000..000127}.tar", or a glob)
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/shards/shard_list.hpp>
#include <crema/io/shards/webdataset_source.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    fmt::print(stderr, "usage: sharded_input PATTERN [RANK WORLD]\n");
    return 2;
  }
  const std::size_t rank = argc == 4 ? std::stoul(argv[2]) : 0;
  const std::size_t world = argc == 4 ? std::stoul(argv[3]) : 1;
  const std::uint64_t seed = 2026;

  // Every shard's headers are read once, here; the samples are read by the producers.
  crema::webdataset_source train(crema::shard_paths(argv[1]));
  const std::size_t shards = train.shards().size();
  train.shuffle(seed);
  train.balance(crema::shard_balance::pad);  // every rank as many samples, a few read twice
  train.shard(rank, world);
  crema::image_batcher augment(
      crema::image_transform({.geometry = crema::random_resized_crop{224, 224},
                              .mirror = true,
                              .mean = {0.485F, 0.456F, 0.406F},
                              .std = {0.229F, 0.224F, 0.225F}}),
      crema::make_host_batch<float>{});
  crema::double_buffered_pipeline training{std::move(train),
                                           std::move(augment),
                                           {.batch_size = 4,
                                            .producers = 2,
                                            .threads = 2,
                                            .mode = crema::pipeline_mode::single_pass,
                                            .seed = seed}};

  std::size_t batches = 0;
  std::size_t samples = 0;
  for (auto batch : training.consumer(0)) {
    // batch->data: up to 4 x 3 x 224 x 224 floats, normalised; batch->labels: each sample's cls.
    ++batches;
    samples += batch->size();
  }
  fmt::print("rank {} of {}: one epoch of {} batches, {} samples, from {} shards\n", rank, world,
             batches, samples, shards);
  return samples > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
