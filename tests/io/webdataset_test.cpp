// WebDataset shards: the tar reader (ustar, GNU long names, pax headers, every fault named by
// shard and byte offset) and writer, GNU tar's archives read back, the grouping of members into
// samples by key, brace patterns and list files, and the source: every sample once, shuffled,
// sharded, balanced and resumed as the other indexed sources are.

#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/shard_list.hpp>
#include <crema/io/shards/tar.hpp>
#include <crema/io/shards/webdataset.hpp>
#include <crema/io/shards/webdataset_source.hpp>

#include "common/error_message.hpp"
#include "common/scratch_directory.hpp"
#include "common/text_bytes.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
using crema::test::bytes_of;
using crema::test::message_of;
using crema::test::scratch_directory;

std::string text_of(const crema::shard_file& file, const crema::tar_member& member) {
  std::string text(member.size, '\0');
  file.read_at(member.offset, std::as_writable_bytes(std::span(text)));
  return text;
}

std::vector<crema::tar_member> members_of(const crema::shard_file& file) {
  std::vector<crema::tar_member> members;
  crema::tar_scanner scanner(file);
  while (auto member = scanner.next()) members.push_back(std::move(*member));
  return members;
}

// A shard of `samples` samples, each a "jpg" (its key repeated) and a "cls" (its number modulo
// 10), keys "<prefix>/<number>".
void write_shard(const fs::path& path, const std::string& prefix, std::size_t first,
                 std::size_t samples) {
  crema::tar_writer tar(path.string());
  for (std::size_t i = first; i < first + samples; ++i) {
    const std::string key = fmt::format("{}/{:05}", prefix, i);
    tar.add(key + ".jpg", bytes_of("image of " + key));
    tar.add(key + ".cls", bytes_of(std::to_string(i % 10) + "\n"));
  }
  tar.finish();
}

std::vector<std::string> keys_of_pass(crema::webdataset_source& source) {
  std::vector<std::string> keys;
  while (const crema::webdataset_record* record = source.next()) {
    keys.emplace_back(record->key());
  }
  return keys;
}

}  // namespace

TEST_SUITE("tar") {
  TEST_CASE("what the writer writes the scanner reads back: names of every length, data, sizes") {
    scratch_directory scratch("tar-round-trip");
    const std::string slashed = std::string(120, 'd') + "/" + std::string(90, 'f') + ".jpg";
    const std::string unsplittable = std::string(230, 'x') + ".cls";
    const std::vector<std::pair<std::string, std::string>> members = {
        {"a.txt", "hello"},
        {"empty.bin", ""},
        {slashed, std::string(513, 'z')},
        {unsplittable, "7"},
        {"sub/dir/b.json", "{\"k\": 1}"}};
    const fs::path path = scratch.path() / "round.tar";
    {
      crema::tar_writer tar(path.string());
      for (const auto& [name, data] : members) tar.add(name, bytes_of(data));
      tar.finish();
      CHECK(tar.bytes() % 512 == 0);
    }
    CHECK(fs::file_size(path) % 512 == 0);
    const crema::shard_file file(path.string());
    const auto read = members_of(file);
    REQUIRE(read.size() == members.size());
    for (std::size_t i = 0; i < members.size(); ++i) {
      CHECK(read[i].name == members[i].first);
      CHECK(read[i].size == members[i].second.size());
      CHECK(read[i].offset % 512 == 0);
      CHECK(text_of(file, read[i]) == members[i].second);
    }
  }

  TEST_CASE("GNU tar's archives, gnu and pax formats, read alike, links and folders passed over") {
    if (std::system("tar --version > /dev/null 2>&1") != 0) {
      MESSAGE("tar is not installed: GNU tar's archives not read");
      return;
    }
    scratch_directory scratch("tar-gnu");
    const fs::path tree = scratch.path() / "tree";
    const std::string long_name = std::string(150, 'n') + ".jpg";  // longer than ustar's field
    fs::create_directories(tree / "k1");
    std::ofstream(tree / "k1" / "a.jpg") << "first";
    std::ofstream(tree / "k1" / long_name) << "second, with a long name";
    fs::create_symlink("a.jpg", tree / "k1" / "link.jpg");
    for (const std::string format : {"gnu", "pax", "ustar"}) {
      CAPTURE(format);
      const fs::path archive = scratch.path() / (format + ".tar");
      const std::string command = fmt::format(
          "cd '{}' && tar --format={} --no-recursion -cf '{}' k1 k1/a.jpg k1/link.jpg {} "
          "2>/dev/null",
          tree.string(), format, archive.string(),
          format == "ustar" ? "" : "'k1/" + long_name + "'");
      REQUIRE(std::system(command.c_str()) == 0);
      const crema::shard_file file(archive.string());
      std::map<std::string, std::string> found;
      for (const auto& member : members_of(file)) found[member.name] = text_of(file, member);
      CHECK(found.at("k1/a.jpg") == "first");
      CHECK(found.count("k1/link.jpg") == 0);  // a symbolic link is not a member
      CHECK(found.count("k1") == 0);           // nor is a folder
      if (format != "ustar") CHECK(found.at("k1/" + long_name) == "second, with a long name");
    }
  }

  TEST_CASE("Python's tarfile archives, in each of its formats, read as WebDataset samples") {
    if (std::system("python3 -c 'import tarfile' > /dev/null 2>&1") != 0) {
      MESSAGE("python3 is not installed: tarfile's archives not read");
      return;
    }
    scratch_directory scratch("tar-python");
    const std::string long_key = "n01440764/" + std::string(140, 'v');
    for (const std::string format : {"GNU_FORMAT", "PAX_FORMAT", "USTAR_FORMAT"}) {
      CAPTURE(format);
      const fs::path archive = scratch.path() / (format + ".tar");
      // The layout of WebDataset's ShardWriter: each sample's members one after another.
      const std::string script = fmt::format(
          "import io, tarfile\n"
          "with tarfile.open('{}', 'w', format=tarfile.{}) as t:\n"
          "    for key, cls in [('a/x1', 3), ('{}', 7)]:\n"
          "        for ext, data in [('jpg', b'J' * 700), ('cls', str(cls).encode())]:\n"
          "            info = tarfile.TarInfo(key + '.' + ext)\n"
          "            info.size = len(data)\n"
          "            t.addfile(info, io.BytesIO(data))\n",
          archive.string(), format, format == "USTAR_FORMAT" ? "b/x2" : long_key);
      std::ofstream(scratch.path() / "make.py") << script;
      REQUIRE(std::system(("python3 '" + (scratch.path() / "make.py").string() + "'").c_str()) ==
              0);
      crema::webdataset_source source({archive.string()});
      REQUIRE(source.records() == 2);
      crema::webdataset_sample sample;
      source.next()->read(sample);
      CHECK(sample.key() == "a/x1");
      CHECK(sample.image().size() == 700);
      CHECK(sample.cls() == 3);
      source.next()->read(sample);
      CHECK(sample.key() == (format == "USTAR_FORMAT" ? "b/x2" : long_key));
      CHECK(sample.cls() == 7);
    }
  }

  TEST_CASE("a damaged archive is an error naming the shard and the byte offset of the fault") {
    scratch_directory scratch("tar-damaged");
    const fs::path path = scratch.path() / "good.tar";
    {
      crema::tar_writer tar(path.string());
      tar.add("a.jpg", bytes_of(std::string(700, 'a')));  // data 512..1211, next header at 1536
      tar.add("b.jpg", bytes_of("b"));
    }
    auto bytes = std::vector<char>(fs::file_size(path));
    std::ifstream(path, std::ios::binary)
        .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const auto write = [&](const std::string& name, const std::vector<char>& content) {
      const fs::path at = scratch.path() / name;
      std::ofstream(at, std::ios::binary)
          .write(content.data(), static_cast<std::streamsize>(content.size()));
      return at.string();
    };
    const auto scan_all = [](const std::string& shard) {
      return message_of<crema::format_error>([&] {
        const crema::shard_file file(shard);
        (void)members_of(file);
      });
    };

    auto bad_checksum = bytes;
    bad_checksum[1536 + 3] ^= 0x5a;  // a byte of the second header's name
    const std::string damaged = write("checksum.tar", bad_checksum);
    CHECK(scan_all(damaged) ==
          fmt::format("tar shard {}: holds no tar header (its checksum fails) at byte 1536",
                      damaged));

    const std::string cut_in_data = write("cut.tar", {bytes.begin(), bytes.begin() + 1000});
    CHECK(scan_all(cut_in_data) ==
          fmt::format("tar shard {}: has a member of 700 bytes that runs past its end at byte 0",
                      cut_in_data));

    const std::string cut_in_header =
        write("header.tar", {bytes.begin(), bytes.begin() + 1536 + 100});
    CHECK(scan_all(cut_in_header) ==
          fmt::format("tar shard {}: ends inside a header at byte 1536", cut_in_header));

    // Without its end-of-archive blocks an archive ends where its last member does.
    const std::string no_end = write("no-end.tar", {bytes.begin(), bytes.begin() + 2560});
    const crema::shard_file file(no_end);
    CHECK(members_of(file).size() == 2);

    CHECK(message_of<crema::io_error>([&] {
            crema::shard_file missing((scratch.path() / "none.tar").string());
          }).find("none.tar: cannot open") != std::string::npos);
  }

  TEST_CASE("pax records: path and size parsed, other keys passed over, malformed ones refused") {
    const auto parsed =
        crema::detail::parse_pax("24 path=a/very/long.jpg\n13 size=1024\n9 uid=42\n");
    REQUIRE(parsed);
    CHECK(*parsed->path == "a/very/long.jpg");
    CHECK(*parsed->size == 1024);
    CHECK_FALSE(crema::detail::parse_pax("99 path=x\n"));
    CHECK_FALSE(crema::detail::parse_pax("10 pathx\n"));
    CHECK_FALSE(crema::detail::parse_pax("x path=a\n"));
  }

  TEST_CASE("numeric fields: octal with spaces or NULs, and GNU's base-256 for large sizes") {
    const auto field = [](std::initializer_list<unsigned> values) {
      std::vector<std::byte> bytes;
      for (const unsigned v : values) bytes.push_back(static_cast<std::byte>(v));
      return bytes;
    };
    CHECK(crema::detail::tar_number(bytes_of("00000001750")) == 1000);
    CHECK(crema::detail::tar_number(bytes_of("   1750 ")) == 1000);
    CHECK(crema::detail::tar_number(field({0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0})) ==
          std::uint64_t{0x020000});
    CHECK_FALSE(crema::detail::tar_number(bytes_of("00000001790")));
  }
}

TEST_SUITE("webdataset") {
  TEST_CASE(
      "a member's key is its path up to the file name's first dot, the rest, lowercased, is "
      "its extension") {
    using crema::webdataset_split;
    CHECK(webdataset_split("n0144/ILSVRC2012_val_00000293.JPEG") ==
          std::pair<std::string_view, std::string>("n0144/ILSVRC2012_val_00000293", "jpeg"));
    CHECK(webdataset_split("a.b/c.seg.PNG") ==
          std::pair<std::string_view, std::string>("a.b/c", "seg.png"));
    CHECK(webdataset_split("dir.v2/noext") ==
          std::pair<std::string_view, std::string>("dir.v2/noext", ""));
  }

  TEST_CASE(
      "consecutive members of one key make a sample, __key__ files are passed over, two of "
      "one extension are an error naming the shard and the key") {
    scratch_directory scratch("wds-group");
    const fs::path path = scratch.path() / "s.tar";
    {
      crema::tar_writer tar(path.string());
      tar.add("a/x1.jpg", bytes_of("j1"));
      tar.add("a/x1.cls", bytes_of("3"));
      tar.add("a/x1.__key__", bytes_of("a/x1"));  // an extension like any other
      tar.add("a/__meta__.json", bytes_of("{}"));
      tar.add("a/x2.png", bytes_of("p2"));
      tar.add("a/x2.txt", bytes_of("a caption"));
      tar.add("a/x1.json", bytes_of("{}"));  // x1 again, not next to its others: a new sample
    }
    const crema::shard_file file(path.string());
    const auto samples = crema::index_webdataset(file);
    REQUIRE(samples.size() == 3);
    CHECK(samples[0].key == "a/x1");
    REQUIRE(samples[0].members.size() == 3);
    CHECK(samples[0].members[2].extension == "__key__");
    CHECK(samples[1].key == "a/x2");
    CHECK(samples[2].key == "a/x1");

    const fs::path twice = scratch.path() / "twice.tar";
    {
      crema::tar_writer tar(twice.string());
      tar.add("k.jpg", bytes_of("1"));
      tar.add("k.JPG", bytes_of("2"));
    }
    const crema::shard_file bad(twice.string());
    CHECK(message_of<crema::format_error>([&] { (void)crema::index_webdataset(bad); }) ==
          fmt::format("webdataset shard {}: sample k has two members of extension 'jpg' (the "
                      "second at byte 1536)",
                      twice.string()));
  }

  TEST_CASE(
      "a sample hands its image, class, text and any member, what it lacks is an error "
      "naming it and what it has") {
    scratch_directory scratch("wds-sample");
    const fs::path path = scratch.path() / "s.tar";
    {
      crema::tar_writer tar(path.string());
      tar.add("k1.webp", bytes_of("W"));
      tar.add("k1.cls", bytes_of(" 42\n"));
      tar.add("k1.txt", bytes_of("a dog"));
      tar.add("k2.json", bytes_of("{}"));
      tar.add("k2.cls", bytes_of("cat"));
    }
    crema::webdataset_source source({path.string()});
    const crema::webdataset_record* record = source.next();
    REQUIRE(record != nullptr);
    CHECK(record->key() == "k1");
    CHECK(record->shard() == path.string());
    crema::webdataset_sample first;
    record->read(first);
    CHECK(first.key() == "k1");
    CHECK(first.shard() == path.string());
    CHECK(first.image().size() == 1);
    CHECK(first.cls() == 42);
    CHECK(first.text() == "a dog");
    CHECK(first.extensions() == std::vector<std::string_view>{"webp", "cls", "txt"});
    const crema::encoded_sample encoded = first.encoded();
    CHECK(encoded.label == 42);
    CHECK(encoded.key == path.string() + ":k1");
    CHECK_FALSE(first.member("json"));
    // Read where it lies, as the image batchers read it: the image, the class and the name.
    std::vector<std::byte> buffer;
    const crema::encoded_sample read = record->read_encoded(buffer);
    CHECK(read.bytes.size() == 1);
    CHECK(std::to_integer<char>(read.bytes[0]) == 'W');
    CHECK(read.label == 42);
    CHECK(read.key == path.string() + ":k1");

    const crema::webdataset_record* other = source.next();
    REQUIRE(other != nullptr);
    crema::webdataset_sample second;
    other->read(second);
    const std::string no_image =
        fmt::format("webdataset sample {}:k2: no 'jpg' member (it has: json, cls)", path.string());
    CHECK(message_of<crema::format_error>([&] { (void)second.image(); }) == no_image);
    CHECK(message_of<crema::format_error>([&] { (void)other->read_encoded(buffer); }) == no_image);
    CHECK(
        message_of<crema::format_error>([&] { (void)second.cls(); }) ==
        fmt::format("webdataset sample {}:k2: its cls 'cat' is not a class number", path.string()));
    CHECK(source.next() == nullptr);
  }
}

TEST_SUITE("shard lists") {
  TEST_CASE("brace patterns expand as WebDataset's do: padded ranges, lists, several groups") {
    using crema::expand_braces;
    CHECK(expand_braces("train-{000000..000002}.tar") ==
          std::vector<std::string>{"train-000000.tar", "train-000001.tar", "train-000002.tar"});
    CHECK(expand_braces("s{8..11}") == std::vector<std::string>{"s8", "s9", "s10", "s11"});
    CHECK(expand_braces("s{3..1}") == std::vector<std::string>{"s3", "s2", "s1"});
    CHECK(expand_braces("{a,b}-{0..1}.tar") ==
          std::vector<std::string>{"a-0.tar", "a-1.tar", "b-0.tar", "b-1.tar"});
    CHECK(expand_braces("plain.tar") == std::vector<std::string>{"plain.tar"});
    CHECK(expand_braces("x{0..1023}").size() == 1024);
  }

  TEST_CASE("a malformed pattern is an error naming it and the fault") {
    const auto message = [](std::string_view pattern) {
      return message_of<crema::config_error>([&] { (void)crema::expand_braces(pattern); });
    };
    CHECK(message("a{0..3") == "shard pattern a{0..3: the '{' at character 1 is not closed");
    CHECK(message("a{0{1}}") ==
          "shard pattern a{0{1}}: the '{' at character 1 is not closed before another opens");
    CHECK(message("a}") == "shard pattern a}: a '}' at character 1 closes nothing");
    CHECK(message("a{x..3}") == "shard pattern a{x..3}: {x..3} is not a range of two numbers");
    CHECK(message("a{solo}") ==
          "shard pattern a{solo}: {solo} is neither a range (a..b) nor a list (a,b)");
    CHECK(message("{0..99999}{0..99999}").find("more than 16777216") != std::string::npos);
  }

  TEST_CASE("globs match files, sorted, a list file's relative paths are its folder's") {
    scratch_directory scratch("shard-lists");
    for (const char* name : {"b-1.tar", "a-2.tar", "a-1.tar", "c.txt"}) {
      std::ofstream(scratch.path() / name) << "x";
    }
    const std::string dir = scratch.path().string();
    CHECK(crema::shard_paths(dir + "/a-*.tar") ==
          std::vector<std::string>{dir + "/a-1.tar", dir + "/a-2.tar"});
    CHECK(crema::shard_paths(dir + "/{a,b}-1.tar") ==
          std::vector<std::string>{dir + "/a-1.tar", dir + "/b-1.tar"});
    CHECK(message_of<crema::config_error>([&] {
            (void)crema::shard_paths(dir + "/z*.tar");
          }).find("z*.tar matches no file") != std::string::npos);

    std::ofstream(scratch.path() / "list.txt")
        << "# the training shards\n  a-1.tar \n\n/abs/x.tar\nhttps://host/y.tar\n";
    CHECK(crema::read_shard_list(scratch.path() / "list.txt") ==
          std::vector<std::string>{(scratch.path() / "a-1.tar").string(), "/abs/x.tar",
                                   "https://host/y.tar"});
    std::ofstream(scratch.path() / "empty.txt") << "# nothing\n";
    CHECK(message_of<crema::config_error>(
              [&] { (void)crema::read_shard_list(scratch.path() / "empty.txt"); }) ==
          fmt::format("shard list {}: names no shard", (scratch.path() / "empty.txt").string()));
  }
}

TEST_SUITE("webdataset_source") {
  TEST_CASE("every sample of every shard once, in order, with its members' bytes") {
    scratch_directory scratch("wds-source");
    write_shard(scratch.path() / "s0.tar", "p", 0, 7);
    write_shard(scratch.path() / "s1.tar", "q", 7, 5);
    crema::webdataset_source source(crema::shard_paths(scratch.path().string() + "/s{0..1}.tar"));
    CHECK(source.records() == 12);
    CHECK(source.size() == 12);
    std::vector<std::string> keys;
    crema::webdataset_sample sample;
    while (const crema::webdataset_record* record = source.next()) {
      keys.emplace_back(record->key());
      record->read(sample);
      CHECK(sample.text("jpg") == "image of " + std::string(sample.key()));
      CHECK(sample.cls() == static_cast<std::int32_t>(keys.size() - 1) % 10);
    }
    REQUIRE(keys.size() == 12);
    CHECK(keys.front() == "p/00000");
    CHECK(keys[7] == "q/00007");
    source.rewind();
    const crema::webdataset_record* first = source.next();
    REQUIRE(first != nullptr);
    CHECK(source.record_key(*first) == (scratch.path() / "s0.tar").string() + ":p/00000");
  }

  TEST_CASE(
      "shuffled: every sample once a pass, another order each pass, the same for the same "
      "seed") {
    scratch_directory scratch("wds-shuffle");
    write_shard(scratch.path() / "s0.tar", "p", 0, 9);
    write_shard(scratch.path() / "s1.tar", "q", 9, 8);
    const std::vector<std::string> shards{(scratch.path() / "s0.tar").string(),
                                          (scratch.path() / "s1.tar").string()};
    crema::webdataset_source source(shards);
    source.shuffle(5);
    const auto first = keys_of_pass(source);
    source.rewind();
    const auto second = keys_of_pass(source);
    CHECK(std::set(first.begin(), first.end()).size() == 17);
    CHECK(std::set(second.begin(), second.end()) == std::set(first.begin(), first.end()));
    CHECK(first != second);
    crema::webdataset_source again(shards);
    again.shuffle(5);
    CHECK(keys_of_pass(again) == first);
  }

  TEST_CASE(
      "ranks read disjoint parts that together hold every sample, balanced, every rank as "
      "many, a rank with no sample is an error at start") {
    scratch_directory scratch("wds-ranks");
    write_shard(scratch.path() / "s0.tar", "p", 0, 6);
    write_shard(scratch.path() / "s1.tar", "q", 6, 5);
    const std::vector<std::string> shards{(scratch.path() / "s0.tar").string(),
                                          (scratch.path() / "s1.tar").string()};
    for (const auto balance :
         {crema::shard_balance::none, crema::shard_balance::pad, crema::shard_balance::drop}) {
      std::multiset<std::string> all;
      std::set<std::size_t> sizes;
      for (std::size_t rank = 0; rank < 3; ++rank) {
        crema::webdataset_source source(shards);
        source.shuffle(3);
        source.balance(balance);
        source.shard(rank, 3);
        const auto keys = keys_of_pass(source);
        CHECK(keys.size() == source.size());
        sizes.insert(keys.size());
        all.insert(keys.begin(), keys.end());
      }
      if (balance == crema::shard_balance::none) {
        CHECK(all.size() == 11);
        CHECK(std::set(all.begin(), all.end()).size() == 11);
      } else {
        CHECK(sizes.size() == 1);  // equal batches on every rank
        CHECK(all.size() == (balance == crema::shard_balance::pad ? 12 : 9));
      }
    }
    crema::webdataset_source source(shards);
    CHECK(message_of<crema::config_error>([&] { source.shard(11, 12); }) ==
          "webdataset_source: rank 11 of 12 gets no sample: the 2 shards hold 11 samples");
  }

  TEST_CASE("a position saved mid-pass resumes the same samples, shuffled, in a later epoch") {
    scratch_directory scratch("wds-resume");
    write_shard(scratch.path() / "s0.tar", "p", 0, 10);
    const std::vector<std::string> shards{(scratch.path() / "s0.tar").string()};
    crema::webdataset_source source(shards);
    source.shuffle(9);
    source.set_epoch(2);
    for (int i = 0; i < 4; ++i) (void)source.next();
    const auto epoch = source.epoch();
    const auto position = source.position();
    const auto rest = keys_of_pass(source);
    crema::webdataset_source resumed(shards);
    resumed.shuffle(9);
    resumed.set_epoch(epoch);
    resumed.seek(position);
    CHECK(keys_of_pass(resumed) == rest);
    CHECK(message_of<crema::config_error>([&] { resumed.seek(11); }) ==
          fmt::format("webdataset_source: position 11 is past the end of webdataset:{}+0 (shard 0 "
                      "of 1 holds 10 records)",
                      shards[0]));
  }

  TEST_CASE(
      "a pass stopped by 4 ranks resumes on 3 with the global batch kept: the samples not "
      "yet read, each once") {
    scratch_directory scratch("wds-new-world");
    write_shard(scratch.path() / "s0.tar", "p", 0, 30);
    write_shard(scratch.path() / "s1.tar", "q", 30, 20);
    const std::vector<std::string> shards{(scratch.path() / "s0.tar").string(),
                                          (scratch.path() / "s1.tar").string()};
    // The old job: 4 ranks of batch 3 read 2 global batches (24 samples) of epoch 1.
    std::multiset<std::string> seen;
    for (std::size_t rank = 0; rank < 4; ++rank) {
      crema::webdataset_source source(shards);
      source.shuffle(21);
      source.set_epoch(1);
      source.shard(rank, 4);
      for (int i = 0; i < 2 * 3; ++i) seen.insert(std::string(source.next()->key()));
    }
    // The new job: 3 ranks of batch 4 (the same global batch of 12) read the rest of the pass.
    for (std::size_t rank = 0; rank < 3; ++rank) {
      crema::webdataset_source source(shards);
      source.shuffle(21);
      source.set_epoch(1);
      source.shard(rank, 3);
      source.seek(crema::resume_position(24, 3));
      for (const auto& key : keys_of_pass(source)) seen.insert(key);
    }
    CHECK(seen.size() == 50);
    CHECK(std::set(seen.begin(), seen.end()).size() == 50);
    CHECK(message_of<crema::config_error>([] {
            (void)crema::resume_position(24, 5);
          }).starts_with("resume_position: 24 records read is not a whole number"));
  }

  TEST_CASE(
      "shuffled shard by shard: every sample once, each block of shards read whole before the "
      "next, the shards' order and the samples' changing each pass, the same for the same seed") {
    scratch_directory scratch("wds-blocks");
    std::vector<std::string> shards;
    std::map<std::string, std::size_t> shard_of;  // key -> shard
    const std::vector<std::size_t> sizes = {7, 3, 9, 5, 6, 8, 4};
    std::size_t first = 0;
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      shards.push_back((scratch.path() / fmt::format("s{}.tar", s)).string());
      write_shard(shards.back(), fmt::format("s{}", s), first, sizes[s]);
      for (std::size_t i = first; i < first + sizes[s]; ++i) {
        shard_of[fmt::format("s{}/{:05}", s, i)] = s;
      }
      first += sizes[s];
    }
    crema::webdataset_source source(shards);
    source.shuffle_shards(13, 2);
    std::vector<std::vector<std::string>> passes;
    for (int pass = 0; pass < 3; ++pass) {
      passes.push_back(keys_of_pass(source));
      const auto& keys = passes.back();
      CHECK(keys.size() == first);
      CHECK(std::set(keys.begin(), keys.end()).size() == first);
      // Blocks of two shards (the last of one): a shard's samples never come after a later
      // block's, and within a block the two shards' samples mix.
      std::vector<std::size_t> blocks;  // the shards in the order their blocks ended
      std::set<std::size_t> open;
      std::size_t read = 0;
      for (const std::string& key : keys) {
        open.insert(shard_of.at(key));
        ++read;
        std::size_t whole = 0;
        for (const std::size_t s : open) whole += sizes[s];
        if (read == whole) {  // the shards begun so far are read whole: a block ends here
          CHECK(open.size() - blocks.size() <= 2);
          for (const std::size_t s : open) {
            if (std::find(blocks.begin(), blocks.end(), s) == blocks.end()) blocks.push_back(s);
          }
        }
      }
      CHECK(blocks.size() == sizes.size());
      source.rewind();
    }
    CHECK(passes[0] != passes[1]);
    CHECK(passes[1] != passes[2]);
    crema::webdataset_source again(shards);
    again.shuffle_shards(13, 2);
    CHECK(keys_of_pass(again) == passes[0]);

    INFO("ranks: disjoint, together every sample; a position resumes the same samples");
    std::multiset<std::string> seen;
    for (std::size_t rank = 0; rank < 3; ++rank) {
      crema::webdataset_source part(shards);
      part.shuffle_shards(13, 2);
      part.shard(rank, 3);
      part.set_epoch(1);
      for (int i = 0; i < 2; ++i) seen.insert(std::string(part.next()->key()));
      const auto position = part.position();
      const auto rest = keys_of_pass(part);
      seen.insert(rest.begin(), rest.end());
      crema::webdataset_source resumed(shards);
      resumed.shuffle_shards(13, 2);
      resumed.shard(rank, 3);
      resumed.set_epoch(1);
      resumed.seek(position);
      CHECK(keys_of_pass(resumed) == rest);
    }
    CHECK(seen.size() == first);
    CHECK(std::set(seen.begin(), seen.end()).size() == first);

    INFO("shuffle(seed) goes back to any sample after any other; a block of no shard is refused");
    source.shuffle(13);
    source.set_epoch(0);
    CHECK(keys_of_pass(source) != passes[0]);
    CHECK(message_of<crema::config_error>([&] { source.shuffle_shards(1, 0); }) ==
          "webdataset_source: shuffle_shards needs at least one shard a block");
  }

  TEST_CASE("no shard, an empty shard, a shard that is not a tar: errors at start naming it") {
    scratch_directory scratch("wds-errors");
    CHECK(message_of<crema::config_error>([] {
            crema::webdataset_source none(std::vector<std::string>{});
          }) == "webdataset_source: no shard given");
    const fs::path empty = scratch.path() / "empty.tar";
    { crema::tar_writer tar(empty.string()); }
    CHECK(message_of<crema::config_error>([&] { crema::webdataset_source s({empty.string()}); }) ==
          fmt::format("webdataset_source: shard {} holds no sample", empty.string()));
    const fs::path text = scratch.path() / "text.tar";
    std::ofstream(text) << std::string(1024, 'T');
    CHECK(message_of<crema::format_error>([&] { crema::webdataset_source s({text.string()}); }) ==
          fmt::format("tar shard {}: holds no tar header (its checksum fails) at byte 0",
                      text.string()));
  }
}
