// Shard index files in DALI's formats (wds2idx's version 1.2, tfrecord2idx's): written as DALI's
// tools write them, read back into the sources, which then open without reading the shards'
// headers and deliver what a scan would; every fault of an index named by index, line and shard.

#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/shard_index.hpp>
#include <crema/io/shards/tar.hpp>
#include <crema/io/shards/tfrecord.hpp>
#include <crema/io/shards/tfrecord_source.hpp>
#include <crema/io/shards/webdataset.hpp>
#include <crema/io/shards/webdataset_source.hpp>

#include "common/error_message.hpp"
#include "common/scratch_directory.hpp"
#include "common/text_bytes.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using crema::test::bytes_of;
using crema::test::message_of;
using crema::test::scratch_directory;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Samples "k<i>" of a "jpg" and a "cls", and a "__meta__" file that WebDataset passes over.
void write_shard(const fs::path& path, std::size_t samples) {
  crema::tar_writer tar(path.string());
  tar.add("__meta__.json", bytes_of("{}"));
  for (std::size_t i = 0; i < samples; ++i) {
    tar.add(fmt::format("dir/k{}.jpg", i), bytes_of(fmt::format("image {}", i)));
    tar.add(fmt::format("dir/k{}.cls", i), bytes_of(std::to_string(i % 3)));
  }
  tar.finish();
}

// What DALI's wds2idx writes for a shard: from the tar's own members, grouped by key.
std::string dali_webdataset_index(const crema::shard_file& file) {
  std::vector<std::string> lines;
  std::string last_key;
  crema::tar_scanner scanner(file);
  while (const auto member = scanner.next()) {
    const auto [key, extension] = crema::webdataset_split(member->name);
    const std::string field =
        fmt::format("{} {} {} {}", extension, member->offset, member->size, member->name);
    if (!lines.empty() && key == last_key) {
      lines.back() += " " + field;
    } else {
      lines.push_back(field);
      last_key = std::string(key);
    }
  }
  std::string text = fmt::format("v1.2 {}\n", lines.size());
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

std::vector<std::string> images_of_pass(crema::tfrecord_source& source) {
  std::vector<std::string> images;
  std::vector<std::byte> buffer;
  while (const crema::tfrecord_record* record = source.next()) {
    const auto bytes = record->read_encoded(buffer).bytes;
    images.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return images;
}

}  // namespace

TEST_SUITE("shard index") {
  TEST_CASE("a WebDataset index is DALI's wds2idx text, and a source opened from it reads alike") {
    scratch_directory scratch("wds-index");
    const fs::path shard = scratch.path() / "s.tar";
    write_shard(shard, 5);
    const crema::shard_file file(shard.string());
    const auto scanned = crema::index_webdataset(file);
    REQUIRE(scanned.size() == 5);
    const std::string text = crema::webdataset_index_text(scanned);
    // DALI's text has the __meta__ file as a sample of its own, which crema passes over.
    std::string dali = dali_webdataset_index(file);
    CHECK(dali.starts_with("v1.2 6\njson "));
    dali = "v1.2 5\n" + dali.substr(dali.find('\n', dali.find('\n') + 1) + 1);
    CHECK(text == dali);

    // DALI's own text, __meta__ and all, reads as crema's scan.
    write_text(scratch.path() / "s.tar.idx", dali_webdataset_index(file));
    const auto read = crema::read_webdataset_index(
        crema::detail::read_index_file((scratch.path() / "s.tar.idx").string()), "s.tar.idx", file);
    REQUIRE(read.size() == scanned.size());
    for (std::size_t i = 0; i < read.size(); ++i) {
      CHECK(read[i].key == scanned[i].key);
      REQUIRE(read[i].members.size() == scanned[i].members.size());
      for (std::size_t m = 0; m < read[i].members.size(); ++m) {
        CHECK(read[i].members[m].extension == scanned[i].members[m].extension);
        CHECK(read[i].members[m].offset == scanned[i].members[m].offset);
        CHECK(read[i].members[m].size == scanned[i].members[m].size);
      }
    }

    crema::webdataset_source from_index(
        {shard.string()}, crema::shard_indexes{{(scratch.path() / "s.tar.idx").string()}});
    crema::webdataset_source from_scan({shard.string()});
    from_index.shuffle(3);
    from_scan.shuffle(3);
    crema::webdataset_sample a;
    crema::webdataset_sample b;
    std::size_t seen = 0;
    while (const crema::webdataset_record* record = from_index.next()) {
      const crema::webdataset_record* other = from_scan.next();
      REQUIRE(other != nullptr);
      record->read(a);
      other->read(b);
      CHECK(a.key() == b.key());
      CHECK(a.text("jpg") == b.text("jpg"));
      CHECK(a.cls() == b.cls());
      ++seen;
    }
    CHECK(seen == 5);
    CHECK(from_scan.next() == nullptr);
  }

  TEST_CASE(
      "a WebDataset index that does not fit its shard is an error naming index, line, shard") {
    scratch_directory scratch("wds-index-faults");
    const fs::path shard = scratch.path() / "s.tar";
    write_shard(shard, 2);
    const crema::shard_file file(shard.string());
    const std::string good = crema::webdataset_index_text(crema::index_webdataset(file));
    const auto fault = [&](const std::string& text) {
      return message_of<crema::format_error>(
          [&] { (void)crema::read_webdataset_index(text, "s.idx", file); });
    };
    const std::string where = fmt::format("shard index s.idx (of shard {}), ", shard.string());
    CHECK(fault("v1.1 2\n") ==
          where +
              "line 1: its first line is 'v1.1', where DALI's version 1.2 has 'v1.2 "
              "<samples>' (wds2idx, crema-shards index write it)");
    CHECK(fault("") == fmt::format("shard index s.idx (of shard {}): it is empty", shard.string()));
    CHECK(fault("v1.2 3\n" + good.substr(good.find('\n') + 1)) ==
          where + "line 3: its first line counts 3 samples, its lines 2");
    CHECK(fault("v1.2 1\njpg 1536 7\n") ==
          where + "line 2: 3 fields, where each member has 4 (extension, offset, size, name)");
    CHECK(fault("v1.2 1\njpg x1536 7 k.jpg\n") ==
          where + "line 2: its offset 'x1536' is not a number");
    CHECK(fault(fmt::format("v1.2 1\njpg {} 7 k.jpg\n", file.size() - 3)) ==
          where + fmt::format("line 2: member k.jpg (7 bytes at byte {}) runs past the shard's "
                              "end ({} bytes)",
                              file.size() - 3, file.size()));
    CHECK(fault("v1.2 2\njpg 2048 7 k1.jpg\njpg 1024 7 k2.jpg\n") ==
          where +
              "line 3: member k2.jpg at byte 1024 lies before the end of the one before it "
              "(byte 2055): not in the shard's order");
    CHECK(fault("v1.2 1\njpg 1024 7 k1.jpg cls 2048 1 k2.cls\n") ==
          where + "line 2: member k2.cls is not of sample k1, whose line it is on");
    CHECK(fault("v1.2 1\njpg 1024 7 k1.jpg jpg 2048 1 k1.JPG\n") ==
          where + "line 2: sample k1 has two members of extension 'jpg'");

    // A missing index file, and a count of index files that differs from the shards'.
    const std::string missing = (scratch.path() / "none.idx").string();
    CHECK(message_of<crema::io_error>([&] {
            crema::webdataset_source({shard.string()}, crema::shard_indexes{{missing}});
          }) == fmt::format("shard index {}: cannot open", missing));
    CHECK(message_of<crema::config_error>([&] {
            crema::webdataset_source({shard.string()}, crema::shard_indexes{});
          }) == "webdataset_source: 0 index files for 1 shards; give one a shard, in their order");
  }

  TEST_CASE("a TFRecord index is tfrecord2idx's text, and a record misplaced by one fails read") {
    scratch_directory scratch("tfrecord-index");
    const fs::path shard = scratch.path() / "a.tfrecord";
    std::vector<std::size_t> sizes;
    {
      crema::tfrecord_writer out(shard.string());
      for (std::size_t i = 0; i < 4; ++i) {
        const auto example = crema::tf_example_builder()
                                 .add_bytes("image/encoded", bytes_of(fmt::format("image {}", i)))
                                 .add_int64("image/class/label", static_cast<std::int64_t>(i))
                                 .bytes();
        sizes.push_back(example.size());
        out.write(example);
      }
      out.finish();
    }
    const crema::shard_file file(shard.string());
    // tfrecord2idx: each record's header offset and its whole framed size (8 + 4 + data + 4).
    std::string expected;
    std::size_t at = 0;
    for (const std::size_t size : sizes) {
      expected += fmt::format("{} {}\n", at, size + 16);
      at += size + 16;
    }
    const std::string text = crema::tfrecord_index_text(crema::index_tfrecord(file));
    CHECK(text == expected);

    const fs::path index = scratch.path() / "a.tfrecord.idx";
    write_text(index, text);
    crema::tfrecord_source from_index({shard.string()}, crema::shard_indexes{{index.string()}});
    crema::tfrecord_source from_scan({shard.string()});
    CHECK(images_of_pass(from_index) == images_of_pass(from_scan));

    // An index whose second record is one byte longer than the file's: its header disagrees.
    const std::string second = fmt::format("{} {}", sizes[0] + 16, sizes[1] + 16);
    std::string wrong = text;
    wrong.replace(wrong.find(second), second.size(),
                  fmt::format("{} {}", sizes[0] + 16, sizes[1] + 17));
    // ... which also overlaps the third: refused when the index is read.
    CHECK(message_of<crema::format_error>(
              [&] { (void)crema::read_tfrecord_index(wrong, "a.idx", file); })
              .ends_with("line 3: the record at byte " + std::to_string(sizes[0] + sizes[1] + 32) +
                         " starts before the one before it ends (byte " +
                         std::to_string(sizes[0] + sizes[1] + 33) + ")"));
    // One that leaves the third out reads, and fails on the second when it is read.
    wrong = fmt::format("0 {}\n{} {}\n", sizes[0] + 16, sizes[0] + 16, sizes[1] + 17);
    write_text(index, wrong);
    crema::tfrecord_source misplaced({shard.string()}, crema::shard_indexes{{index.string()}});
    std::vector<std::byte> buffer;
    (void)misplaced.next()->read_encoded(buffer);
    const crema::tfrecord_record* bad = misplaced.next();
    REQUIRE(bad != nullptr);
    CHECK(message_of<crema::format_error>([&] { (void)bad->read_encoded(buffer); }) ==
          fmt::format("tfrecord shard {}: no record of {} bytes at byte {}, where its index places "
                      "one (the header there says {} bytes)",
                      shard.string(), sizes[1] + 1, sizes[0] + 16, sizes[1]));
    CHECK(message_of<crema::format_error>(
              [&] { (void)crema::read_tfrecord_index("0 15\n", "a.idx", file); })
              .ends_with("line 1: a record of 15 bytes at byte 0 is shorter than its framing (16 "
                         "bytes)"));
  }
}
