// TFRecord files: CRC-32C (the instruction and the table agree, on the standard check values),
// the framing written and read back with every length's and record's CRC checked and every fault
// named by shard and byte, files framed by an independent writer (Python's, with a CRC of its
// own), tf.train.Example decoded in place (packed and unpacked lists, every malformed case an
// error naming the record), and the source: every record once, shuffled, sharded and resumed.

#include <crema/io/shards/crc32c.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/tfrecord.hpp>
#include <crema/io/shards/tfrecord_source.hpp>

#include "common/error_message.hpp"
#include "common/scratch_directory.hpp"
#include "common/text_bytes.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;
using crema::test::bytes_of;
using crema::test::message_of;
using crema::test::scratch_directory;
using crema::test::text_of;

// A file of `count` Examples: "image/encoded" = "image <i>", "image/class/label" = i % 7.
void write_examples(const fs::path& path, std::size_t first, std::size_t count) {
  crema::tfrecord_writer out(path.string());
  for (std::size_t i = first; i < first + count; ++i) {
    const std::string image = fmt::format("image {}", i);
    out.write(crema::tf_example_builder()
                  .add_bytes("image/encoded", bytes_of(image))
                  .add_int64("image/class/label", static_cast<std::int64_t>(i % 7))
                  .bytes());
  }
  out.finish();
}

std::vector<std::string> images_of_pass(crema::tfrecord_source& source) {
  std::vector<std::string> images;
  std::vector<std::byte> buffer;
  while (const crema::tfrecord_record* record = source.next()) {
    images.push_back(text_of(record->read_encoded(buffer).bytes));
  }
  return images;
}

}  // namespace

TEST_SUITE("crc32c") {
  TEST_CASE("the standard check values, with the instruction and without, at every length") {
    CHECK(crema::detail::crc32c(bytes_of("123456789")) == 0xE3069283U);
    CHECK(crema::detail::crc32c(bytes_of("123456789"), false) == 0xE3069283U);
    const std::vector<std::byte> zeros(32, std::byte{0});
    const std::vector<std::byte> ones(32, std::byte{0xFF});
    CHECK(crema::detail::crc32c(zeros) == 0x8A9136AAU);
    CHECK(crema::detail::crc32c(ones) == 0x62A8AB43U);
    CHECK(crema::detail::crc32c({}) == 0U);
    std::vector<std::byte> bytes(300);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 37 + 11);
    for (std::size_t start = 0; start < 9; ++start) {
      for (std::size_t length = 0; start + length <= bytes.size(); length += 7) {
        const auto part = std::span<const std::byte>(bytes).subspan(start, length);
        CHECK(crema::detail::crc32c(part) == crema::detail::crc32c(part, false));
      }
    }
  }
}

TEST_SUITE("tfrecord") {
  TEST_CASE("records written are read back, every CRC checked") {
    scratch_directory scratch("tfrecord-round-trip");
    const fs::path path = scratch.path() / "r.tfrecord";
    const std::vector<std::string> records = {"", "one", std::string(70000, 'x'), "last"};
    {
      crema::tfrecord_writer out(path.string());
      for (const auto& record : records) out.write(bytes_of(record));
      out.finish();
      CHECK(out.bytes() == fs::file_size(path));
    }
    const crema::shard_file file(path.string());
    const auto places = crema::index_tfrecord(file);
    REQUIRE(places.size() == records.size());
    std::vector<std::byte> data;
    for (std::size_t i = 0; i < records.size(); ++i) {
      crema::read_tfrecord(file, places[i], data);
      CHECK(text_of(data) == records[i]);
    }
    CHECK(places[1].offset == 12 + 0 + 4 + 12);
  }

  TEST_CASE("a damaged file is an error naming the shard and the byte offset of the record") {
    scratch_directory scratch("tfrecord-damaged");
    const fs::path good = scratch.path() / "good.tfrecord";
    {
      crema::tfrecord_writer out(good.string());
      out.write(bytes_of("first record"));   // header at 0, data 12..24, CRC 24..28
      out.write(bytes_of("second record"));  // header at 28
    }
    std::vector<char> bytes(fs::file_size(good));
    std::ifstream(good, std::ios::binary)
        .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const auto write = [&](const std::string& name, std::vector<char> content) {
      const fs::path at = scratch.path() / name;
      std::ofstream(at, std::ios::binary)
          .write(content.data(), static_cast<std::streamsize>(content.size()));
      return at.string();
    };
    const auto index_message = [](const std::string& path) {
      return message_of<crema::format_error>([&] {
        const crema::shard_file file(path);
        (void)crema::index_tfrecord(file);
      });
    };
    auto bad_length = bytes;
    bad_length[28] ^= 0x01;
    const std::string length_path = write("length.tfrecord", bad_length);
    CHECK(index_message(length_path) ==
          fmt::format("tfrecord shard {}: has a record whose length's CRC fails at byte 28",
                      length_path));

    const std::string cut = write("cut.tfrecord", {bytes.begin(), bytes.end() - 3});
    CHECK(
        index_message(cut) ==
        fmt::format("tfrecord shard {}: has a record of 13 bytes that runs past its end at byte 28",
                    cut));
    const std::string in_header = write("header.tfrecord", {bytes.begin(), bytes.begin() + 33});
    CHECK(index_message(in_header) ==
          fmt::format("tfrecord shard {}: ends inside a record's header at byte 28", in_header));

    auto bad_data = bytes;
    bad_data[12 + 3] ^= 0x20;
    const std::string data_path = write("data.tfrecord", bad_data);
    const crema::shard_file file(data_path);
    const auto places = crema::index_tfrecord(file);  // the data is not read: its CRC not checked
    REQUIRE(places.size() == 2);
    std::vector<std::byte> data;
    CHECK(message_of<crema::format_error>([&] { crema::read_tfrecord(file, places[0], data); }) ==
          fmt::format("tfrecord shard {}: the record at byte 0 fails its data's CRC", data_path));
    crema::read_tfrecord(file, places[1], data);
    CHECK(text_of(data) == "second record");
  }

  TEST_CASE("files framed by another writer (Python's, with its own CRC-32C) read as theirs") {
    if (std::system("python3 -c 'import struct' > /dev/null 2>&1") != 0) {
      MESSAGE("python3 is not installed: another writer's files not read");
      return;
    }
    scratch_directory scratch("tfrecord-python");
    const fs::path path = scratch.path() / "py.tfrecord";
    // TensorFlow's framing and an Example encoded field by field, written from the definitions.
    const std::string script = fmt::format(R"(import struct
def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
def varint(value):
    out = b''
    value &= (1 << 64) - 1
    while value >= 0x80:
        out += bytes([(value & 0x7F) | 0x80])
        value >>= 7
    return out + bytes([value])
def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload
def feature(name, kind, values):
    return field(1, field(1, name.encode()) + field(2, field(kind, values)))
with open('{}', 'wb') as out:
    for i in range(3):
        image = ('jpeg bytes %d' % i).encode()
        labels = varint(8) + varint(i + 1)  # an unpacked int64: tag 1, varint
        example = field(1, feature('image/encoded', 1, field(1, image)) +
                           feature('image/class/label', 3, labels) +
                           feature('image/class/text', 1, field(1, b'tench')))
        header = struct.pack('<Q', len(example))
        out.write(header + struct.pack('<I', masked(header)) + example +
                  struct.pack('<I', masked(example)))
)",
                                           path.string());
    std::ofstream(scratch.path() / "make.py") << script;
    REQUIRE(std::system(("python3 '" + (scratch.path() / "make.py").string() + "'").c_str()) == 0);
    crema::tfrecord_source source({path.string()});
    REQUIRE(source.records() == 3);
    std::vector<std::byte> buffer;
    for (int i = 0; i < 3; ++i) {
      const crema::encoded_sample sample = source.next()->read_encoded(buffer);
      CHECK(text_of(sample.bytes) == fmt::format("jpeg bytes {}", i));
      CHECK(sample.label == i + 1);
    }
  }
}

TEST_SUITE("tf_example") {
  TEST_CASE("bytes, int64 and float lists, packed or not, by name") {
    const std::vector<float> floats = {0.5F, -2.25F};
    const auto bytes = crema::tf_example_builder()
                           .add_bytes("image/encoded", bytes_of("JPEG"))
                           .add_int64("image/class/label", -3)
                           .add_floats("bbox", floats)
                           .bytes();
    const crema::tf_example example(bytes, "r@0");
    REQUIRE(example.features().size() == 3);
    CHECK(example.bytes("image/encoded").size() == 1);
    CHECK(text_of(example.bytes("image/encoded")[0]) == "JPEG");
    CHECK(example.int64s("image/class/label") == std::vector<std::int64_t>{-3});
    CHECK(example.floats("bbox") == floats);
    CHECK(example.find("nothing") == nullptr);

    // Unpacked lists: a value per field.
    std::vector<std::byte> list;
    crema::detail::wire_writer writer(list);
    writer.tag(1, crema::detail::wire_type::varint);
    writer.varint(41);
    writer.tag(1, crema::detail::wire_type::varint);
    writer.varint(42);
    std::vector<std::byte> feature;
    crema::detail::wire_writer(feature).bytes_field(3, list);
    std::vector<std::byte> entry;
    crema::detail::wire_writer entry_writer(entry);
    entry_writer.bytes_field(1, bytes_of("ids"));
    entry_writer.bytes_field(2, feature);
    std::vector<std::byte> features;
    crema::detail::wire_writer(features).bytes_field(1, entry);
    std::vector<std::byte> unpacked;
    crema::detail::wire_writer(unpacked).bytes_field(1, features);
    CHECK(crema::tf_example(unpacked, "u").int64s("ids") == std::vector<std::int64_t>{41, 42});
  }

  TEST_CASE(
      "a missing feature, a feature of another kind and malformed bytes are errors naming "
      "the record") {
    const auto bytes = crema::tf_example_builder()
                           .add_bytes("image/encoded", bytes_of("JPEG"))
                           .add_int64("image/class/label", 3)
                           .bytes();
    const crema::tf_example example(bytes, "train.tfrecord@96");
    CHECK(message_of<crema::format_error>([&] { (void)example.bytes("image/png"); }) ==
          "tf.train.Example train.tfrecord@96: no feature 'image/png' (it has: image/encoded, "
          "image/class/label)");
    CHECK(message_of<crema::format_error>([&] { (void)example.floats("image/class/label"); }) ==
          "tf.train.Example train.tfrecord@96: feature 'image/class/label' holds int64s, not "
          "floats");
    auto cut = bytes;
    cut.resize(cut.size() - 2);
    CHECK(message_of<crema::format_error>([&] {
            crema::tf_example(cut, "r@7");
          }).starts_with("tf.train.Example r@7: field 1 (features) says"));
  }
}

TEST_SUITE("tfrecord_source") {
  TEST_CASE(
      "every record once, shuffled another way each pass, ranks disjoint and complete, "
      "resumed exactly") {
    scratch_directory scratch("tfrecord-source");
    write_examples(scratch.path() / "a.tfrecord", 0, 6);
    write_examples(scratch.path() / "b.tfrecord", 6, 5);
    const std::vector<std::string> shards{(scratch.path() / "a.tfrecord").string(),
                                          (scratch.path() / "b.tfrecord").string()};
    crema::tfrecord_source source(shards);
    CHECK(source.records() == 11);
    const auto in_order = images_of_pass(source);
    REQUIRE(in_order.size() == 11);
    CHECK(in_order.front() == "image 0");
    CHECK(in_order.back() == "image 10");

    source.shuffle(4);
    const auto first = images_of_pass(source);
    source.rewind();
    const auto second = images_of_pass(source);
    CHECK(std::set(first.begin(), first.end()) == std::set(in_order.begin(), in_order.end()));
    CHECK(first != second);

    std::multiset<std::string> all;
    for (std::size_t rank = 0; rank < 2; ++rank) {
      crema::tfrecord_source part(shards);
      part.shuffle(4);
      part.balance(crema::shard_balance::pad);
      part.shard(rank, 2);
      const auto images = images_of_pass(part);
      CHECK(images.size() == 6);
      all.insert(images.begin(), images.end());
    }
    CHECK(std::set(all.begin(), all.end()).size() == 11);

    crema::tfrecord_source stopped(shards);
    stopped.shuffle(4);
    for (int i = 0; i < 5; ++i) (void)stopped.next();
    const auto position = stopped.position();
    const auto rest = images_of_pass(stopped);
    crema::tfrecord_source resumed(shards);
    resumed.shuffle(4);
    resumed.seek(position);
    CHECK(images_of_pass(resumed) == rest);

    crema::tfrecord_source in_file_order(shards);
    const crema::tfrecord_record* record = in_file_order.next();
    REQUIRE(record != nullptr);
    CHECK(in_file_order.record_key(*record) == shards[0] + "@0");
    CHECK(in_file_order.next()->name() ==
          shards[0] + "@" + std::to_string(record->place().size + 16));
    CHECK(message_of<crema::config_error>([&] { source.shard(11, 12); }) ==
          "tfrecord_source: rank 11 of 12 gets no record: the 2 shards hold 11 records");
    const fs::path empty = scratch.path() / "empty.tfrecord";
    std::ofstream(empty).close();
    CHECK(message_of<crema::config_error>([&] { crema::tfrecord_source s({empty.string()}); }) ==
          fmt::format("tfrecord_source: shard {} holds no sample", empty.string()));
  }
}
