// crema-lmdb and crema-feed, run as a user runs them: images on disk become an LMDB whose records
// are those images; mean, stat and dump say what it holds; crema-feed reads it through the data
// layer with a checksum that does not depend on the producer and thread counts; bad input fails
// with a message naming the path or key. crema-shards writes the same images as WebDataset shards
// that it states and verifies, and that crema-feed --shards reads.

#include <crema/io/caffe/blob_proto.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#include <crema/io/shards/shard_list.hpp>
#include <crema/io/shards/webdataset_source.hpp>

#include "common/scratch_directory.hpp"
#if defined(CREMA_TOOLS_HTTP)
#include "common/loopback_http_server.hpp"
#endif

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct outcome {
  int status = -1;
  std::string output;  // stdout and stderr
};

outcome run(const std::string& command) {
  outcome result;
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (const std::size_t got = std::fread(buffer, 1, sizeof buffer, pipe)) {
    result.output.append(buffer, got);
  }
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The value of `"name": ` in a one-line JSON object: an object or array whole, a string without
// its quotes, a number as written.
std::string json_field(const std::string& json, const std::string& name) {
  const auto at = json.find("\"" + name + "\": ");
  REQUIRE_MESSAGE(at != std::string::npos, json);
  const std::size_t start = at + name.size() + 4;
  const char open = json[start];
  if (open == '"') return json.substr(start + 1, json.find('"', start + 1) - start - 1);
  if (open == '{' || open == '[') {
    int depth = 0;
    for (std::size_t end = start; end < json.size(); ++end) {
      depth += json[end] == open ? 1 : 0;
      depth -= json[end] == (open == '{' ? '}' : ']') ? 1 : 0;
      if (depth == 0) return json.substr(start, end - start + 1);
    }
  }
  return json.substr(start, json.find_first_of(",}", start) - start);
}

using crema::test::scratch_directory;

std::vector<std::uint8_t> pixels_of(std::size_t i, std::size_t height, std::size_t width) {
  std::vector<std::uint8_t> pixels(3 * height * width);
  for (std::size_t p = 0; p < pixels.size(); ++p) {
    pixels[p] = static_cast<std::uint8_t>((p * 7 + i * 31) % 200 + 20);
  }
  return pixels;
}

void write_file(const fs::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// Six 3 x 6 x 8 images (PNG, and JPEG for every third) and a list labelling image i with i % 3.
std::vector<std::byte> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

fs::path make_images(const fs::path& root) {
  fs::create_directories(root / "images" / "cats");
  std::ofstream list(root / "list.txt");
  for (std::size_t i = 0; i < 6; ++i) {
    const auto pixels = pixels_of(i, 6, 8);
    const auto view = crema::image_view<std::uint8_t>::planar(pixels.data(), 3, 6, 8);
    std::vector<std::byte> bytes;
    const bool jpeg = i % 3 == 2;
    if (jpeg) {
      crema::encode_jpeg(view, 95, bytes);
    } else {
      crema::encode_png(view, bytes);
    }
    const std::string name = fmt::format("cats/cat {}.{}", i, jpeg ? "jpg" : "png");
    write_file(root / "images" / name, bytes);
    list << name << ' ' << i % 3 << '\n';
  }
  return root / "list.txt";
}

const std::string lmdb_tool = CREMA_LMDB_TOOL;
const std::string feed_tool = CREMA_FEED_TOOL;
const std::string shards_tool = CREMA_SHARDS_TOOL;

// (Built with fmt: GCC 12 at -O3 warns -Wrestrict, falsely, on "'" + path.string() + "'".)
std::string quoted(const fs::path& path) { return fmt::format("'{}'", path.string()); }

}  // namespace

TEST_SUITE("tools") {
  TEST_CASE("crema-lmdb convert stores each listed image, raw BGR or encoded, keyed in order") {
    scratch_directory scratch("tool-convert");
    const auto list = make_images(scratch.path());
    const auto raw = scratch.path() / "raw";
    const auto done =
        run(fmt::format("{} convert {} {} {}", lmdb_tool, quoted(scratch.path() / "images"),
                        quoted(list), quoted(raw)));
    REQUIRE_MESSAGE(done.status == 0, done.output);
    CHECK(done.output.find("converted 6 images") != std::string::npos);
    crema::lmdb_source source(raw);
    std::size_t i = 0;
    while (const crema::lmdb_record* record = source.next()) {
      const auto datum = crema::decode_datum(record->value, record->key_text());
      CHECK(record->key_text() ==
            fmt::format("{:08}_cats/cat {}.{}", i, i, i % 3 == 2 ? "jpg" : "png"));
      CHECK(datum.label == static_cast<int>(i % 3));
      CHECK_FALSE(datum.encoded);
      CHECK(datum.channels == 3);
      CHECK(datum.height == 6);
      CHECK(datum.width == 8);
      if (i % 3 != 2) {  // PNG is lossless: the pixels are the image's
        const auto pixels = pixels_of(i, 6, 8);
        CHECK(std::memcmp(datum.data.data(), pixels.data(), pixels.size()) == 0);
      }
      ++i;
    }
    CHECK(i == 6);

    const auto encoded = scratch.path() / "encoded";
    REQUIRE(
        run(fmt::format("{} convert {} {} {} --encoded --resize 4x5 --shuffle --seed 3", lmdb_tool,
                        quoted(scratch.path() / "images"), quoted(list), quoted(encoded)))
            .status == 0);
    const auto stat = run(fmt::format("{} stat {} --json", lmdb_tool, quoted(encoded)));
    REQUIRE_MESSAGE(stat.status == 0, stat.output);
    CHECK(json_field(stat.output, "count") == "6");
    CHECK(json_field(stat.output, "encoded") == "6");
    CHECK(json_field(stat.output, "shapes") == "{\"3x4x5\": 6}");
    CHECK(json_field(stat.output, "labels") == "{\"0\": 2, \"1\": 2, \"2\": 2}");
  }

  TEST_CASE(
      "crema-shards write --lmdb: encoded Datums' images as they are, pixel Datums as PNGs of "
      "the same picture, keyed by the LMDB's keys, with their classes") {
    scratch_directory scratch("tool-shards-lmdb");
    const auto list = make_images(scratch.path());
    const std::string images = quoted(scratch.path() / "images");
    for (const bool encoded : {false, true}) {
      CAPTURE(encoded);
      const auto db = scratch.path() / (encoded ? "encoded" : "raw");
      REQUIRE(run(fmt::format("{} convert {} {} {}{}", lmdb_tool, images, quoted(list), quoted(db),
                              encoded ? " --encoded" : ""))
                  .status == 0);
      const auto out = scratch.path() / (encoded ? "encoded-shards" : "raw-shards");
      const auto written = run(fmt::format("{} write {} {} --lmdb --shard-samples 4", shards_tool,
                                           quoted(db), quoted(out)));
      REQUIRE_MESSAGE(written.status == 0, written.output);
      CHECK(written.output.find("wrote 6 samples in 2 shards") != std::string::npos);
      crema::webdataset_source shards(
          crema::shard_paths((out / "shard-{000000..000001}.tar").string()));
      crema::lmdb_source records(db);
      crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
      crema::image_decoder original({.channels = 3, .order = crema::channel_order::rgb});
      crema::webdataset_sample sample;
      std::size_t i = 0;
      while (const auto* record = shards.next()) {
        record->read(sample);
        const crema::lmdb_record* from = records.next();
        REQUIRE(from != nullptr);
        const auto datum = crema::decode_datum(from->value, from->key_text());
        const std::string name = fmt::format("cats/cat {}.{}", i, i % 3 == 2 ? "jpg" : "png");
        CHECK(record->key() == fmt::format("{:08}_cats/cat {}", i, i));
        CHECK(sample.cls() == datum.label);
        if (encoded) {
          const auto image = sample.image();
          CHECK(std::equal(image.begin(), image.end(), datum.data.begin(), datum.data.end()));
          CHECK(sample.member(i % 3 == 2 ? "jpg" : "png").has_value());
        } else {
          REQUIRE(sample.member("png").has_value());
          const auto from_shard = decoder.decode(sample.image(), record->key());
          const auto bytes = read_file(scratch.path() / "images" / name);
          const auto from_file = original.decode(bytes, name);
          REQUIRE(from_shard.height == from_file.height);
          REQUIRE(from_shard.width == from_file.width);
          bool same = true;
          for (std::size_t c = 0; c < 3; ++c) {
            for (std::size_t h = 0; h < from_file.height; ++h) {
              for (std::size_t w = 0; w < from_file.width; ++w) {
                same = same && from_shard(c, h, w) == from_file(c, h, w);
              }
            }
          }
          CHECK(same);  // the picture, its colours in their places
        }
        ++i;
      }
      CHECK(i == 6);
    }
    const auto both = run(fmt::format("{} write {} {} --lmdb --list {}", shards_tool,
                                      quoted(scratch.path() / "raw"), quoted(scratch.path() / "x"),
                                      quoted(list)));
    CHECK(both.status == 2);
    CHECK(both.output.find("--list or --lmdb: one kind of input") != std::string::npos);
  }

  TEST_CASE(
      "convert writes beside OUT and renames: a failed or interrupted conversion leaves "
      "nothing there, and says so, and an existing OUT is refused") {
    scratch_directory scratch("tool-convert-safely");
    const auto list = make_images(scratch.path());
    const std::string images = quoted(scratch.path() / "images");
    // A file missing half-way: exit 1 naming it, no database, nothing beside.
    const auto broken = scratch.path() / "broken.txt";
    {
      std::ofstream out(broken);
      out << "cats/cat 0.png 0\ncats/cat 1.png 1\ncats/missing.png 2\ncats/cat 3.png 0\n";
    }
    const auto failed_db = scratch.path() / "failed";
    const auto failed = run(
        fmt::format("{} convert {} {} {}", lmdb_tool, images, quoted(broken), quoted(failed_db)));
    CHECK(failed.status == 1);
    CHECK(failed.output.find(fmt::format("convert stopped: nothing written to {}",
                                         failed_db.string())) != std::string::npos);
    CHECK(failed.output.find("missing.png") != std::string::npos);
    CHECK_FALSE(fs::exists(failed_db));
    CHECK_FALSE(fs::exists(scratch.path() / "failed.partial"));

    // A full disk (a tmpfs of 16 KiB, where the system lets the test mount one): the same.
    const auto small_disk = scratch.path() / "small-disk";
    fs::create_directories(small_disk);
    if (std::system(
            fmt::format("mount -t tmpfs -o size=16k tmpfs {} 2>/dev/null", quoted(small_disk))
                .c_str()) == 0) {
      const auto many_small = scratch.path() / "many-small.txt";
      {
        std::ofstream out(many_small);
        for (int i = 0; i < 400; ++i) out << "cats/cat " << i % 2 << ".png " << i % 3 << '\n';
      }
      const auto full = run(fmt::format("{} convert {} {} {}", lmdb_tool, images,
                                        quoted(many_small), quoted(small_disk / "db")));
      CHECK(full.status == 1);
      CHECK(full.output.find("nothing written to") != std::string::npos);
      CHECK(fs::is_empty(small_disk));
      CHECK(std::system(fmt::format("umount {}", quoted(small_disk)).c_str()) == 0);
    } else {
      std::printf("crema-test-skip: a full disk needs a tmpfs this process may mount (root)\n");
    }

    // Interrupted by SIGINT and SIGTERM once a thousand files are in: the same.
    const auto many = scratch.path() / "many.txt";
    {
      std::ofstream out(many);
      for (int i = 0; i < 200000; ++i) out << "cats/cat " << i % 2 << ".png " << i % 3 << '\n';
    }
    for (const char* signal : {"INT", "TERM"}) {
      CAPTURE(signal);
      const auto db = scratch.path() / fmt::format("interrupted-{}", signal);
      const auto log = scratch.path() / fmt::format("log-{}", signal);
      const auto interrupted = run(fmt::format(
          "{} convert {} {} {} >{} 2>&1 & pid=$!; "
          "for i in $(seq 600); do grep -q 'processed 1000 files' {} && break; sleep 0.05; done; "
          "kill -{} $pid; wait $pid; echo \"status $?\"; cat {}",
          lmdb_tool, images, quoted(many), quoted(db), quoted(log), quoted(log), signal,
          quoted(log)));
      CHECK(interrupted.output.find("status 1") != std::string::npos);
      CHECK(interrupted.output.find(fmt::format("interrupted by SIG{} after", signal)) !=
            std::string::npos);
      // The progress line came as it was printed, not a 4 KiB buffer (some 180,000 files) late.
      const std::size_t after = interrupted.output.find(" after ", interrupted.output.find("SIG"));
      REQUIRE(after != std::string::npos);
      CHECK(std::stoul(interrupted.output.substr(after + 7)) < 100000);
      CHECK(interrupted.output.find("nothing written to") != std::string::npos);
      CHECK_FALSE(fs::exists(db));
      CHECK_FALSE(fs::exists(scratch.path() / fmt::format("interrupted-{}.partial", signal)));
    }

    // A finished conversion is where it should be, and is not overwritten by the next.
    const auto db = scratch.path() / "db";
    REQUIRE(run(fmt::format("{} convert {} {} {}", lmdb_tool, images, quoted(list), quoted(db)))
                .status == 0);
    CHECK(fs::exists(db / "data.mdb"));
    CHECK_FALSE(fs::exists(scratch.path() / "db.partial"));
    const auto again =
        run(fmt::format("{} convert {} {} {}", lmdb_tool, images, quoted(list), quoted(db)));
    CHECK(again.status == 1);
    CHECK(again.output.find("exists already") != std::string::npos);
  }

  TEST_CASE("crema-lmdb mean and stat agree with the records, and dump lists keys") {
    scratch_directory scratch("tool-mean");
    const auto db = scratch.path() / "db";
    {
      crema::lmdb_writer writer(db);
      std::vector<std::byte> value;
      for (int i = 0; i < 4; ++i) {
        const std::vector<std::byte> pixels(2 * 1 * 2, static_cast<std::byte>(10 * i));
        value.clear();
        crema::encode_datum({.channels = 2, .height = 1, .width = 2, .label = i, .data = pixels},
                            value);
        writer.put(fmt::format("{:08}_{}", i, i), value);
      }
    }
    const auto mean_file = scratch.path() / "mean.binaryproto";
    REQUIRE(run(fmt::format("{} mean {} {}", lmdb_tool, quoted(db), quoted(mean_file))).status ==
            0);
    const crema::blob mean = crema::read_blob_proto(mean_file);
    CHECK(mean.shape == std::vector<std::int64_t>{1, 2, 1, 2});
    CHECK(mean.data == std::vector<float>(4, 15.0f));  // (0 + 10 + 20 + 30) / 4

    const auto stat = run(fmt::format("{} stat {} --json", lmdb_tool, quoted(db)));
    CHECK(json_field(stat.output, "channel_mean") == "[15, 15]");
    CHECK(json_field(stat.output, "encoded") == "0");

    const auto dump = run(fmt::format("{} dump {} 2", lmdb_tool, quoted(db)));
    CHECK(dump.output == "00000000_0  2x1x2  label 0\n00000001_1  2x1x2  label 1\n");

    const auto synthetic = scratch.path() / "synthetic";
    REQUIRE(run(fmt::format("{} synth {} --count 30 --shape 1x3x4 --labels 7", lmdb_tool,
                            quoted(synthetic)))
                .status == 0);
    const auto synthetic_stat = run(fmt::format("{} stat {} --json", lmdb_tool, quoted(synthetic)));
    CHECK(json_field(synthetic_stat.output, "count") == "30");
    CHECK(json_field(synthetic_stat.output, "shapes") == "{\"1x3x4\": 30}");
    CHECK(json_field(synthetic_stat.output, "labels").find("\"6\": 4") != std::string::npos);
  }

  TEST_CASE(
      "crema-feed delivers every record, with a checksum that is the same for every "
      "producer and thread count") {
    scratch_directory scratch("tool-feed");
    const auto list = make_images(scratch.path());
    const auto db = scratch.path() / "db";
    REQUIRE(run(fmt::format("{} convert {} {} {}", lmdb_tool, quoted(scratch.path() / "images"),
                            quoted(list), quoted(db)))
                .status == 0);
    std::string first_checksum;
    for (const char* layout : {"--producers 1 --threads 1", "--producers 3 --threads 2"}) {
      CAPTURE(layout);
      const auto feed = run(fmt::format(
          "{} {} --batch 4 --crop 5 --mirror --mean-values 100,110,120 --scale 0.5 --epochs 3 "
          "--seed 9 --ordered --json {}",
          feed_tool, quoted(db), layout));
      REQUIRE_MESSAGE(feed.status == 0, feed.output);
      CHECK(json_field(feed.output, "samples") == "18");
      CHECK(std::stod(json_field(feed.output, "samples_per_s")) > 0);
      CHECK(std::stod(json_field(feed.output, "raw_scan_samples_per_s")) > 0);
      const double starved = std::stod(json_field(feed.output, "starved_fraction"));
      CHECK(starved >= 0);
      CHECK(starved <= 1);
      const std::string checksum = json_field(feed.output, "checksum");
      if (first_checksum.empty()) first_checksum = checksum;
      CHECK(checksum == first_checksum);
    }
    const auto other_seed =
        run(fmt::format("{} {} --batch 4 --crop 5 --mirror --epochs 3 --seed 10 --ordered --json",
                        feed_tool, quoted(db)));
    CHECK(json_field(other_seed.output, "checksum").size() == 16);
    CHECK(json_field(other_seed.output, "checksum") != first_checksum);
    CHECK(first_checksum.size() == 16);
    CHECK(run(fmt::format("{} {} --batch 4 --json", feed_tool, quoted(db)))
              .output.find("decode_only") == std::string::npos);
    // The same images kept encoded are decoded only in their crops, to the same bytes, beside a
    // loop that only decodes them.
    const auto encoded = scratch.path() / "encoded";
    REQUIRE(run(fmt::format("{} convert {} {} {} --encoded", lmdb_tool,
                            quoted(scratch.path() / "images"), quoted(list), quoted(encoded)))
                .status == 0);
    const auto from_encoded = run(fmt::format(
        "{} {} --batch 4 --crop 5 --mirror --mean-values 100,110,120 --scale 0.5 --epochs 3 "
        "--seed 9 --ordered --json --producers 3 --threads 2",
        feed_tool, quoted(encoded)));
    REQUIRE_MESSAGE(from_encoded.status == 0, from_encoded.output);
    CHECK(json_field(from_encoded.output, "checksum") == first_checksum);
    CHECK(std::stod(json_field(from_encoded.output, "decode_only_samples_per_s")) > 0);
    CHECK(std::stod(json_field(from_encoded.output, "ratio_to_decode_only")) > 0);
    const auto printed = run(fmt::format("{} {} --batch 4 --crop 5", feed_tool, quoted(encoded)));
    CHECK(printed.output.find("decode-only loop:") != std::string::npos);
    // Unordered, the consumer does not hash unless asked.
    const auto unhashed = run(fmt::format("{} {} --batch 4 --json", feed_tool, quoted(db)));
    CHECK(unhashed.output.find("\"checksum\": null") != std::string::npos);
    const auto hashed =
        run(fmt::format("{} {} --batch 4 --checksum --json", feed_tool, quoted(db)));
    CHECK(json_field(hashed.output, "checksum").size() == 16);
  }

  TEST_CASE(
      "crema-feed --images reads a folder or a list through ImageNet-style input, beside a "
      "decode-only loop of the same files, and misused options are usage errors") {
    scratch_directory scratch("tool-feed-images");
    const auto list = make_images(scratch.path());
    const auto images = scratch.path() / "images";
    const auto folder = run(fmt::format(
        "{} --images {} --batch 4 --random-resized-crop 5 --mirror "
        "--normalize 0.5,0.5,0.5/0.2,0.2,0.2 --epochs 2 --producers 3 --threads 2 --json",
        feed_tool, quoted(images)));
    REQUIRE_MESSAGE(folder.status == 0, folder.output);
    CHECK(json_field(folder.output, "files") == "6");
    CHECK(json_field(folder.output, "samples") == "12");
    CHECK(json_field(folder.output, "shape") == "[3, 5, 5]");
    CHECK(json_field(folder.output, "transform") == "RandomResizedCrop(5)");
    CHECK(std::stod(json_field(folder.output, "samples_per_s")) > 0);
    CHECK(std::stod(json_field(folder.output, "decode_only_samples_per_s")) > 0);
    const auto listed =
        run(fmt::format("{} --images {} --list {} --batch 4 --resize 8 "
                        "--center-crop 6 --exact",
                        feed_tool, quoted(images), quoted(list)));
    REQUIRE_MESSAGE(listed.status == 0, listed.output);
    CHECK(listed.output.find("(6 images), Resize(8) + CenterCrop(6), batches of 4 x 3 x 6 x 6") !=
          std::string::npos);
    CHECK(listed.output.find("decode-only loop:") != std::string::npos);

    struct misuse {
      std::string arguments;
      std::string message;
    };
    for (const misuse& m : std::vector<misuse>{
             {"--batch 4",
              "--images and --shards take --random-resized-crop S, or --resize S with "
              "--center-crop C"},
             {"--batch 4 --random-resized-crop 5 --resize 8 --center-crop 6",
              "--images and --shards take"},
             {"--batch 4 --resize 8 --center-crop 9",
              "--center-crop must be at least 1 and at most --resize"},
             {"--batch 4 --random-resized-crop 5 --normalize 1,2/3,4",
              "--normalize takes m1,m2,m3/s1,s2,s3, not '1,2/3,4'"},
             {"--batch 4 --random-resized-crop 5 --normalize 0,0,0/1,0,1", "std must be positive"},
             {"--batch 4 --random-resized-crop 5 --crop 3", "--crop is for a DB"}}) {
      CAPTURE(m.arguments);
      const auto result =
          run(fmt::format("{} --images {} {}", feed_tool, quoted(images), m.arguments));
      CHECK(result.status == 2);
      CHECK(result.output.find(m.message) != std::string::npos);
      CHECK(result.output.find("usage:") != std::string::npos);
    }
    const auto stray = run(fmt::format("{} {} --batch 4 --resize 8", feed_tool, quoted(images)));
    CHECK(stray.status == 2);
    CHECK(stray.output.find("--resize goes with --images ROOT") != std::string::npos);
    const auto missing = run(fmt::format("{} --images {} --batch 4 --random-resized-crop 5",
                                         feed_tool, quoted(scratch.path() / "nowhere")));
    CHECK(missing.status == 1);
    CHECK(missing.output.find("nowhere does not exist") != std::string::npos);
  }

  TEST_CASE(
      "crema-shards writes images as WebDataset shards that stat, verify and crema-feed --shards "
      "read, and verify names a damaged shard and the offset") {
    scratch_directory scratch("tool-shards");
    const auto list = make_images(scratch.path());
    const auto out = scratch.path() / "shards";
    const auto written =
        run(fmt::format("{} write {} {} --list {} --shard-samples 4 --prefix train", shards_tool,
                        quoted(scratch.path() / "images"), quoted(out), quoted(list)));
    REQUIRE_MESSAGE(written.status == 0, written.output);
    CHECK(written.output.find("wrote 6 samples in 2 shards: " +
                              (out / "train-{000000..000001}.tar").string()) != std::string::npos);
    const std::string pattern = quoted(out / "train-{000000..000001}.tar");
    const auto stat = run(fmt::format("{} stat {} --json", shards_tool, pattern));
    REQUIRE_MESSAGE(stat.status == 0, stat.output);
    CHECK(json_field(stat.output, "shards") == "2");
    CHECK(json_field(stat.output, "samples") == "6");
    CHECK(json_field(stat.output, "classes") == "3");
    CHECK(json_field(stat.output, "without_class") == "0");
    CHECK(json_field(stat.output, "extensions") == "{\"cls\": 6, \"jpg\": 2, \"png\": 4}");
    const auto verified = run(fmt::format("{} verify {}", shards_tool, pattern));
    REQUIRE_MESSAGE(verified.status == 0, verified.output);
    CHECK(verified.output.find("verified 2 shards: 12 members") != std::string::npos);

    const auto fed = run(fmt::format(
        "{} --shards {} --batch 4 --random-resized-crop 5 --epochs 2 --producers 2 --json",
        feed_tool, pattern));
    REQUIRE_MESSAGE(fed.status == 0, fed.output);
    CHECK(json_field(fed.output, "files") == "6");
    CHECK(json_field(fed.output, "samples") == "12");
    CHECK(std::stod(json_field(fed.output, "decode_only_samples_per_s")) > 0);
    CHECK(std::stod(json_field(fed.output, "source_samples_per_s")) > 0);
    CHECK(std::stod(json_field(fed.output, "raw_read_bytes_per_s")) > 0);
    const auto plain =
        run(fmt::format("{} --shards {} --batch 4 --resize 8 --center-crop 6", feed_tool, pattern));
    REQUIRE_MESSAGE(plain.status == 0, plain.output);
    CHECK(plain.output.find("ratio = source / sequential = ") != std::string::npos);
#if defined(CREMA_TOOLS_HTTP)
    {
      INFO("the same shards over HTTP: the same batches, byte for byte");
      crema::test::loopback_http_server server(out);
      const std::string options = "--batch 4 --random-resized-crop 5 --epochs 2 --json";
      const fs::path local_dump = scratch.path() / "local.f32";
      const fs::path remote_dump = scratch.path() / "remote.f32";
      const auto local = run(fmt::format("{} --shards {} {} --dump {}", feed_tool, pattern, options,
                                         quoted(local_dump)));
      const auto remote =
          run(fmt::format("{} --shards '{}' {} --dump {}", feed_tool,
                          server.url("train-{000000..000001}.tar"), options, quoted(remote_dump)));
      REQUIRE_MESSAGE(local.status == 0, local.output);
      REQUIRE_MESSAGE(remote.status == 0, remote.output);
      CHECK(json_field(remote.output, "samples") == "12");
      const auto bytes_of_file = [](const fs::path& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      };
      CHECK(fs::file_size(remote_dump) == 12 * (3 * 5 * 5 + 1) * sizeof(float));
      CHECK(bytes_of_file(remote_dump) == bytes_of_file(local_dump));
      const auto missing = run(fmt::format("{} --shards '{}' --batch 4 --resize 8 --center-crop 6",
                                           feed_tool, server.url("none-{0..1}.tar")));
      CHECK(missing.status == 1);
      CHECK(
          missing.output.find(fmt::format("shard {}: cannot ask its size: HTTP 404: no such object",
                                          server.url("none-0.tar"))) != std::string::npos);
    }
#endif
    const auto both =
        run(fmt::format("{} --shards {} --images {} --batch 4 --resize 8 "
                        "--center-crop 6",
                        feed_tool, pattern, quoted(scratch.path() / "images")));
    CHECK(both.status == 2);
    CHECK(both.output.find("--shards or --images: one data set") != std::string::npos);

    // A flipped byte in the second shard's first header.
    const fs::path damaged = out / "train-000001.tar";
    {
      std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
      file.seekp(10);
      file.put('\x7f');
    }
    const auto bad = run(fmt::format("{} verify {}", shards_tool, pattern));
    CHECK(bad.status == 1);
    CHECK(bad.output.find(fmt::format("tar shard {}: holds no tar header (its checksum fails) at "
                                      "byte 0",
                                      damaged.string())) != std::string::npos);
    const auto none = run(fmt::format("{} stat {}", shards_tool, quoted(out / "nothing-*.tar")));
    CHECK(none.status == 1);
    CHECK(none.output.find("nothing-*.tar matches no file") != std::string::npos);
  }

  TEST_CASE(
      "crema-shards writes images as TFRecord files of Examples that stat, verify and crema-feed "
      "--shards read, and verify names a record whose CRC fails") {
    scratch_directory scratch("tool-tfrecord");
    const auto list = make_images(scratch.path());
    const auto out = scratch.path() / "records";
    const auto written =
        run(fmt::format("{} write {} {} --list {} --format tfrecord --shard-samples 4", shards_tool,
                        quoted(scratch.path() / "images"), quoted(out), quoted(list)));
    REQUIRE_MESSAGE(written.status == 0, written.output);
    CHECK(written.output.find("wrote 6 samples in 2 shards: " +
                              (out / "shard-{000000..000001}.tfrecord").string()) !=
          std::string::npos);
    const std::string pattern = quoted(out / "shard-*.tfrecord");
    const auto stat = run(fmt::format("{} stat {} --json", shards_tool, pattern));
    REQUIRE_MESSAGE(stat.status == 0, stat.output);
    CHECK(json_field(stat.output, "samples") == "6");
    CHECK(json_field(stat.output, "classes") == "3");
    CHECK(json_field(stat.output, "extensions") ==
          "{\"image/class/label\": 6, \"image/encoded\": 6, \"image/filename\": 6, "
          "\"image/format\": 6}");
    const auto verified = run(fmt::format("{} verify {}", shards_tool, pattern));
    REQUIRE_MESSAGE(verified.status == 0, verified.output);
    CHECK(verified.output.find("verified 2 shards: 6 members") != std::string::npos);
    const auto fed =
        run(fmt::format("{} --shards {} --batch 4 --resize 8 --center-crop 6 --epochs 2 --json",
                        feed_tool, pattern));
    REQUIRE_MESSAGE(fed.status == 0, fed.output);
    CHECK(json_field(fed.output, "samples") == "12");
    CHECK(std::stod(json_field(fed.output, "source_samples_per_s")) > 0);

    const fs::path damaged = out / "shard-000000.tfrecord";
    {
      std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
      file.seekg(20);  // inside the first record's data
      const int byte = file.get();
      file.seekp(20);
      file.put(static_cast<char>(byte ^ 0x40));
    }
    const auto bad = run(fmt::format("{} verify {}", shards_tool, pattern));
    CHECK(bad.status == 1);
    CHECK(bad.output.find(fmt::format(
              "tfrecord shard {}: the record at byte 0 fails its data's CRC", damaged.string())) !=
          std::string::npos);
  }

  TEST_CASE("--help and -h print the usage and exit 0, wherever they stand") {
    const std::pair<std::string, std::string> tools[] = {
        {lmdb_tool, "crema-lmdb convert ROOT LIST OUT"},
        {feed_tool, "crema-feed (--images ROOT [--list FILE] | --shards PATTERN)"},
        {shards_tool, "crema-shards write ROOT OUT"}};
    for (const auto& named : tools) {
      const std::string& tool = named.first;
      const std::string& first_line = named.second;
      for (const char* asked : {"--help", "-h", "convert --help", "db --batch 4 -h"}) {
        CAPTURE(tool);
        CAPTURE(asked);
        const auto help = run(fmt::format("{} {}", tool, asked));
        CHECK(help.status == 0);
        CHECK(help.output.starts_with("usage:\n"));
        CHECK(help.output.find(first_line) != std::string::npos);
      }
    }
    // Without it, a missing command is still a usage error.
    const auto bare = run(lmdb_tool);
    CHECK(bare.status == 2);
    CHECK(bare.output.find("crema-lmdb: missing a command") != std::string::npos);
  }

  TEST_CASE("an argument too many is a usage error naming it, for every command") {
    scratch_directory scratch("tool-extra");
    const auto list = make_images(scratch.path());
    const auto db = scratch.path() / "db";
    REQUIRE(run(fmt::format("{} convert {} {} {}", lmdb_tool, quoted(scratch.path() / "images"),
                            quoted(list), quoted(db)))
                .status == 0);
    const std::string images = quoted(scratch.path() / "images");
    const std::string commands[] = {
        fmt::format("{} convert {} {} {} spare", lmdb_tool, images, quoted(list),
                    quoted(scratch.path() / "other")),
        fmt::format("{} mean {} {} spare", lmdb_tool, quoted(db),
                    quoted(scratch.path() / "mean.binaryproto")),
        fmt::format("{} stat {} spare", lmdb_tool, quoted(db)),
        fmt::format("{} dump {} 2 spare", lmdb_tool, quoted(db)),
        fmt::format("{} synth {} spare --count 2 --shape 3x4x4", lmdb_tool,
                    quoted(scratch.path() / "synth")),
        fmt::format("{} {} spare --batch 2", feed_tool, quoted(db)),
        fmt::format("{} write {} {} spare", shards_tool, images, quoted(scratch.path() / "shards")),
        fmt::format("{} stat {} spare", shards_tool, quoted(db)),
        fmt::format("{} verify {} spare", shards_tool, quoted(db))};
    for (const std::string& command : commands) {
      CAPTURE(command);
      const auto extra = run(command);
      CHECK(extra.status == 2);
      CHECK(extra.output.find(": unexpected argument 'spare'\n") != std::string::npos);
      CHECK(extra.output.find("usage:") != std::string::npos);
    }
    // Nothing was written by the refused commands.
    CHECK_FALSE(fs::exists(scratch.path() / "other"));
    CHECK_FALSE(fs::exists(scratch.path() / "shards"));
    CHECK_FALSE(fs::exists(scratch.path() / "mean.binaryproto"));
    CHECK_FALSE(fs::exists(scratch.path() / "synth"));
  }

  TEST_CASE("bad input fails with a message naming the path, line or key") {
    scratch_directory scratch("tool-errors");
    const auto list = make_images(scratch.path());
    {
      std::ofstream more(list, std::ios::app);
      more << "cats/missing.png 1\n";
    }
    const auto missing =
        run(fmt::format("{} convert {} {} {}", lmdb_tool, quoted(scratch.path() / "images"),
                        quoted(list), quoted(scratch.path() / "db")));
    CHECK(missing.status == 1);
    CHECK(missing.output.find("cats/missing.png") != std::string::npos);

    {
      std::ofstream bad(scratch.path() / "bad.txt");
      bad << "cats/cat 0.png zero\n";
    }
    const auto label =
        run(fmt::format("{} convert {} {} {}", lmdb_tool, quoted(scratch.path() / "images"),
                        quoted(scratch.path() / "bad.txt"), quoted(scratch.path() / "db2")));
    CHECK(label.status == 1);
    CHECK(label.output.find("line 1") != std::string::npos);

    const auto db = scratch.path() / "corrupt";
    {
      crema::lmdb_writer writer(db);
      const std::byte cut[] = {std::byte{0x22}, std::byte{50}};
      writer.put("00000000_broken", cut);
    }
    const auto stat = run(fmt::format("{} stat {}", lmdb_tool, quoted(db)));
    CHECK(stat.status == 1);
    CHECK(stat.output.find("00000000_broken") != std::string::npos);

    const auto nothing = run(fmt::format("{} stat {}", lmdb_tool, quoted(scratch.path() / "no")));
    CHECK(nothing.status == 1);
    CHECK(nothing.output.find((scratch.path() / "no").string()) != std::string::npos);

    const auto usage = run(fmt::format("{} {} --batch", feed_tool, quoted(db)));
    CHECK(usage.status == 2);
    CHECK(usage.output.find("--batch needs a value") != std::string::npos);
    CHECK(run(lmdb_tool + " frobnicate").status == 2);
  }
}
