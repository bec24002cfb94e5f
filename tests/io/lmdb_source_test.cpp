// lmdb_source and lmdb_writer over real databases in a temporary directory: what is written is
// read back, in order or shuffled (a shuffle buffer or an exact permutation), sharded disjoint
// and complete, resumed exactly; bad paths and corrupt records are errors that name them.

#include <crema/io/caffe/datum.hpp>
#include <crema/io/lmdb/lmdb_environment.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/resume_check.hpp"
#include "common/scratch_directory.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A directory of its own for one test, removed after it.
using crema::test::scratch_directory;

std::string key_of(std::size_t index) { return fmt::format("{:08}_image{}.jpg", index, index); }

// A database of `count` Datums as convert_imageset writes them: key "%08d_<file>", value a
// 3 x 2 x 2 Datum whose label is the record's index and whose pixels are derived from it.
fs::path make_dataset(const fs::path& directory, std::size_t count,
                      crema::lmdb_writer_options options = {}) {
  crema::lmdb_writer writer(directory, options);
  std::vector<std::byte> value;
  std::vector<std::byte> pixels(12);
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t p = 0; p < pixels.size(); ++p) pixels[p] = static_cast<std::byte>(i * 7 + p);
    value.clear();
    crema::encode_datum({.channels = 3,
                         .height = 2,
                         .width = 2,
                         .label = static_cast<std::int32_t>(i),
                         .data = pixels},
                        value);
    const std::string key = key_of(i);
    writer.put(key, value);
  }
  writer.finish();
  return directory;
}

std::size_t label_of(const crema::lmdb_record& record) {
  return static_cast<std::size_t>(crema::decode_datum(record.value, record.key_text()).label);
}

// The labels of what is left of the source's pass.
std::vector<std::size_t> rest_of_pass(crema::lmdb_source& source) {
  std::vector<std::size_t> labels;
  while (const crema::lmdb_record* record = source.next()) labels.push_back(label_of(*record));
  return labels;
}

// Its records are views into the map, read once per pass: the pipeline prefetches them.
static_assert(crema::prefetching_record_source<crema::lmdb_source>);

std::vector<std::size_t> iota(std::size_t size) {
  std::vector<std::size_t> all(size);
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

struct read_mode {
  const char* name;
  crema::lmdb_source_options options;
};

const read_mode modes[] = {
    {"in order", {}},
    {"shuffle buffer", {.shuffle_buffer = 16, .seed = 7}},
    {"permutation", {.permute = true, .seed = 7}},
};

// The message of a `crema::error` of type E thrown by `action`; fails the test otherwise.
template <class E, class Action>
std::string message_of(Action action) {
  try {
    action();
  } catch (const E& error) {
    return error.what();
  }
  FAIL("the expected error was not thrown");
  return {};
}

}  // namespace

TEST_SUITE("lmdb") {
  TEST_CASE("what the writer puts is read back in key order, values and keys intact") {
    scratch_directory scratch("lmdb-roundtrip");
    const auto path = make_dataset(scratch.path() / "db", 250);
    crema::lmdb_source source(path);
    CHECK(source.records() == 250);
    CHECK(source.size() == 250);
    CHECK(source.key() == "lmdb:" + path.string());
    std::size_t index = 0;
    while (const crema::lmdb_record* record = source.next()) {
      CHECK(source.record_key(*record) == key_of(index));
      const auto datum = crema::decode_datum(record->value);
      CHECK(datum.label == static_cast<std::int32_t>(index));
      REQUIRE(datum.data.size() == 12);
      CHECK(datum.data[11] == static_cast<std::byte>(index * 7 + 11));
      ++index;
    }
    CHECK(index == 250);
    CHECK(source.next() == nullptr);
    source.rewind();
    CHECK(source.epoch() == 1);
    CHECK(rest_of_pass(source) == iota(250));
  }

  TEST_CASE("the writer grows its map when it fills, without losing a record") {
    scratch_directory scratch("lmdb-grow");
    const auto path = scratch.path() / "db";
    crema::lmdb_writer writer(path, {.records_per_commit = 300, .initial_map_bytes = 64 << 10});
    const std::vector<std::byte> value(2000, std::byte{0x5a});  // ~4 MiB in all: 6 doublings
    for (std::size_t i = 0; i < 2000; ++i) writer.put(key_of(i), value);
    writer.finish();
    CHECK(writer.committed() == 2000);
    crema::lmdb_source source(path);
    CHECK(source.records() == 2000);
    std::size_t count = 0;
    while (const crema::lmdb_record* record = source.next()) {
      CHECK(record->key_text() == key_of(count));
      CHECK(record->value.size() == 2000);
      ++count;
    }
    CHECK(count == 2000);
  }

  TEST_CASE("a data file can be named instead of its directory") {
    scratch_directory scratch("lmdb-file");
    const auto path = make_dataset(scratch.path() / "db", 5);
    crema::lmdb_source source(path / "data.mdb");
    CHECK(rest_of_pass(source) == iota(5));
  }

  TEST_CASE(
      "shards are disjoint and together complete, for worlds 1 to 5, in every mode and "
      "epoch") {
    scratch_directory scratch("lmdb-shards");
    const auto path = make_dataset(scratch.path() / "db", 103);
    for (const auto& mode : modes) {
      for (std::size_t world = 1; world <= 5; ++world) {
        for (const std::uint64_t epoch : {0ULL, 1ULL, 6ULL}) {
          CAPTURE(mode.name);
          CAPTURE(world);
          CAPTURE(epoch);
          std::vector<std::size_t> all;
          for (std::size_t rank = 0; rank < world; ++rank) {
            crema::lmdb_source source(path, mode.options);
            source.shard(rank, world);
            source.set_epoch(epoch);
            const auto part = rest_of_pass(source);
            CHECK(part.size() == source.size());
            all.insert(all.end(), part.begin(), part.end());
          }
          std::sort(all.begin(), all.end());
          CHECK(all == iota(103));
        }
      }
    }
  }

  TEST_CASE("shuffled passes are permutations, another each epoch, the same on every run") {
    scratch_directory scratch("lmdb-shuffle");
    const auto path = make_dataset(scratch.path() / "db", 400);
    for (const auto& mode : {modes[1], modes[2]}) {
      CAPTURE(mode.name);
      crema::lmdb_source source(path, mode.options);
      const auto first = rest_of_pass(source);
      source.rewind();
      const auto second = rest_of_pass(source);
      auto sorted = first;
      std::sort(sorted.begin(), sorted.end());
      CHECK(sorted == iota(400));
      CHECK(first != iota(400));
      CHECK(first != second);
      crema::lmdb_source again(path, mode.options);
      CHECK(rest_of_pass(again) == first);
      auto other_options = mode.options;
      other_options.seed = 8;
      crema::lmdb_source other(path, other_options);
      CHECK(rest_of_pass(other) != first);
    }
  }

  TEST_CASE(
      "a shuffle buffer reads ahead at most its size: no record comes out more than that "
      "early") {
    scratch_directory scratch("lmdb-window");
    const auto path = make_dataset(scratch.path() / "db", 500);
    crema::lmdb_source source(path, {.shuffle_buffer = 32, .seed = 1});
    const auto order = rest_of_pass(source);
    std::size_t displaced = 0;
    for (std::size_t position = 0; position < order.size(); ++position) {
      CHECK(order[position] < position + 32);
      displaced += order[position] != position ? 1 : 0;
    }
    CHECK(displaced > 400);
  }

  TEST_CASE(
      "balanced shards of an LMDB hold as many records on every rank, in every mode: "
      "padded ones read the pass's first records again") {
    scratch_directory scratch("lmdb-balance");
    const auto path = make_dataset(scratch.path() / "db", 23);
    for (const auto& mode : modes) {
      CAPTURE(mode.name);
      std::vector<std::size_t> padded;
      std::vector<std::size_t> dropped;
      for (std::size_t rank = 0; rank < 5; ++rank) {
        crema::lmdb_source source(path, mode.options);
        source.shard(rank, 5);
        source.balance(crema::shard_balance::pad);
        const auto part = rest_of_pass(source);
        CHECK(part.size() == 5);  // ceil(23 / 5): ranks 3 and 4 read one record twice
        padded.insert(padded.end(), part.begin(), part.end());
        source.balance(crema::shard_balance::drop);
        const auto kept = rest_of_pass(source);
        CHECK(kept.size() == 4);
        dropped.insert(dropped.end(), kept.begin(), kept.end());
        source.seek(2);  // resumes inside the balanced pass
        CHECK(rest_of_pass(source) == std::vector<std::size_t>(kept.begin() + 2, kept.end()));
      }
      std::sort(padded.begin(), padded.end());
      CHECK(padded.size() == 25);
      padded.erase(std::unique(padded.begin(), padded.end()), padded.end());
      CHECK(padded == iota(23));
      std::sort(dropped.begin(), dropped.end());
      CHECK(std::adjacent_find(dropped.begin(), dropped.end()) == dropped.end());
    }
    // In order, the padding is the database's first records, read from its first key again.
    crema::lmdb_source last(path);
    last.shard(4, 5);
    last.balance(crema::shard_balance::pad);
    CHECK(rest_of_pass(last) == std::vector<std::size_t>{4, 9, 14, 19, 1});
  }

  TEST_CASE("position and seek resume a pass exactly, in every mode, sharded") {
    scratch_directory scratch("lmdb-resume");
    const auto path = make_dataset(scratch.path() / "db", 97);
    for (const auto& mode : modes) {
      for (const std::size_t stop_at : {0U, 1U, 13U, 31U, 32U}) {
        CAPTURE(mode.name);
        CAPTURE(stop_at);
        crema::lmdb_source whole(path, mode.options);
        whole.shard(1, 3);
        whole.set_epoch(2);
        const auto uninterrupted = rest_of_pass(whole);
        REQUIRE(uninterrupted.size() == 32);

        crema::lmdb_source first(path, mode.options);
        first.shard(1, 3);
        first.set_epoch(2);
        std::vector<std::size_t> seen;
        while (seen.size() < stop_at) seen.push_back(label_of(*first.next()));
        const crema::record_position saved = first.position();
        CHECK(saved == stop_at);

        crema::lmdb_source resumed(path, mode.options);  // a new process, say
        resumed.shard(1, 3);
        resumed.set_epoch(first.epoch());
        resumed.seek(saved);
        const auto rest = rest_of_pass(resumed);
        seen.insert(seen.end(), rest.begin(), rest.end());
        CHECK(seen == uninterrupted);
      }
    }
  }

  TEST_CASE(
      "in order and permuted, the source reads exactly the records its shard cursor names, "
      "in every shard and epoch, and reports the cursor") {
    scratch_directory scratch("lmdb-cursor");
    const fs::path path = make_dataset(scratch.path() / "db", 29);
    for (const bool permuted : {false, true}) {
      for (std::size_t world : {1, 4}) {
        for (std::size_t rank = 0; rank < world; ++rank) {
          for (const std::uint64_t epoch : {0ULL, 3ULL}) {
            CAPTURE(permuted);
            CAPTURE(rank);
            CAPTURE(world);
            CAPTURE(epoch);
            crema::shard_cursor expected(29);
            if (permuted) expected.shuffle(17);
            expected.shard(rank, world);
            expected.set_epoch(epoch);
            std::vector<std::size_t> want;
            while (!expected.exhausted()) {
              want.push_back(static_cast<std::size_t>(expected.next_index()));
              expected.advance();
            }
            crema::lmdb_source source(path, {.permute = permuted, .seed = 17});
            source.shard(rank, world);
            source.set_epoch(epoch);
            CHECK(rest_of_pass(source) == want);
            CHECK(source.cursor().position() == want.size());
            CHECK(source.cursor().epoch() == epoch);
          }
        }
      }
    }
  }

  TEST_CASE("a position past the end of the shard is refused, naming it") {
    scratch_directory scratch("lmdb-seek");
    const auto path = make_dataset(scratch.path() / "db", 10);
    crema::lmdb_source source(path);
    source.shard(1, 3);
    CHECK(message_of<crema::config_error>([&] { source.seek(4); }) ==
          fmt::format("lmdb_source: position 4 is past the end of lmdb:{} (shard 1 of 3 holds 3 "
                      "records)",
                      path.string()));
  }

  TEST_CASE("skip starts the first pass that many records in, and only the first") {
    scratch_directory scratch("lmdb-skip");
    const auto path = make_dataset(scratch.path() / "db", 20);
    crema::lmdb_source source(path, {.skip = 25});  // modulo the size: 5
    CHECK(source.position() == 5);
    const auto first = rest_of_pass(source);
    CHECK(first == std::vector<std::size_t>{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
    source.rewind();
    CHECK(rest_of_pass(source) == iota(20));
    source.set_epoch(0);
    CHECK(source.position() == 5);
    source.seek(0);  // a saved position is exact: it does not skip again
    CHECK(rest_of_pass(source) == iota(20));
  }

  TEST_CASE("paths that are not an LMDB with records are errors naming them") {
    scratch_directory scratch("lmdb-bad");
    const auto missing = scratch.path() / "missing";
    CHECK(message_of<crema::config_error>([&] { crema::lmdb_source source(missing); }) ==
          fmt::format("lmdb_source: {} does not exist", missing.string()));

    const auto not_lmdb = scratch.path() / "not_lmdb";
    fs::create_directories(not_lmdb);
    {
      std::ofstream file(not_lmdb / "data.mdb", std::ios::binary);
      file << std::string(8192, 'x');
    }
    const std::string garbage =
        message_of<crema::lmdb_error>([&] { crema::lmdb_source source(not_lmdb); });
    CHECK(garbage.find(not_lmdb.string()) != std::string::npos);
    CHECK(garbage.find("is not an LMDB") != std::string::npos);

    const auto empty = scratch.path() / "empty";
    { crema::lmdb_writer writer(empty); }
    CHECK(message_of<crema::config_error>([&] { crema::lmdb_source source(empty); }) ==
          fmt::format("lmdb_source: {} holds no records", empty.string()));
  }

  TEST_CASE(
      "a source reads one snapshot for its life: what a writer does later is not seen, and "
      "records read earlier keep their bytes") {
    scratch_directory scratch("lmdb-snapshot");
    const auto path = make_dataset(scratch.path() / "db", 40);
    auto writer = std::make_unique<crema::lmdb_writer>(path);  // writers open before readers
    crema::lmdb_source source(path);
    std::vector<crema::lmdb_record> kept;  // views, as a pipeline's slots keep them
    for (int i = 0; i < 10; ++i) kept.push_back(*source.next());
    const std::vector<std::byte> other(100, std::byte{0xee});
    for (std::size_t i = 0; i < 60; ++i) writer->put(key_of(i), other);  // overwrites and adds
    writer->finish();
    writer.reset();
    for (std::size_t i = 0; i < kept.size(); ++i) CHECK(label_of(kept[i]) == i);
    source.rewind();
    CHECK(rest_of_pass(source) == iota(40));
    CHECK(crema::lmdb_source(path).records() == 60);  // a new source sees the new snapshot
  }

  TEST_CASE(
      "one environment per database and process: sources share it, by directory or data "
      "file, and a writer after a reader is refused, naming the path") {
    scratch_directory scratch("lmdb-environment");
    const auto path = make_dataset(scratch.path() / "db", 50);
    const auto by_directory =
        crema::lmdb_environment::open(path, crema::lmdb_environment::access::read, "test");
    const auto by_file = crema::lmdb_environment::open(
        path / "data.mdb", crema::lmdb_environment::access::read, "test");
    CHECK(by_directory.get() == by_file.get());
    CHECK(message_of<crema::config_error>([&] { crema::lmdb_writer writer(path); }) ==
          fmt::format("lmdb_writer: {} is open read-only in this process, and LMDB allows one "
                      "environment per database and process: open the writer before the readers",
                      path.string()));
  }

  TEST_CASE("sources of one database read on several threads at once, each its whole pass") {
    crema::test::watchdog guard(60s, "lmdb threads");
    scratch_directory scratch("lmdb-threads");
    const auto path = make_dataset(scratch.path() / "db", 300);
    std::vector<std::vector<std::size_t>> seen(4);
    for (int round = 0; round < 5; ++round) {  // environments opened and closed while others read
      std::vector<std::thread> readers;
      for (std::size_t t = 0; t < seen.size(); ++t) {
        readers.emplace_back([&, t] {
          crema::lmdb_source source(path, t % 2 == 0 ? crema::lmdb_source_options{}
                                                     : crema::lmdb_source_options{.permute = true});
          seen[t] = rest_of_pass(source);
          std::sort(seen[t].begin(), seen[t].end());
        });
      }
      for (auto& reader : readers) reader.join();
      for (const auto& one : seen) CHECK(one == iota(300));
    }
  }

  TEST_CASE("a source moved from still closes once, and the moved-to one reads on") {
    scratch_directory scratch("lmdb-move");
    const auto path = make_dataset(scratch.path() / "db", 8);
    crema::lmdb_source first(path);
    (void)first.next();
    crema::lmdb_source second(std::move(first));
    CHECK(second.position() == 1);
    CHECK(rest_of_pass(second) == std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7});
  }

  TEST_CASE(
      "a pipeline reads an LMDB of Datums: every label once per pass, sharded by "
      "consumers' ranks") {
    crema::test::watchdog guard(60s, "lmdb pipeline");
    scratch_directory scratch("lmdb-pipeline");
    const auto path = make_dataset(scratch.path() / "db", 1000);
    for (const auto& mode : modes) {
      CAPTURE(mode.name);
      crema::double_buffered_pipeline pipe{crema::lmdb_source(path, mode.options),
                                           label_of,
                                           {.batch_size = 32,
                                            .producers = 3,
                                            .threads = 2,
                                            .mode = crema::pipeline_mode::single_pass}};
      std::vector<std::size_t> labels;
      for (auto batch : pipe.consumer(0)) labels.insert(labels.end(), batch->begin(), batch->end());
      std::sort(labels.begin(), labels.end());
      CHECK(labels == iota(1000));
    }
  }

  TEST_CASE("a corrupt record stops the pipeline with an error naming its key") {
    crema::test::watchdog guard(60s, "lmdb corrupt record");
    scratch_directory scratch("lmdb-corrupt");
    const auto path = make_dataset(scratch.path() / "db", 50);
    {
      crema::lmdb_writer writer(path);
      const std::byte cut[] = {std::byte{0x08}, std::byte{3}, std::byte{0x22}, std::byte{40}};
      writer.put(key_of(17), cut);  // data says 40 bytes, none follow
    }
    crema::double_buffered_pipeline pipe{
        crema::lmdb_source(path), label_of, {.batch_size = 8, .producers = 1}};
    std::vector<std::size_t> labels;
    try {
      for (auto batch : pipe.consumer(0)) labels.insert(labels.end(), batch->begin(), batch->end());
      FAIL("the corrupt record was not reported");
    } catch (const crema::pipeline_error& error) {
      const std::string what = error.what();
      CHECK(what.find(key_of(17)) != std::string::npos);
      CHECK(what.find("record 17") != std::string::npos);
    }
    CHECK(labels == iota(17));  // everything before it arrived, nothing after
  }
  TEST_CASE("an LMDB pipeline stopped anywhere resumes exactly, in every read mode") {
    crema::test::watchdog guard(60s, "lmdb resume");
    scratch_directory scratch("lmdb-resume");
    const fs::path path = make_dataset(scratch.path() / "db", 29);
    const auto digest = [](const crema::lmdb_record& record) {
      return std::hash<std::string_view>{}(record.key_text()) ^ (record.value.size() << 1);
    };
    for (const int mode : {0, 1, 2}) {
      CAPTURE(mode);
      const auto make = [&] {
        crema::lmdb_source source(
            path,
            {.skip = 3, .shuffle_buffer = mode == 1 ? 5U : 0U, .permute = mode == 2, .seed = 12});
        source.shard(0, 2);
        return source;
      };
      crema::test::check_resumes_exactly(
          make, digest,
          {.batch_size = 4, .prefetch = 2, .producers = 2, .threads = 2, .consumers = 2, .seed = 3},
          14, {0, 1, 3, 4, 7, 8, 12, 13});
    }
  }
}
