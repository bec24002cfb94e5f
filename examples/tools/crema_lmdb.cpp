// crema-lmdb: makes and reads Caffe-format LMDB datasets, as Caffe's convert_imageset and
// compute_image_mean did, and says what one holds.

#include "cli.hpp"

#include <crema/core/record_shape.hpp>
#include <crema/io/caffe/blob_proto.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
using crema::tools::usage_error;

constexpr std::string_view usage = R"(usage:
  crema-lmdb convert ROOT LIST OUT [--resize HxW] [--encoded] [--gray] [--shuffle] [--seed S]
      Caffe's convert_imageset: LIST holds "relative/path label" lines naming images (JPEG or
      PNG) under ROOT; OUT becomes an LMDB of Datums keyed "%08d_relative/path". Raw records hold
      BGR pixels channel-first; --encoded keeps each file's bytes (re-encoded in its own format
      after a resize). --resize is bilinear with pixel centres aligned, close to OpenCV's
      INTER_LINEAR but not bit-identical to it. --shuffle orders the list by a permutation drawn
      from --seed (default 0). OUT must not exist: it is written as OUT.partial and renamed once
      complete, so a conversion that fails or is interrupted (SIGINT, SIGTERM) leaves nothing.
  crema-lmdb mean DB OUT.binaryproto
      Caffe's compute_image_mean: the mean of every record (all of one shape), as a BlobProto.
  crema-lmdb stat DB [--json]
      How many records, of which labels and shapes, how many encoded, and each channel's mean.
  crema-lmdb dump DB N
      The first N keys with their shape and label.
  crema-lmdb synth OUT --count N --shape CxHxW [--labels K] [--seed S]
      A database of N raw Datums of random pixels, labels i % K (default 1000), keys as
      convert_imageset writes them: for benchmarks and smoke tests.
)";

// The values of a Datum as 8-bit pixels or floats, channel-first, whatever the record's kind.
struct record_values {
  crema::datum_view datum;
  crema::record_shape shape;
  std::vector<float> floats;  // float records, or pixels widened
};

class record_reader {
 public:
  // Decodes `record`; pixels and floats both come out as floats in `values.floats`.
  const record_values& read(const crema::lmdb_record& record) {
    values_.datum = crema::decode_datum(record.value, record.key_text());
    const auto& datum = values_.datum;
    values_.floats.clear();
    if (datum.encoded) {
      const auto image = decoder_.decode(datum.data, record.key_text());
      values_.shape = {image.channels, image.height, image.width};
      values_.floats.resize(image.elements());
      image.copy_planar(std::span<float>(values_.floats));
    } else {
      values_.shape = {static_cast<std::size_t>(datum.channels),
                       static_cast<std::size_t>(datum.height),
                       static_cast<std::size_t>(datum.width)};
      if (datum.float_count != 0) {
        values_.floats.resize(datum.float_count);
        datum.copy_floats(values_.floats);
      } else {
        for (const std::byte pixel : datum.data) {
          values_.floats.push_back(static_cast<float>(static_cast<std::uint8_t>(pixel)));
        }
      }
    }
    return values_;
  }

 private:
  crema::image_decoder decoder_;
  record_values values_;
};

std::vector<std::byte> read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) crema::detail::fail<crema::config_error>("cannot read {}", path.string());
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto* first = reinterpret_cast<const std::byte*>(bytes.data());
  return {first, first + bytes.size()};
}

void write_file(const fs::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  if (!file) crema::detail::fail<crema::config_error>("cannot write {}", path.string());
}

// Bilinear resize of channel-first 8-bit pixels, pixel centres aligned (as OpenCV's
// INTER_LINEAR, without its fixed-point rounding).
std::vector<std::uint8_t> resize(crema::image_view<std::uint8_t> in, std::size_t height,
                                 std::size_t width) {
  std::vector<std::uint8_t> out(in.channels * height * width);
  const double scale_y = static_cast<double>(in.height) / static_cast<double>(height);
  const double scale_x = static_cast<double>(in.width) / static_cast<double>(width);
  const auto source = [](std::size_t to, double scale, std::size_t size) {
    const double at = std::clamp((static_cast<double>(to) + 0.5) * scale - 0.5, 0.0,
                                 static_cast<double>(size - 1));
    const auto low = static_cast<std::size_t>(at);
    return std::pair{low, at - static_cast<double>(low)};
  };
  for (std::size_t y = 0; y < height; ++y) {
    const auto [y0, fy] = source(y, scale_y, in.height);
    const std::size_t y1 = std::min(y0 + 1, in.height - 1);
    for (std::size_t x = 0; x < width; ++x) {
      const auto [x0, fx] = source(x, scale_x, in.width);
      const std::size_t x1 = std::min(x0 + 1, in.width - 1);
      for (std::size_t c = 0; c < in.channels; ++c) {
        const double top = in(c, y0, x0) * (1 - fx) + in(c, y0, x1) * fx;
        const double bottom = in(c, y1, x0) * (1 - fx) + in(c, y1, x1) * fx;
        out[(c * height + y) * width + x] =
            static_cast<std::uint8_t>(std::lround(top * (1 - fy) + bottom * fy));
      }
    }
  }
  return out;
}

// "HxW" of option `what`.
// HxW, both at least 1 and at most 65,535 (what an image and a Datum's int32 fields hold).
std::pair<std::size_t, std::size_t> parse_size(const std::string& text, std::string_view what,
                                               std::string_view form = "HxW, like 256x256") {
  const auto x = text.find('x');
  if (x == std::string::npos) throw usage_error(fmt::format("{} must be {}", what, form));
  const std::size_t height =
      crema::tools::arguments::to_count(text.substr(0, x), fmt::format("{} height", what));
  const std::size_t width =
      crema::tools::arguments::to_count(text.substr(x + 1), fmt::format("{} width", what));
  if (height == 0 || width == 0 || height > 65535 || width > 65535) {
    throw usage_error(
        fmt::format("{} of {} x {}: each side must be 1 to 65535", what, height, width));
  }
  return {height, width};
}

// Set by SIGINT and SIGTERM while convert runs: it stops between records.
volatile std::sig_atomic_t interrupted_by = 0;

extern "C" void note_interruption(int signal) { interrupted_by = signal; }

// Removes the folder it names when the conversion does not finish.
struct partial_output {
  fs::path path;
  bool kept = false;
  ~partial_output() {
    std::error_code ignored;
    if (!kept) fs::remove_all(path, ignored);
  }
};

int convert(const crema::tools::arguments& args) {
  args.allow_positionals(4);
  const fs::path root = args.positional(1, "ROOT");
  const fs::path list = args.positional(2, "LIST");
  const fs::path out = args.positional(3, "OUT");
  std::optional<std::pair<std::size_t, std::size_t>> size;
  if (const auto text = args.option("resize")) size = parse_size(*text, "--resize");
  const bool encoded = args.flag("encoded");

  std::ifstream lines(list);
  if (!lines) crema::detail::fail<crema::config_error>("cannot read the list {}", list.string());
  std::vector<std::pair<std::string, std::int32_t>> entries;
  std::string line;
  for (std::size_t number = 1; std::getline(lines, line); ++number) {
    if (line.empty()) continue;
    const auto space = line.find_last_of(' ');
    if (space == std::string::npos) {
      crema::detail::fail<crema::config_error>("{} line {}: '{}' is not 'path label'",
                                               list.string(), number, line);
    }
    try {
      entries.emplace_back(line.substr(0, space), std::stoi(line.substr(space + 1)));
    } catch (const std::logic_error&) {
      crema::detail::fail<crema::config_error>("{} line {}: '{}' is not a label", list.string(),
                                               number, line.substr(space + 1));
    }
  }
  if (args.flag("shuffle")) {
    crema::sample_rng rng(args.count("seed", 0), 0, 0);
    for (std::size_t i = entries.size(); i > 1; --i) {
      std::swap(entries[i - 1], entries[static_cast<std::size_t>(rng.below(i))]);
    }
  }

  // Written beside OUT and renamed into place once complete: an interrupted, failed or killed
  // conversion leaves nothing where the database should be.
  if (fs::exists(out)) {
    crema::detail::fail<crema::config_error>("{} exists already: convert writes a new database",
                                             out.string());
  }
  partial_output partial{out.parent_path() / (out.filename().string() + ".partial")};
  fs::remove_all(partial.path);  // what a killed conversion left
  interrupted_by = 0;
  std::signal(SIGINT, note_interruption);
  std::signal(SIGTERM, note_interruption);
  try {
    crema::lmdb_writer writer(partial.path);
    crema::image_decoder decoder({.channels = args.flag("gray") ? 1U : 3U});
    std::vector<std::byte> value;
    std::vector<std::byte> reencoded;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (interrupted_by != 0) {
        crema::detail::fail<crema::error>(
            "interrupted by {} after {} of {} files: nothing written to {}",
            interrupted_by == SIGINT ? "SIGINT" : "SIGTERM", i, entries.size(), out.string());
      }
      const auto& [relative, label] = entries[i];
      const std::string key = fmt::format("{:08}_{}", i, relative);
      const std::vector<std::byte> file = read_file(root / relative);
      value.clear();
      if (encoded && !size) {
        (void)decoder.info(file, relative);  // refuses what is not an image
        // As Caffe stores an encoded file: its bytes and label, no dimensions.
        crema::encode_datum({.label = label, .encoded = true, .data = file}, value);
      } else {
        auto image = decoder.decode(file, relative);
        std::vector<std::uint8_t> pixels;
        if (size) {
          pixels = resize(image, size->first, size->second);
        } else {
          pixels.resize(image.elements());
          image.copy_planar(std::span<std::uint8_t>(pixels));
        }
        const auto channels = image.channels;
        const auto height = size ? size->first : image.height;
        const auto width = size ? size->second : image.width;
        const auto planar =
            crema::image_view<std::uint8_t>::planar(pixels.data(), channels, height, width);
        crema::datum_fields fields{.channels = static_cast<std::int32_t>(channels),
                                   .height = static_cast<std::int32_t>(height),
                                   .width = static_cast<std::int32_t>(width),
                                   .label = label};
        if (encoded) {
          if (crema::sniff_image_format(file) == crema::image_format::png) {
            crema::encode_png(planar, reencoded);
          } else {
            crema::encode_jpeg(planar, 95, reencoded);
          }
          fields = {.label = label, .encoded = true, .data = reencoded};
        } else {
          fields.data = std::as_bytes(std::span<const std::uint8_t>(pixels));
        }
        crema::encode_datum(fields, value);
      }
      writer.put(key, value);
      if ((i + 1) % 1000 == 0) {
        // At once, also into a log file (where stdout is block-buffered): a progress line that
        // comes a few thousand files late tells nobody how far the conversion is.
        fmt::print("processed {} files\n", i + 1);
        std::fflush(stdout);
      }
    }
    writer.finish();
  } catch (const crema::error&) {
    if (interrupted_by != 0) throw;  // it says so itself
    std::throw_with_nested(
        crema::error(fmt::format("convert stopped: nothing written to {}", out.string())));
  }
  fs::rename(partial.path, out);
  partial.kept = true;
  fmt::print("converted {} images into {}\n", entries.size(), out.string());
  return 0;
}

int mean(const crema::tools::arguments& args) {
  args.allow_positionals(3);
  const fs::path db = args.positional(1, "DB");
  const fs::path out = args.positional(2, "OUT.binaryproto");
  crema::lmdb_source source(db);
  record_reader reader;
  std::vector<double> sums;
  crema::record_shape shape;
  std::size_t count = 0;
  while (const crema::lmdb_record* record = source.next()) {
    const auto& values = reader.read(*record);
    if (count == 0) {
      shape = values.shape;
      sums.assign(values.floats.size(), 0.0);
    } else if (values.shape != shape) {
      crema::detail::fail<crema::format_error>(
          "record {} is {} x {} x {}, the first was {} x {} x {}: a mean needs one shape",
          record->key_text(), values.shape.channels, values.shape.height, values.shape.width,
          shape.channels, shape.height, shape.width);
    }
    for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += values.floats[i];
    ++count;
  }
  std::vector<float> mean(sums.size());
  for (std::size_t i = 0; i < sums.size(); ++i) {
    mean[i] = static_cast<float>(sums[i] / static_cast<double>(count));
  }
  const std::int64_t dims[] = {1, static_cast<std::int64_t>(shape.channels),
                               static_cast<std::int64_t>(shape.height),
                               static_cast<std::int64_t>(shape.width)};
  std::vector<std::byte> bytes;
  crema::encode_blob_proto(dims, mean, bytes);
  write_file(out, bytes);
  fmt::print("the mean of {} records of {} x {} x {} is in {}\n", count, shape.channels,
             shape.height, shape.width, out.string());
  return 0;
}

int stat(const crema::tools::arguments& args) {
  args.allow_positionals(2);
  crema::lmdb_source source(args.positional(1, "DB"));
  record_reader reader;
  std::size_t count = 0;
  std::size_t encoded = 0;
  std::map<std::int32_t, std::size_t> labels;
  std::map<std::string, std::size_t> shapes;
  std::vector<double> channel_sums;
  std::vector<std::size_t> channel_values;
  while (const crema::lmdb_record* record = source.next()) {
    const auto& values = reader.read(*record);
    ++count;
    encoded += values.datum.encoded ? 1 : 0;
    ++labels[values.datum.label];
    const auto& shape = values.shape;
    ++shapes[fmt::format("{}x{}x{}", shape.channels, shape.height, shape.width)];
    if (channel_sums.size() < shape.channels) {
      channel_sums.resize(shape.channels);
      channel_values.resize(shape.channels);
    }
    const std::size_t plane = shape.height * shape.width;
    for (std::size_t c = 0; c < shape.channels; ++c) {
      double sum = 0;
      for (std::size_t i = 0; i < plane; ++i) sum += values.floats[c * plane + i];
      channel_sums[c] += sum;
      channel_values[c] += plane;
    }
  }
  std::vector<double> channel_mean(channel_sums.size());
  for (std::size_t c = 0; c < channel_sums.size(); ++c) {
    channel_mean[c] =
        channel_values[c] != 0 ? channel_sums[c] / static_cast<double>(channel_values[c]) : 0.0;
  }
  if (args.flag("json")) {
    std::vector<std::string> label_items;
    for (const auto& [label, n] : labels)
      label_items.push_back(fmt::format("\"{}\": {}", label, n));
    std::vector<std::string> shape_items;
    for (const auto& [shape, n] : shapes)
      shape_items.push_back(fmt::format("\"{}\": {}", shape, n));
    std::vector<std::string> means;
    for (const double value : channel_mean) means.push_back(fmt::format("{:.17g}", value));
    fmt::print(
        "{{\"count\": {}, \"labels\": {{{}}}, \"shapes\": {{{}}}, \"encoded\": {}, "
        "\"channel_mean\": [{}]}}\n",
        count, fmt::join(label_items, ", "), fmt::join(shape_items, ", "), encoded,
        fmt::join(means, ", "));
    return 0;
  }
  fmt::print("{}: {} records, {} encoded\n", source.path().string(), count, encoded);
  for (const auto& [shape, n] : shapes) fmt::print("  shape {}: {}\n", shape, n);
  for (const auto& [label, n] : labels) fmt::print("  label {}: {}\n", label, n);
  for (std::size_t c = 0; c < channel_mean.size(); ++c) {
    fmt::print("  channel {} mean: {:.4f}\n", c, channel_mean[c]);
  }
  return 0;
}

int dump(const crema::tools::arguments& args) {
  args.allow_positionals(3);
  crema::lmdb_source source(args.positional(1, "DB"));
  const std::size_t limit = crema::tools::arguments::to_count(args.positional(2, "N"), "N");
  crema::image_decoder decoder;
  for (std::size_t i = 0; i < limit; ++i) {
    const crema::lmdb_record* record = source.next();
    if (record == nullptr) break;
    const auto datum = crema::decode_datum(record->value, record->key_text());
    crema::record_shape shape{static_cast<std::size_t>(datum.channels),
                              static_cast<std::size_t>(datum.height),
                              static_cast<std::size_t>(datum.width)};
    if (datum.encoded) {
      const auto info = decoder.info(datum.data, record->key_text());
      shape = {info.channels, info.height, info.width};
    }
    fmt::print("{}  {}x{}x{}  label {}{}\n", record->key_text(), shape.channels, shape.height,
               shape.width, datum.label,
               datum.encoded ? "  encoded" : (datum.float_count != 0 ? "  floats" : ""));
  }
  return 0;
}

int synth(const crema::tools::arguments& args) {
  args.allow_positionals(2);
  const fs::path out = args.positional(1, "OUT");
  const std::size_t count = args.count("count", 0);
  const auto shape_text = args.option("shape");
  if (count == 0 || !shape_text) throw usage_error("synth needs --count N and --shape CxHxW");
  const auto x = shape_text->find('x');
  if (x == std::string::npos) throw usage_error("--shape must be CxHxW, like 3x32x32");
  const std::size_t channels =
      crema::tools::arguments::to_count(shape_text->substr(0, x), "--shape channels");
  if (channels == 0 || channels > 4) {
    throw usage_error(fmt::format("--shape of {} channels: 1 to 4", channels));
  }
  const auto [height, width] =
      parse_size(shape_text->substr(x + 1), "--shape", "CxHxW, like 3x32x32");
  const std::size_t labels = std::max<std::size_t>(1, args.count("labels", 1000));
  crema::lmdb_writer writer(out);
  crema::sample_rng rng(args.count("seed", 0), 0, 0);
  std::vector<std::byte> pixels(channels * height * width);
  std::vector<std::byte> value;
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t p = 0; p < pixels.size(); p += 8) {
      const std::uint64_t word = rng();
      for (std::size_t b = 0; b < 8 && p + b < pixels.size(); ++b) {
        pixels[p + b] = static_cast<std::byte>(word >> (8 * b));
      }
    }
    value.clear();
    crema::encode_datum({.channels = static_cast<std::int32_t>(channels),
                         .height = static_cast<std::int32_t>(height),
                         .width = static_cast<std::int32_t>(width),
                         .label = static_cast<std::int32_t>(i % labels),
                         .data = pixels},
                        value);
    writer.put(fmt::format("{:08}_synthetic{}.png", i, i), value);
  }
  writer.finish();
  fmt::print("wrote {} records of {} x {} x {} into {}\n", count, channels, height, width,
             out.string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return crema::tools::run_tool("crema-lmdb", usage, argc, argv, [&] {
    if (argc < 2) throw usage_error("missing a command");
    const std::string_view command = argv[1];
    const crema::tools::arguments args(argc, argv, 1, {"encoded", "gray", "shuffle", "json"},
                                       {"resize", "seed", "count", "shape", "labels"});
    if (command == "convert") return convert(args);
    if (command == "mean") return mean(args);
    if (command == "stat") return stat(args);
    if (command == "dump") return dump(args);
    if (command == "synth") return synth(args);
    throw usage_error(fmt::format("unknown command '{}'", command));
  });
}
