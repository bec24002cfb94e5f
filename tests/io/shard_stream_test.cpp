// Shards read without an index (webdataset_stream_source, tfrecord_stream_source): each rank its
// own shards, read from start to end; in order, the same samples as the indexed sources; a
// shuffle buffer that draws every sample once a pass, the same for the same seed; a pass of a
// fixed size on every rank; positions resumed by replay; errors at the shard or rank at fault.

#include <crema/io/shards/shard_list.hpp>
#include <crema/io/shards/tar.hpp>
#include <crema/io/shards/tfrecord.hpp>
#include <crema/io/shards/tfrecord_source.hpp>
#include <crema/io/shards/tfrecord_stream_source.hpp>
#include <crema/io/shards/webdataset_source.hpp>
#include <crema/io/shards/webdataset_stream_source.hpp>

#include "common/error_message.hpp"
#include "common/scratch_directory.hpp"
#include "common/text_bytes.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using crema::test::bytes_of;
using crema::test::message_of;
using crema::test::scratch_directory;

// Shards s0.tar, s1.tar, ... of `sizes[s]` samples each: a "jpg" (its key repeated) and a "cls".
std::vector<std::string> write_shards(const fs::path& folder,
                                      const std::vector<std::size_t>& sizes) {
  std::vector<std::string> paths;
  std::size_t first = 0;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    paths.push_back((folder / fmt::format("s{}.tar", s)).string());
    crema::tar_writer tar(paths.back());
    for (std::size_t i = first; i < first + sizes[s]; ++i) {
      const std::string key = fmt::format("s{}/{:05}", s, i);
      tar.add(key + ".cls", bytes_of(std::to_string(i % 10)));
      tar.add(key + ".jpg", bytes_of("image of " + key));
    }
    tar.finish();
    first += sizes[s];
  }
  return paths;
}

template <class Source>
std::vector<std::string> pass_of(Source& source) {
  std::vector<std::string> images;
  std::vector<std::byte> buffer;
  while (const auto* record = source.next()) {
    const crema::encoded_sample sample = record->read_encoded(buffer);
    images.emplace_back(reinterpret_cast<const char*>(sample.bytes.data()), sample.bytes.size());
  }
  return images;
}

bool part_count_is(const std::vector<std::size_t>& counts, std::size_t total) {
  return counts[0] + counts[1] == total;
}

std::size_t shard_of(const std::string& image) {  // "image of s<shard>/<n>"
  return static_cast<std::size_t>(std::stoul(image.substr(10, image.find('/') - 10)));
}

}  // namespace

TEST_SUITE("shard streams") {
  TEST_CASE("in order: every sample of every shard once, as the indexed source reads them") {
    scratch_directory scratch("stream-order");
    const auto paths = write_shards(scratch.path(), {7, 3, 9});
    crema::webdataset_source indexed(paths);
    crema::webdataset_stream_source stream(paths);
    const auto expected = pass_of(indexed);
    CHECK(pass_of(stream) == expected);
    CHECK(stream.position() == 19);
    stream.rewind();
    CHECK(pass_of(stream) == expected);  // unshuffled, every pass alike
    CHECK(stream.key() == "webdataset-stream:" + paths[0] + "+2");
  }

  TEST_CASE(
      "shuffled: the shards' order and the buffer's draws change each pass, every sample once, "
      "the same for the same seed") {
    scratch_directory scratch("stream-shuffle");
    const auto paths = write_shards(scratch.path(), {7, 3, 9, 5});
    crema::webdataset_stream_source in_order(paths);
    const auto ordered = pass_of(in_order);
    const std::set<std::string> all(ordered.begin(), ordered.end());
    crema::webdataset_stream_source stream(paths, nullptr, {.shuffle_buffer = 6});
    stream.shuffle(17);
    std::vector<std::vector<std::string>> passes;
    for (int pass = 0; pass < 3; ++pass) {
      passes.push_back(pass_of(stream));
      CHECK(passes.back().size() == 24);
      CHECK(std::set<std::string>(passes.back().begin(), passes.back().end()) == all);
      CHECK(passes.back() != ordered);
      stream.rewind();
    }
    CHECK(passes[0] != passes[1]);
    crema::webdataset_stream_source again(paths, nullptr, {.shuffle_buffer = 6});
    again.shuffle(17);
    CHECK(pass_of(again) == passes[0]);

    INFO("without a buffer, the shards' order alone: each shard's samples together, in order");
    crema::webdataset_stream_source shards_only(paths);
    shards_only.shuffle(17);
    const auto pass = pass_of(shards_only);
    std::vector<std::size_t> runs;  // the shards in the order their samples came
    for (const auto& image : pass) {
      if (runs.empty() || runs.back() != shard_of(image)) runs.push_back(shard_of(image));
    }
    CHECK(runs.size() == 4);
    CHECK(std::set<std::size_t>(runs.begin(), runs.end()).size() == 4);
    CHECK(std::is_sorted(pass.begin(), pass.begin() + 3));
  }

  TEST_CASE(
      "ranks read disjoint shards that together hold every sample, and a pass size gives every "
      "rank "
      "as many, short ranks reading their shards again") {
    scratch_directory scratch("stream-ranks");
    const std::vector<std::size_t> sizes = {7, 3, 9, 5, 4};
    const auto paths = write_shards(scratch.path(), sizes);
    std::multiset<std::string> seen;
    std::vector<std::size_t> counts;
    for (std::size_t rank = 0; rank < 2; ++rank) {
      crema::webdataset_stream_source part(paths);
      part.shuffle(5);
      part.shard(rank, 2);
      const auto pass = pass_of(part);
      std::size_t expected = 0;
      for (const std::size_t s : part.rank_shards()) expected += sizes[s];
      CHECK(pass.size() == expected);  // the rank's shards once, whatever they hold
      counts.push_back(pass.size());
      seen.insert(pass.begin(), pass.end());
      for (const auto& image : pass) {
        const auto& mine = part.rank_shards();
        CHECK(std::find(mine.begin(), mine.end(), shard_of(image)) != mine.end());
      }
    }
    CHECK(part_count_is(counts, 28));
    CHECK(seen.size() == 28);
    CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 28);

    INFO("a pass size past the ranks' shards: each rank's every sample, then some again");
    const std::size_t longer = std::max(counts[0], counts[1]) + 2;
    const std::size_t shorter = std::min(counts[0], counts[1]) - 1;
    for (std::size_t rank = 0; rank < 2; ++rank) {
      crema::webdataset_stream_source part(paths);
      part.shuffle(5);
      part.shard(rank, 2);
      part.pass_size(longer);
      for (int pass = 0; pass < 2; ++pass) {  // the shards go to other ranks each epoch
        std::size_t held = 0;
        for (const std::size_t s : part.rank_shards()) held += sizes[s];
        const auto images = pass_of(part);
        CHECK(images.size() == longer);
        CHECK(std::set<std::string>(images.begin(), images.end()).size() == std::min(held, longer));
        part.rewind();
      }
      part.set_epoch(0);
      INFO("one short of the smaller: both stop there, every sample read once");
      part.pass_size(shorter);
      const auto images = pass_of(part);
      CHECK(images.size() == shorter);
      CHECK(std::set<std::string>(images.begin(), images.end()).size() == shorter);
      INFO("through a buffer, as many samples a pass all the same");
      crema::webdataset_stream_source buffered(paths, nullptr, {.shuffle_buffer = 4});
      buffered.shuffle(5);
      buffered.shard(rank, 2);
      buffered.pass_size(longer);
      CHECK(pass_of(buffered).size() == longer);
      INFO(
          "a pass of the rank's own size through a buffer: each sample once, the buffer "
          "drained before the shards are read again");
      crema::webdataset_stream_source drained(paths, nullptr, {.shuffle_buffer = 8});
      drained.shuffle(5);
      drained.shard(rank, 2);
      drained.pass_size(counts[rank]);
      const auto exact = pass_of(drained);
      CHECK(std::set<std::string>(exact.begin(), exact.end()).size() == counts[rank]);
    }
  }

  TEST_CASE("a position resumes the pass exactly, by replay, shuffled through a buffer") {
    scratch_directory scratch("stream-resume");
    const auto paths = write_shards(scratch.path(), {7, 3, 9, 5});
    crema::webdataset_stream_source stream(paths, nullptr, {.shuffle_buffer = 5});
    stream.shuffle(23);
    stream.shard(1, 2);
    stream.set_epoch(3);
    std::vector<std::byte> buffer;
    for (int i = 0; i < 4; ++i) (void)stream.next()->read_encoded(buffer);
    const auto epoch = stream.epoch();
    const auto position = stream.position();
    const auto rest = pass_of(stream);
    crema::webdataset_stream_source resumed(paths, nullptr, {.shuffle_buffer = 5});
    resumed.shuffle(23);
    resumed.shard(1, 2);
    resumed.set_epoch(epoch);
    resumed.seek(position);
    CHECK(resumed.position() == 4);
    CHECK(pass_of(resumed) == rest);
    const auto size = 4 + rest.size();
    CHECK(message_of<crema::config_error>([&] { resumed.seek(size + 1); }) ==
          fmt::format("webdataset_stream_source: position {} is past the end of "
                      "webdataset-stream:{}+3's pass, which holds {} samples",
                      size + 1, paths[0], size));
  }

  TEST_CASE("errors: no shard, more ranks than shards, an empty shard when it is reached") {
    scratch_directory scratch("stream-errors");
    auto paths = write_shards(scratch.path(), {4, 2});
    CHECK(message_of<crema::config_error>([] { crema::webdataset_stream_source({}); }) ==
          "webdataset_stream_source: no shard given");
    crema::webdataset_stream_source stream(paths);
    CHECK(message_of<crema::config_error>([&] { stream.shard(2, 3); }) ==
          "webdataset_stream_source: rank 2 of 3 gets no shard: there are 2 shards (give at "
          "least a shard a rank)");
    const std::string empty = (scratch.path() / "empty.tar").string();
    crema::tar_writer(empty).finish();
    paths.push_back(empty);
    crema::webdataset_stream_source with_empty(paths);
    with_empty.pass_size(100);  // would read its shards again and again: an error, not a loop
    CHECK(message_of<crema::config_error>([&] { (void)pass_of(with_empty); }) ==
          fmt::format("webdataset_stream_source: shard {} holds no sample", empty));
    const std::string text = (scratch.path() / "text.tar").string();
    {
      std::ofstream out(text, std::ios::binary);
      out << std::string(1024, 'T');
    }
    crema::webdataset_stream_source not_tar({text});
    CHECK(message_of<crema::format_error>([&] {
            (void)not_tar.next();
          }).starts_with("tar shard " + text));
  }

  TEST_CASE("TFRecord files streamed: the indexed source's records in order, all once shuffled") {
    scratch_directory scratch("stream-tfrecord");
    std::vector<std::string> paths;
    for (std::size_t f = 0; f < 3; ++f) {
      paths.push_back((scratch.path() / fmt::format("part-{}.tfrecord", f)).string());
      crema::tfrecord_writer out(paths.back());
      for (std::size_t i = 0; i < 4 + f; ++i) {
        out.write(crema::tf_example_builder()
                      .add_bytes("image/encoded", bytes_of(fmt::format("image {}-{}", f, i)))
                      .add_int64("image/class/label", static_cast<std::int64_t>(i))
                      .bytes());
      }
      out.finish();
    }
    crema::tfrecord_source indexed(paths);
    crema::tfrecord_stream_source stream(paths);
    const auto expected = pass_of(indexed);
    CHECK(pass_of(stream) == expected);
    crema::tfrecord_stream_source shuffled(paths, {}, nullptr, {.shuffle_buffer = 3});
    shuffled.shuffle(2);
    const auto pass = pass_of(shuffled);
    CHECK(pass != expected);
    CHECK(std::multiset<std::string>(pass.begin(), pass.end()) ==
          std::multiset<std::string>(expected.begin(), expected.end()));
  }
}
