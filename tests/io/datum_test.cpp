// Caffe's Datum and BlobProto on the protobuf wire: bytes written as protobuf writes them (spelled
// out here byte by byte, from the wire format, not from crema's encoder) decode to their fields;
// crema's encoder round-trips; malformed records are format errors that name the key and field.

#include <crema/io/caffe/blob_proto.hpp>
#include <crema/io/caffe/datum.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::vector<std::byte> bytes(std::initializer_list<unsigned> values) {
  std::vector<std::byte> out;
  for (const unsigned value : values) out.push_back(static_cast<std::byte>(value));
  return out;
}

void append(std::vector<std::byte>& out, std::initializer_list<unsigned> values) {
  for (const unsigned value : values) out.push_back(static_cast<std::byte>(value));
}

void append_float(std::vector<std::byte>& out, float value) {
  unsigned char raw[4];
  std::memcpy(raw, &value, 4);  // the tests run on little-endian machines, as the wire is
  for (const unsigned char byte : raw) out.push_back(static_cast<std::byte>(byte));
}

// The message of `decode(bytes)`'s format_error; fails the test if it does not throw one.
template <class Decode>
std::string format_error_of(Decode decode) {
  try {
    decode();
  } catch (const crema::format_error& error) {
    return error.what();
  }
  FAIL("no crema::format_error was thrown");
  return {};
}

}  // namespace

TEST_CASE("datum: a raw-pixel Datum as protobuf writes it decodes to its fields") {
  // channels 3, height 1, width 2, data (6 bytes), label 7: tags 0x08 0x10 0x18 0x22 0x28.
  const auto message = bytes({0x08, 3, 0x10, 1, 0x18, 2, 0x22, 6, 10, 20, 30, 40, 50, 60, 0x28, 7});
  const crema::datum_view datum = crema::decode_datum(message, "00000001_cat.jpg");
  CHECK(datum.channels == 3);
  CHECK(datum.height == 1);
  CHECK(datum.width == 2);
  CHECK(datum.label == 7);
  CHECK_FALSE(datum.encoded);
  CHECK(datum.elements() == 6);
  REQUIRE(datum.data.size() == 6);
  CHECK(datum.data.data() == message.data() + 8);  // a view, not a copy
  CHECK(static_cast<int>(datum.data[5]) == 60);
  CHECK(datum.float_count == 0);
}

TEST_CASE("datum: a negative label is a ten-byte varint and decodes") {
  auto message = bytes({0x08, 1, 0x10, 1, 0x18, 1, 0x22, 1, 9, 0x28});
  append(message, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  CHECK(crema::decode_datum(message).label == -1);
}

TEST_CASE("datum: float_data decodes unpacked (as Caffe writes it) and packed") {
  const float values[] = {0.5f, -2.25f, 1e-3f, 3e8f};
  std::vector<std::byte> unpacked = bytes({0x08, 1, 0x10, 2, 0x18, 2});
  for (const float value : values) {
    append(unpacked, {0x35});  // field 6, fixed32
    append_float(unpacked, value);
  }
  std::vector<std::byte> packed = bytes({0x08, 1, 0x10, 2, 0x18, 2, 0x32, 16});  // field 6, bytes
  for (const float value : values) append_float(packed, value);
  // A parser must accept a repeated field split over several packed and unpacked runs.
  std::vector<std::byte> mixed = bytes({0x08, 1, 0x10, 2, 0x18, 2, 0x32, 8});
  append_float(mixed, values[0]);
  append_float(mixed, values[1]);
  append(mixed, {0x35});
  append_float(mixed, values[2]);
  append(mixed, {0x32, 4});
  append_float(mixed, values[3]);

  for (const auto* message : {&unpacked, &packed, &mixed}) {
    const crema::datum_view datum = crema::decode_datum(*message, "floats");
    REQUIRE(datum.float_count == 4);
    CHECK(datum.data.empty());
    std::vector<float> out(4);
    datum.copy_floats(out);
    CHECK(out == std::vector<float>(std::begin(values), std::end(values)));
    std::vector<float> wrong(3);
    CHECK_THROWS_AS(datum.copy_floats(wrong), crema::length_error);
  }
}

TEST_CASE("datum: a record with pixels and floats is read by its pixels, as Caffe reads it") {
  auto message = bytes({0x08, 1, 0x10, 1, 0x18, 2, 0x22, 2, 9, 8, 0x35});
  append_float(message, 1.0f);  // one float for two elements: ignored, as Caffe ignores it
  const auto datum = crema::decode_datum(message, "both");
  CHECK(datum.data.size() == 2);
  CHECK(datum.float_count == 1);
  auto wrong_pixels = bytes({0x08, 1, 0x10, 1, 0x18, 2, 0x22, 1, 9, 0x35});
  append_float(wrong_pixels, 1.0f);
  append(wrong_pixels, {0x35});
  append_float(wrong_pixels, 2.0f);  // floats of the right count do not excuse short pixels
  CHECK(format_error_of([&] {
          (void)crema::decode_datum(wrong_pixels, "both");
        }).find("field 4 (data) holds 1 bytes") != std::string::npos);
}

TEST_CASE("datum: fields it does not know are skipped, of every wire type") {
  auto message = bytes({0x08, 1, 0x10, 1, 0x18, 1});
  append(message, {0x48, 0x96, 0x01});                    // field 9 varint 150
  append(message, {0x51, 1, 2, 3, 4, 5, 6, 7, 8});        // field 10 fixed64
  append(message, {0x5a, 3, 'a', 'b', 'c'});              // field 11 bytes
  append(message, {0x65, 1, 2, 3, 4});                    // field 12 fixed32
  append(message, {0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01});  // field 2^29 - 1 varint
  append(message, {0x22, 1, 42, 0x28, 3});
  const crema::datum_view datum = crema::decode_datum(message);
  CHECK(datum.label == 3);
  REQUIRE(datum.data.size() == 1);
  CHECK(static_cast<int>(datum.data[0]) == 42);
}

TEST_CASE("datum: an encoded image keeps its bytes whatever their size") {
  const auto message =
      bytes({0x08, 3, 0x10, 0, 0x18, 0, 0x22, 4, 0xff, 0xd8, 0xff, 0xe0, 0x28, 1, 0x38, 1});
  const crema::datum_view datum = crema::decode_datum(message);
  CHECK(datum.encoded);
  CHECK(datum.data.size() == 4);
  CHECK(datum.label == 1);
}

TEST_CASE("datum: encode_datum round-trips and writes what protobuf writes") {
  const std::vector<std::byte> pixels = bytes({1, 2, 3, 4, 5, 6});
  std::vector<std::byte> out;
  crema::encode_datum({.channels = 3, .height = 1, .width = 2, .label = 7, .data = pixels}, out);
  CHECK(out == bytes({0x08, 3, 0x10, 1, 0x18, 2, 0x22, 6, 1, 2, 3, 4, 5, 6, 0x28, 7}));

  const float values[] = {1.5f, -1.0f};
  std::vector<std::byte> floats;
  crema::encode_datum({.channels = 2, .height = 1, .width = 1, .label = -4, .float_data = values},
                      floats);
  const auto datum = crema::decode_datum(floats);
  CHECK(datum.label == -4);
  REQUIRE(datum.float_count == 2);
  std::vector<float> read(2);
  datum.copy_floats(read);
  CHECK(read == std::vector<float>{1.5f, -1.0f});

  std::vector<std::byte> encoded;
  crema::encode_datum({.channels = 3, .label = 2, .encoded = true, .data = pixels}, encoded);
  CHECK(crema::decode_datum(encoded).encoded);
}

// A record as a source hands it over: the serialized Datum and its key.
struct keyed_datum {
  std::span<const std::byte> value;
  std::string key;
  [[nodiscard]] std::string_view key_text() const { return key; }
};
static_assert(crema::datum_record<keyed_datum>);
static_assert(!crema::datum_record<std::vector<std::byte>>);

TEST_CASE("datum: an encoded Datum's image is its bytes in place, its label and its key") {
  const std::vector<std::byte> jpeg = bytes({0xff, 0xd8, 0xff, 0xe0, 0, 16, 0xff, 0xd9});
  std::vector<std::byte> encoded;
  crema::encode_datum({.channels = 3, .label = 41, .encoded = true, .data = jpeg}, encoded);
  const keyed_datum record{encoded, "00000007_a.jpg"};
  const crema::encoded_sample image = crema::encoded_datum(record);
  CHECK(std::equal(image.bytes.begin(), image.bytes.end(), jpeg.begin(), jpeg.end()));
  CHECK(image.bytes.data() >= encoded.data());  // a view into the record, not a copy
  CHECK(image.bytes.data() + image.bytes.size() <= encoded.data() + encoded.size());
  CHECK(image.label == 41);
  CHECK(image.key == "00000007_a.jpg");

  std::vector<std::byte> raw;
  crema::encode_datum(
      {.channels = 1, .height = 2, .width = 2, .label = 1, .data = std::span(jpeg).first(4)}, raw);
  const std::string message = format_error_of([&] {
    (void)crema::encoded_datum(keyed_datum{raw, "00000008_raw"});
  });
  CHECK(message.find("record 00000008_raw: raw pixels, not an encoded image") != std::string::npos);
  const std::string corrupt = format_error_of([&] {
    (void)crema::encoded_datum(keyed_datum{jpeg, "00000009_cut"});
  });
  CHECK(corrupt.find("00000009_cut") != std::string::npos);
}

TEST_CASE("datum: malformed records are format errors naming the key and the field") {
  const auto fails = [](std::vector<std::byte> message) {
    return format_error_of([&] { (void)crema::decode_datum(message, "00000042_dog.jpg"); });
  };
  SUBCASE("truncated varint") {
    const std::string what = fails(bytes({0x08, 3, 0x28, 0x80}));
    CHECK(what.find("00000042_dog.jpg") != std::string::npos);
    CHECK(what.find("label") != std::string::npos);
    CHECK(what.find("truncated") != std::string::npos);
  }
  SUBCASE("a length past the end") {
    const std::string what = fails(bytes({0x08, 1, 0x10, 1, 0x18, 1, 0x22, 9, 1}));
    CHECK(what.find("data") != std::string::npos);
    CHECK(what.find("9 bytes") != std::string::npos);
  }
  SUBCASE("a varint of eleven bytes") {
    auto message = bytes({0x28});
    for (int i = 0; i < 10; ++i) append(message, {0xff});
    append(message, {0x01});
    CHECK(fails(message).find("label") != std::string::npos);
  }
  SUBCASE("an int32 out of range") {
    const std::string what = fails(bytes({0x08, 0x80, 0x80, 0x80, 0x80, 0x10}));
    CHECK(what.find("channels") != std::string::npos);
    CHECK(what.find("int32") != std::string::npos);
  }
  SUBCASE("the wrong wire type for a known field") {
    CHECK(fails(bytes({0x0a, 1, 3})).find("channels") != std::string::npos);
  }
  SUBCASE("a group or an unknown wire type") {
    CHECK(fails(bytes({0x4b})).find("group") != std::string::npos);
    CHECK(fails(bytes({0x4e})).find("wire type") != std::string::npos);
  }
  SUBCASE("field number 0") {
    CHECK(fails(bytes({0x00, 1})).find("field number") != std::string::npos);
  }
  SUBCASE("pixels that disagree with the shape") {
    const std::string what = fails(bytes({0x08, 3, 0x10, 2, 0x18, 2, 0x22, 2, 1, 2}));
    CHECK(what.find("2 bytes") != std::string::npos);
    CHECK(what.find("12") != std::string::npos);
  }
  SUBCASE("a shape without pixels or floats") {
    const std::string what = fails(bytes({0x08, 3, 0x10, 2, 0x18, 2, 0x28, 1}));
    CHECK(what.find("0 bytes") != std::string::npos);
    CHECK(what.find("00000042_dog.jpg") != std::string::npos);
  }
  SUBCASE("floats that disagree with the shape") {
    auto message = bytes({0x08, 1, 0x10, 1, 0x18, 2, 0x35});
    append_float(message, 1.0f);
    CHECK(fails(message).find("float_data") != std::string::npos);
  }
  SUBCASE("packed floats that are not whole") {
    CHECK(fails(bytes({0x32, 3, 0, 0, 0})).find("not whole floats") != std::string::npos);
  }
  SUBCASE("a negative dimension") {
    auto message = bytes({0x10});
    append(message, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
    CHECK(fails(message).find("negative") != std::string::npos);
  }
  SUBCASE("a shape whose product overflows") {
    // 2^31 - 1 three times overflows 64 bits.
    const auto message = bytes({0x08, 0xff, 0xff, 0xff, 0xff, 0x07, 0x10, 0xff, 0xff, 0xff,
                                0xff, 0x07, 0x18, 0xff, 0xff, 0xff, 0xff, 0x07, 0x22, 0});
    CHECK(fails(message).find("overflows") != std::string::npos);
  }
}

TEST_CASE("datum: every truncation of a valid record is an error or a shorter valid record") {
  std::vector<std::byte> message;
  const std::vector<std::byte> pixels(48, std::byte{7});
  crema::encode_datum({.channels = 3, .height = 4, .width = 4, .label = 300, .data = pixels},
                      message);
  for (std::size_t size = 0; size < message.size(); ++size) {
    const std::span<const std::byte> prefix(message.data(), size);
    try {
      const auto datum = crema::decode_datum(prefix, "cut");
      // Only a cut between fields can parse, and then the fields read are the ones written.
      CHECK(datum.label == 0);
    } catch (const crema::format_error& error) {
      CHECK(std::string(error.what()).find("cut") != std::string::npos);
    }
  }
}

TEST_CASE("blob_proto: a mean file as compute_image_mean writes it (legacy dims, packed data)") {
  // num 1, channels 1, height 1, width 2; data packed (field 5), as caffe.proto declares it.
  auto message = bytes({0x08, 1, 0x10, 1, 0x18, 1, 0x20, 2, 0x2a, 8});
  append_float(message, 104.0f);
  append_float(message, 117.5f);
  const crema::blob mean = crema::decode_blob_proto(message, "mean.binaryproto");
  CHECK(mean.shape == std::vector<std::int64_t>{1, 1, 1, 2});
  CHECK(mean.data == std::vector<float>{104.0f, 117.5f});
  CHECK(mean.count() == 2);
}

TEST_CASE("blob_proto: BlobShape and double_data decode, and the shape wins over legacy dims") {
  auto message = bytes({0x08, 9, 0x3a, 4, 0x0a, 2, 3, 1});  // num 9, shape {dim: [3, 1]} packed
  append(message, {0x42, 24});                              // double_data packed, 3 values
  for (const double value : {1.0, -2.5, 1e10}) {
    unsigned char raw[8];
    std::memcpy(raw, &value, 8);
    for (const unsigned char byte : raw) message.push_back(static_cast<std::byte>(byte));
  }
  const crema::blob blob = crema::decode_blob_proto(message, "doubles");
  CHECK(blob.shape == std::vector<std::int64_t>{3, 1});
  CHECK(blob.data == std::vector<float>{1.0f, -2.5f, 1e10f});
}

TEST_CASE("blob_proto: encode round-trips through a file, and bad files are named") {
  const std::int64_t shape[] = {3, 2, 2};
  std::vector<float> values(12);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f;
  std::vector<std::byte> out;
  crema::encode_blob_proto(shape, values, out);

  const auto path = std::filesystem::temp_directory_path() / "crema_blob_proto_test.binaryproto";
  {
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  }
  const crema::blob read = crema::read_blob_proto(path);
  CHECK(read.shape == std::vector<std::int64_t>(std::begin(shape), std::end(shape)));
  CHECK(read.data == values);

  {
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(out.data()), 7);  // cut short
  }
  const std::string what = format_error_of([&] { (void)crema::read_blob_proto(path); });
  CHECK(what.find(path.string()) != std::string::npos);
  std::filesystem::remove(path);

  try {
    (void)crema::read_blob_proto(path);
    FAIL("a missing mean file was read");
  } catch (const crema::config_error& error) {
    CHECK(std::string(error.what()).find(path.string()) != std::string::npos);
  }
}

TEST_CASE("blob_proto: values that disagree with the shape, and negative dims, are errors") {
  auto message = bytes({0x3a, 3, 0x0a, 1, 3, 0x2a, 4});  // shape [3], one float
  append_float(message, 1.0f);
  CHECK(format_error_of([&] { (void)crema::decode_blob_proto(message, "m"); }).find("3") !=
        std::string::npos);
  auto negative = bytes({0x3a, 13, 0x08});
  append(negative, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x08, 1});
  CHECK(format_error_of([&] { (void)crema::decode_blob_proto(negative, "m"); }).find("negative") !=
        std::string::npos);
}
