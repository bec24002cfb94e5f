// The image data sets: image_file_reader, image_folder_source (torchvision's ImageFolder order and
// labels) and image_list_source (Caffe's ImageData list), with every error naming the file, and
// for list files the line; and both through the shard cursor and a pipeline.

#include <crema/io/image/image_file.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/image/image_list_source.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/error_message.hpp"
#include "common/resume_check.hpp"
#include "common/scratch_directory.hpp"
#include "common/text_bytes.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using crema::test::message_of;
using crema::test::scratch_directory;
using crema::test::text_of;

void write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

// (relative path, label) of one pass, in order.
template <class Source>
std::vector<std::pair<std::string, std::int32_t>> one_pass(Source& source) {
  std::vector<std::pair<std::string, std::int32_t>> seen;
  while (const crema::image_file* file = source.next()) {
    seen.emplace_back(std::string(file->relative), file->label);
  }
  return seen;
}

// A record's digest for the resume checks: its file and label.
std::uint64_t file_digest(const crema::image_file& file) {
  return std::hash<std::string>{}(file.path()) * 31 + static_cast<std::uint64_t>(file.label);
}

}  // namespace

TEST_SUITE("image_file_reader") {
  TEST_CASE("a file is read whole, and the buffer is reused once it has grown") {
    scratch_directory scratch("reader");
    write_file(scratch.path() / "big.jpg", std::string(5000, 'x'));
    write_file(scratch.path() / "small.jpg", "abc");
    crema::image_file_reader reader;
    const std::string root = scratch.path().string();
    const auto big = reader.read(crema::image_file{root, "big.jpg", 0, {}, 0});
    CHECK(big.size() == 5000);
    const std::byte* buffer = big.data();
    const auto small = reader.read(crema::image_file{root, "small.jpg", 0, {}, 0});
    CHECK(text_of(small) == "abc");
    CHECK(small.data() == buffer);  // no new buffer for a smaller file
    CHECK(reader.read(crema::image_file{root, "big.jpg", 0, {}, 0}).data() == buffer);
  }

  TEST_CASE(
      "a missing, empty, oversized file or a folder is an io_error naming it, and for a "
      "listed file its line") {
    scratch_directory scratch("reader-errors");
    const std::string root = scratch.path().string();
    write_file(scratch.path() / "empty.jpg", "");
    write_file(scratch.path() / "large.jpg", std::string(100, 'x'));
    fs::create_directories(scratch.path() / "folder.jpg");
    crema::image_file_reader reader({.max_bytes = 64});
    CHECK(message_of<crema::io_error>([&] {
            reader.read(crema::image_file{root, "gone.jpg", 0, "train.txt", 7});
          }) == fmt::format("image file {}/gone.jpg (line 7 of train.txt): does not exist", root));
    CHECK(message_of<crema::io_error>([&] {
            reader.read(crema::image_file{root, "empty.jpg", 0, {}, 0});
          }) == fmt::format("image file {}/empty.jpg: is empty", root));
    CHECK(message_of<crema::io_error>([&] {
            reader.read(crema::image_file{root, "large.jpg", 0, {}, 0});
          }) == fmt::format("image file {}/large.jpg: 100 bytes is over the limit of 64", root));
    CHECK(message_of<crema::io_error>([&] {
            reader.read(crema::image_file{root, "folder.jpg", 0, {}, 0});
          }) == fmt::format("image file {}/folder.jpg: is not a regular file", root));
    try {
      (void)reader.read(crema::image_file{root, "gone.jpg", 0, {}, 0});
      FAIL("no error");
    } catch (const crema::io_error& error) {
      CHECK(error.code() == ENOENT);
    }
  }

  TEST_CASE("a file that cannot be opened is an io_error with the system's reason") {
    scratch_directory scratch("reader-unreadable");
    fs::create_symlink("loop.jpg", scratch.path() / "loop.jpg");  // unreadable, even for root
    crema::image_file_reader reader;
    CHECK(message_of<crema::io_error>([&] {
            (void)reader.read((scratch.path() / "loop.jpg").string());
          }) == fmt::format("file {}/loop.jpg: cannot be opened: {}", scratch.path().string(),
                            std::strerror(ELOOP)));
  }
}

TEST_SUITE("image_folder_source") {
  // A tree with what trips an ImageFolder port: sub-folders inside a class, folder names that
  // sort differently as paths than as names ("a-b" before "a/b"), extensions in upper case,
  // files that are not images, and a class whose name sorts before another's prefix.
  fs::path make_tree(const fs::path& root) {
    for (const char* file :
         {"dog/b.jpg", "dog/a.JPEG", "dog/notes.txt", "dog/a/z.png", "dog/a-b/y.jpg",
          "dog/a/b/x.jpg", "cat/2.jpg", "cat/10.jpg", "ca/only.png", "zebra/deep/er/q.jpeg"}) {
      write_file(root / file, file);
    }
    write_file(root / "README", "not a class");
    return root;
  }

  TEST_CASE(
      "classes are the sorted folder names and files come in torchvision's order: by "
      "folder path, then name, sub-folders included, other extensions left out") {
    scratch_directory scratch("folder-order");
    crema::image_folder_source source(make_tree(scratch.path()));
    CHECK(source.classes() == std::vector<std::string>{"ca", "cat", "dog", "zebra"});
    CHECK(source.files() == 9);
    const std::vector<std::pair<std::string, std::int32_t>> expected = {
        {"ca/only.png", 0},   {"cat/10.jpg", 1},    {"cat/2.jpg", 1},
        {"dog/a.JPEG", 2},    {"dog/b.jpg", 2},     {"dog/a/z.png", 2},
        {"dog/a-b/y.jpg", 2}, {"dog/a/b/x.jpg", 2}, {"zebra/deep/er/q.jpeg", 3}};
    // (Python's sorted(os.walk(...)) of this tree, as ImageFolder walks it, gives this order:
    // "dog/a" sorts before "dog/a-b", which sorts before "dog/a/b".)
    CHECK(one_pass(source) == expected);
  }

  TEST_CASE(
      "extensions choose the files, compared without case, and a class left with none "
      "is refused, as ImageFolder refuses it") {
    scratch_directory scratch("folder-extensions");
    make_tree(scratch.path());
    crema::image_folder_source source(scratch.path(),
                                      {.extensions = {".TXT", ".jpg", ".jpeg", ".png"}});
    CHECK(source.files() == 10);
    CHECK(source.file(5).relative == "dog/notes.txt");
    CHECK(message_of<crema::config_error>([&] {
            crema::image_folder_source(scratch.path(), {.extensions = {".png"}});
          }) == fmt::format("image_folder_source: class folder {}/cat holds no image file",
                            scratch.path().string()));
  }

  TEST_CASE(
      "a record names its file, and reading it gives the file's bytes, even after the "
      "source has moved") {
    scratch_directory scratch("folder-read");
    crema::image_folder_source first(make_tree(scratch.path()));
    const crema::image_file* record = first.next();
    REQUIRE(record != nullptr);
    CHECK(first.record_key(*record) == "ca/only.png");
    crema::image_folder_source moved(std::move(first));
    const crema::image_file* next = moved.next();
    REQUIRE(next != nullptr);
    crema::image_file_reader reader;
    CHECK(text_of(reader.read(*next)) == "cat/10.jpg");
    CHECK(next->path() == (scratch.path() / "cat/10.jpg").string());
    CHECK(moved.key() == "image_folder:" + scratch.path().string());
  }

  TEST_CASE(
      "a folder that is missing, a file, without classes or with an empty class is a "
      "config_error naming it") {
    scratch_directory scratch("folder-errors");
    const fs::path root = scratch.path();
    CHECK(message_of<crema::config_error>([&] { crema::image_folder_source(root / "none"); }) ==
          fmt::format("image_folder_source: {}/none does not exist", root.string()));
    write_file(root / "file", "x");
    CHECK(message_of<crema::config_error>([&] { crema::image_folder_source(root / "file"); }) ==
          fmt::format("image_folder_source: {}/file is not a folder", root.string()));
    fs::create_directories(root / "flat");
    write_file(root / "flat/loose.jpg", "x");
    CHECK(message_of<crema::config_error>([&] { crema::image_folder_source(root / "flat"); }) ==
          fmt::format("image_folder_source: {}/flat holds no class folder (expected "
                      "ROOT/CLASS/FILE)",
                      root.string()));
    write_file(root / "data/full/a.jpg", "x");
    write_file(root / "data/empty/notes.txt", "x");
    CHECK(message_of<crema::config_error>([&] { crema::image_folder_source(root / "data"); }) ==
          fmt::format("image_folder_source: class folder {}/data/empty holds no image file",
                      root.string()));
  }

  TEST_CASE("shards, shuffles and epochs follow the shard cursor, and seek resumes") {
    scratch_directory scratch("folder-cursor");
    crema::image_folder_source whole(make_tree(scratch.path()));
    const auto in_order = one_pass(whole);
    for (const bool shuffled : {false, true}) {
      for (std::size_t world : {1, 2, 4}) {
        for (std::size_t rank = 0; rank < world; ++rank) {
          CAPTURE(shuffled);
          CAPTURE(rank);
          CAPTURE(world);
          crema::shard_cursor expected(in_order.size());
          if (shuffled) expected.shuffle(5);
          expected.shard(rank, world);
          expected.set_epoch(3);
          std::vector<std::pair<std::string, std::int32_t>> want;
          while (!expected.exhausted()) {
            want.push_back(in_order[expected.next_index()]);
            expected.advance();
          }
          crema::image_folder_source source(scratch.path());
          if (shuffled) source.shuffle(5);
          source.shard(rank, world);
          source.set_epoch(3);
          CHECK(one_pass(source) == want);
          if (want.size() >= 2) {
            source.set_epoch(3);
            source.seek(1);
            CHECK(one_pass(source) == std::vector(want.begin() + 1, want.end()));
          }
        }
      }
    }
  }

  TEST_CASE("a folder pipeline stopped anywhere resumes exactly, sharded and shuffled") {
    crema::test::watchdog guard(60s, "image folder resume");
    scratch_directory scratch("folder-resume");
    make_tree(scratch.path());
    const auto make = [&] {
      crema::image_folder_source source(scratch.path());
      source.shard(1, 2);
      source.shuffle(4);
      return source;
    };
    crema::test::check_resumes_exactly(
        make, file_digest,
        {.batch_size = 2, .prefetch = 2, .producers = 2, .threads = 2, .consumers = 2, .seed = 8},
        12, {0, 1, 2, 5, 6, 9, 11});
  }
}

TEST_SUITE("image_list_source") {
  TEST_CASE(
      "a list gives its files in order with their labels and lines: paths with spaces, "
      "CRLF endings, blank lines, negative labels") {
    scratch_directory scratch("list-parse");
    write_file(scratch.path() / "list.txt",
               "a/one.jpg 3\r\n\n  b/two words.jpg\t-1\nc/three.png 2147483647\n   \n"
               "./d/../d/four.jpg 0");
    crema::image_list_source source(scratch.path() / "list.txt", scratch.path() / "images");
    CHECK(source.files() == 4);
    CHECK(one_pass(source) ==
          std::vector<std::pair<std::string, std::int32_t>>{{"a/one.jpg", 3},
                                                            {"b/two words.jpg", -1},
                                                            {"c/three.png", 2147483647},
                                                            {"d/four.jpg", 0}});
    CHECK(source.file(1).line == 3);
    CHECK(source.file(3).line == 6);
    CHECK(source.file(2).path() == (scratch.path() / "images/c/three.png").string());
    CHECK(source.list() == (scratch.path() / "list.txt").string());
  }

  TEST_CASE("a bad line is a format_error naming the list and the line") {
    scratch_directory scratch("list-errors");
    const fs::path list = scratch.path() / "list.txt";
    const auto error_for = [&](const std::string& content) {
      write_file(list, content);
      return message_of<crema::error>(
          [&] { crema::image_list_source(list, scratch.path() / "root"); });
    };
    const std::string name = list.string();
    CHECK(
        error_for("ok.jpg 1\nlonely.jpg\n") ==
        fmt::format("image_list_source: {} line 2: expected 'path label', got 'lonely.jpg'", name));
    CHECK(error_for("a.jpg cat\n") ==
          fmt::format("image_list_source: {} line 1: label 'cat' is not an integer", name));
    CHECK(error_for("a.jpg 1.5\n") ==
          fmt::format("image_list_source: {} line 1: label '1.5' is not an integer", name));
    CHECK(error_for("a.jpg 2147483648\n") ==
          fmt::format("image_list_source: {} line 1: label 2147483648 is out of the range of int",
                      name));
    CHECK(error_for("a.jpg 99999999999999999999999\n") ==
          fmt::format("image_list_source: {} line 1: label 99999999999999999999999 is out of the "
                      "range of int",
                      name));
    CHECK(error_for("\n\n../outside.jpg 1\n") ==
          fmt::format("image_list_source: {} line 3: path ../outside.jpg leaves the root {}", name,
                      (scratch.path() / "root").string()));
    CHECK(error_for("a/../../b.jpg 1\n").find("line 1: path a/../../b.jpg leaves the root") !=
          std::string::npos);
    CHECK(error_for("/etc/passwd 1\n").find("line 1: path /etc/passwd leaves the root") !=
          std::string::npos);
    CHECK(error_for("a/.. 1\n") ==
          fmt::format("image_list_source: {} line 1: path 'a/..' names no file", name));
    CHECK(error_for("\n  \n") == fmt::format("image_list_source: list {} names no file", name));
    CHECK(message_of<crema::io_error>(
              [&] { crema::image_list_source(scratch.path() / "none.txt", scratch.path()); }) ==
          fmt::format("image list {}: does not exist", (scratch.path() / "none.txt").string()));
  }

  TEST_CASE("a listed file that is missing is an error at read time naming it and its line") {
    scratch_directory scratch("list-missing");
    write_file(scratch.path() / "images/there.jpg", "here");
    write_file(scratch.path() / "list.txt", "there.jpg 0\nmissing.jpg 1\n");
    crema::image_list_source source(scratch.path() / "list.txt", scratch.path() / "images");
    crema::image_file_reader reader;
    CHECK(text_of(reader.read(*source.next())) == "here");
    CHECK(message_of<crema::io_error>([&] { (void)reader.read(*source.next()); }) ==
          fmt::format("image file {}/missing.jpg (line 2 of {}): does not exist",
                      (scratch.path() / "images").string(),
                      (scratch.path() / "list.txt").string()));
  }

  TEST_CASE("a pipeline over a list reads every file once per pass on several producers") {
    crema::test::watchdog guard(30s, "image list pipeline");
    scratch_directory scratch("list-pipeline");
    std::string list;
    for (int i = 0; i < 60; ++i) {
      write_file(scratch.path() / fmt::format("images/{}.jpg", i), fmt::format("file {}", i));
      list += fmt::format("{}.jpg {}\n", i, i);
    }
    write_file(scratch.path() / "list.txt", list);
    crema::image_list_source source(scratch.path() / "list.txt", scratch.path() / "images");
    source.shuffle(9);
    struct read_file {
      crema::image_file_reader reader;
      std::pair<std::string, std::int32_t> operator()(const crema::image_file& file) {
        return {text_of(reader.read(file)), file.label};
      }
    };
    crema::double_buffered_pipeline pipe{
        std::move(source),
        read_file{},
        {.batch_size = 7, .producers = 3, .threads = 2, .mode = crema::pipeline_mode::single_pass}};
    std::map<int, int> seen;
    for (auto batch : pipe.consumer(0)) {
      for (const auto& [content, label] : batch->items()) {
        CHECK(content == fmt::format("file {}", label));
        ++seen[label];
      }
    }
    CHECK(seen.size() == 60);
    CHECK(
        std::all_of(seen.begin(), seen.end(), [](const auto& entry) { return entry.second == 1; }));
  }

  TEST_CASE("a list pipeline stopped anywhere resumes exactly, across passes") {
    crema::test::watchdog guard(60s, "image list resume");
    scratch_directory scratch("list-resume");
    std::string list;
    for (int i = 0; i < 13; ++i) {
      write_file(scratch.path() / fmt::format("images/{}.jpg", i), "x");
      list += fmt::format("{}.jpg {}\n", i, i % 3);
    }
    write_file(scratch.path() / "list.txt", list);
    const auto make = [&] {
      crema::image_list_source source(scratch.path() / "list.txt", scratch.path() / "images");
      source.shuffle(2);
      return source;
    };
    crema::test::check_resumes_exactly(
        make, file_digest,
        {.batch_size = 3, .prefetch = 3, .producers = 3, .threads = 2, .seed = 6}, 16,
        {0, 1, 4, 5, 9, 13, 15});
  }
}
