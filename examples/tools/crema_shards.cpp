// crema-shards: writes a folder or list of images, or a Caffe LMDB, as WebDataset tar shards or
// TFRecord files, and says what a set of shards holds or whether every byte of it can be read.

#include "cli.hpp"

#include <crema/io/caffe/datum.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/image/image_list_source.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/shard_index.hpp>
#include <crema/io/shards/shard_list.hpp>
#include <crema/io/shards/tar.hpp>
#include <crema/io/shards/tfrecord.hpp>
#include <crema/io/shards/tfrecord_source.hpp>
#include <crema/io/shards/webdataset.hpp>
#if defined(CREMA_SHARDS_LMDB)
#include <crema/io/lmdb/lmdb_source.hpp>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
using crema::tools::usage_error;

constexpr std::string_view usage = R"(usage:
  crema-shards write ROOT OUT [--list FILE | --lmdb] [--format tar|tfrecord] [--prefix NAME]
                     [--shard-samples N] [--shard-bytes B]
      Writes the images of ROOT (one folder per class, as torchvision's ImageFolder, classes
      numbered in sorted order; or the "relative/path label" lines of FILE under ROOT; or, with
      --lmdb, the Datums of the Caffe LMDB ROOT, keyed by their keys: an encoded Datum's image as
      it is, a Datum of pixels, Caffe's BGR planes, as a PNG of the same picture) as shards
      OUT/NAME-000000.tar, ... (NAME "shard" by default), in the order read. As WebDataset tar
      shards (the default) each sample is the image (its extension lowercased) and a `cls`
      member holding its class, keyed by its path without the extension (dots of the file name
      as '_'); as TFRecord files (NAME-000000.tfrecord) each record is a tf.train.Example of
      image/encoded, image/class/label, image/format and image/filename. A shard ends after N
      samples (default 1000) or once it holds B bytes (default 1 GiB), whichever comes first.
      Prints the brace pattern that names the shards.
  crema-shards stat PATTERN [--json]
      Shards (a brace pattern, a glob or `@LIST`: a file naming them; .tfrecord files read as
      TFRecord, the rest as tar), samples, classes, bytes, and how many samples hold each
      extension (each feature, for TFRecord).
  crema-shards verify PATTERN
      Reads every header and every member (every record, its CRCs checked and its Example
      decoded) of every shard; exits 1 naming the shard and the byte offset of the first fault.
  crema-shards index PATTERN [--out DIR]
      Writes each shard's index file, SHARD.idx beside it (or in DIR), in DALI's formats (those
      of its wds2idx and tfrecord2idx, which its readers take): a source given them opens
      without reading the shards' headers.
)";

// The shards a command line names: a pattern, or @FILE for a list of them.
std::vector<std::string> shards_named(const std::string& pattern) {
  if (pattern.starts_with("@")) return crema::read_shard_list(pattern.substr(1));
  return crema::shard_paths(pattern);
}

// Whether a shard is a TFRecord file (by its name), not a tar.
bool is_tfrecord(std::string_view path) {
  return path.ends_with(".tfrecord") || path.ends_with(".tfrecords");
}

// A WebDataset key from an image's relative path: the extension off, the file name's other dots
// made underscores (a key's file name may hold none).
std::string key_of(std::string_view relative) {
  const std::size_t slash = relative.rfind('/');
  const std::size_t file = slash == std::string_view::npos ? 0 : slash + 1;
  const std::size_t dot = relative.rfind('.');
  std::string key(
      relative.substr(0, dot != std::string_view::npos && dot > file ? dot : relative.size()));
  std::replace(key.begin() + static_cast<std::ptrdiff_t>(file), key.end(), '.', '_');
  return key;
}

std::string extension_of(std::string_view relative) {
  const std::size_t slash = relative.rfind('/');
  const std::size_t dot = relative.rfind('.');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) {
    return "bin";
  }
  std::string extension(relative.substr(dot + 1));
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

// One image to write: its name (a path, or an LMDB's key), bytes and class.
struct image_item {
  std::string name;  // what the key and the extension come from
  std::string extension;
  std::span<const std::byte> bytes;
  std::int64_t label = 0;
  std::string origin;  // what errors name it by
};

// The images of an image folder or list, read file by file.
template <class Source>
class file_items {
 public:
  explicit file_items(Source& source) : source_(source) {}
  const image_item* next() {
    const crema::image_file* file = source_.next();
    if (file == nullptr) return nullptr;
    item_.name = file->relative;
    item_.extension = extension_of(file->relative);
    item_.bytes = reader_.read(*file);
    item_.label = file->label;
    item_.origin = file->path();
    return &item_;
  }

 private:
  Source& source_;
  crema::image_file_reader reader_;
  image_item item_;
};

#if defined(CREMA_SHARDS_LMDB)
// The images of a Caffe LMDB's Datums, in key order: an encoded one's bytes as they are (jpg or
// png by their signature), one of pixels encoded as a PNG.
class lmdb_items {
 public:
  explicit lmdb_items(const fs::path& path) : source_(path) {}
  const image_item* next() {
    const crema::lmdb_record* record = source_.next();
    if (record == nullptr) return nullptr;
    const std::string key(record->key_text());
    const std::string origin = fmt::format("{}:{}", source_.key(), key);
    const crema::datum_view datum = crema::decode_datum(record->value, origin);
    if (datum.encoded) {
      const auto signature = [&](std::initializer_list<unsigned> bytes) {
        return datum.data.size() >= bytes.size() &&
               std::equal(
                   bytes.begin(), bytes.end(), datum.data.begin(),
                   [](unsigned a, std::byte b) { return a == std::to_integer<unsigned>(b); });
      };
      const char* extension = signature({0xFF, 0xD8, 0xFF})      ? "jpg"
                              : signature({0x89, 'P', 'N', 'G'}) ? "png"
                                                                 : nullptr;
      if (extension == nullptr) {
        throw crema::format_error(
            fmt::format("{}: an encoded Datum that is neither a JPEG nor a PNG", origin));
      }
      item_ = {key, extension, datum.data, datum.label, origin};
      return &item_;
    }
    if (datum.data.empty() || (datum.channels != 1 && datum.channels != 3)) {
      throw crema::format_error(fmt::format(
          "{}: a Datum of {} channels{}; crema-shards writes images of 1 or 3 channels of bytes",
          origin, datum.channels, datum.data.empty() ? " of floats" : ""));
    }
    // Caffe keeps colour as B, G, R planes, which encode_png takes as they are.
    crema::encode_png(
        crema::image_view<std::uint8_t>::planar(
            reinterpret_cast<const std::uint8_t*>(datum.data.data()),
            static_cast<std::size_t>(datum.channels), static_cast<std::size_t>(datum.height),
            static_cast<std::size_t>(datum.width)),
        png_, crema::channel_order::bgr);
    item_ = {key, "png", png_, datum.label, origin};
    return &item_;
  }

 private:
  crema::lmdb_source source_;
  std::vector<std::byte> png_;
  image_item item_;
};
#endif

// As write_shards, each image a tf.train.Example in a TFRecord file.
template <class Items>
int write_tfrecords(Items& items, const fs::path& out, const std::string& prefix,
                    std::size_t per_shard, std::size_t most_bytes) {
  fs::create_directories(out);
  std::optional<crema::tfrecord_writer> shard;
  std::size_t shards = 0;
  std::size_t in_shard = 0;
  std::size_t samples = 0;
  while (const image_item* item = items.next()) {
    if (!shard || in_shard == per_shard || shard->bytes() >= most_bytes) {
      if (shard) shard->finish();
      shard.emplace((out / fmt::format("{}-{:06}.tfrecord", prefix, shards++)).string());
      in_shard = 0;
    }
    const std::string format = item->extension == "jpg" ? "jpeg" : item->extension;
    shard->write(crema::tf_example_builder()
                     .add_bytes("image/encoded", item->bytes)
                     .add_int64("image/class/label", item->label)
                     .add_bytes("image/format", std::as_bytes(std::span(format)))
                     .add_bytes("image/filename", std::as_bytes(std::span(item->name)))
                     .bytes());
    ++in_shard;
    ++samples;
  }
  if (!shard) throw crema::config_error("crema-shards: no image to write");
  shard->finish();
  fmt::print("wrote {} samples in {} shards: {}\n", samples, shards,
             (out / fmt::format("{}-{{000000..{:06}}}.tfrecord", prefix, shards - 1)).string());
  return 0;
}

template <class Items>
int write_shards(const crema::tools::arguments& args, Items& items, const fs::path& out) {
  const std::string prefix = args.option("prefix").value_or("shard");
  const std::size_t per_shard = args.count("shard-samples", 1000);
  const std::size_t most_bytes = args.count("shard-bytes", std::size_t{1} << 30);
  if (per_shard == 0 || most_bytes == 0) {
    throw usage_error("--shard-samples and --shard-bytes: at least 1");
  }
  const std::string format = args.option("format").value_or("tar");
  if (format != "tar" && format != "tfrecord") {
    throw usage_error(fmt::format("--format takes tar or tfrecord, not '{}'", format));
  }
  if (format == "tfrecord") return write_tfrecords(items, out, prefix, per_shard, most_bytes);
  fs::create_directories(out);
  std::optional<crema::tar_writer> shard;
  std::size_t shards = 0;
  std::size_t in_shard = 0;
  std::size_t samples = 0;
  std::set<std::string> keys;
  while (const image_item* item = items.next()) {
    if (!shard || in_shard == per_shard || shard->bytes() >= most_bytes) {
      if (shard) shard->finish();
      shard.emplace((out / fmt::format("{}-{:06}.tar", prefix, shards++)).string());
      in_shard = 0;
    }
    const std::string key = key_of(item->name);
    if (!keys.insert(key).second) {
      throw crema::config_error(fmt::format(
          "crema-shards: {} and an earlier image share the key {} (their names differ only "
          "after the first dot)",
          item->origin, key));
    }
    shard->add(key + "." + item->extension, item->bytes);
    const std::string label = std::to_string(item->label);
    shard->add(key + ".cls", std::as_bytes(std::span(label)));
    ++in_shard;
    ++samples;
  }
  if (!shard) throw crema::config_error("crema-shards: no image to write");
  shard->finish();
  const std::string last = fmt::format("{:06}", shards - 1);
  fmt::print("wrote {} samples in {} shards: {}\n", samples, shards,
             (out / fmt::format("{}-{{000000..{}}}.tar", prefix, last)).string());
  return 0;
}

int stat_shards(const crema::tools::arguments& args, const std::string& pattern) {
  const auto shards = shards_named(pattern);
  std::size_t samples = 0;
  std::uint64_t bytes = 0;
  std::set<std::int64_t> classes;
  std::size_t without_class = 0;
  std::map<std::string, std::size_t> extensions;
  std::vector<std::byte> text;
  for (const std::string& path : shards) {
    const crema::shard_file file(path);
    bytes += file.size();
    if (is_tfrecord(path)) {
      for (const crema::tfrecord_location& record : crema::index_tfrecord(file)) {
        ++samples;
        crema::read_tfrecord(file, record, text);
        const crema::tf_example example(text, path);
        for (const auto& feature : example.features()) ++extensions[std::string(feature.name)];
        const auto* label = example.find("image/class/label");
        if (label != nullptr && label->kind == crema::tf_feature_kind::int64s &&
            !example.int64s("image/class/label").empty()) {
          classes.insert(example.int64s("image/class/label").front());
        } else {
          ++without_class;
        }
      }
      continue;
    }
    for (const crema::webdataset_entry& entry : crema::index_webdataset(file)) {
      ++samples;
      bool has_class = false;
      for (const crema::webdataset_member& member : entry.members) {
        ++extensions[member.extension];
        if (member.extension != "cls" || member.size > 32) continue;
        text.resize(static_cast<std::size_t>(member.size));
        file.read_at(member.offset, text);
        const std::string digits(reinterpret_cast<const char*>(text.data()), text.size());
        try {
          classes.insert(std::stoll(digits));
          has_class = true;
        } catch (const std::exception&) {  // counted below
        }
      }
      without_class += has_class ? 0 : 1;
    }
  }
  if (args.flag("json")) {
    std::string by_extension;
    for (const auto& [extension, count] : extensions) {
      by_extension +=
          fmt::format("{}\"{}\": {}", by_extension.empty() ? "" : ", ", extension, count);
    }
    fmt::print(
        "{{\"shards\": {}, \"samples\": {}, \"classes\": {}, \"without_class\": {}, \"bytes\": {}, "
        "\"extensions\": {{{}}}}}\n",
        shards.size(), samples, classes.size(), without_class, bytes, by_extension);
    return 0;
  }
  fmt::print("{} shards, {} samples, {} classes, {} bytes\n", shards.size(), samples,
             classes.size(), bytes);
  if (without_class != 0) fmt::print("{} samples without a class number\n", without_class);
  for (const auto& [extension, count] : extensions) fmt::print("  {}: {}\n", extension, count);
  return 0;
}

int verify_shards(const std::string& pattern) {
  const auto shards = shards_named(pattern);
  std::size_t members = 0;
  std::uint64_t bytes = 0;
  std::vector<std::byte> data;
  for (const std::string& path : shards) {
    const crema::shard_file file(path);
    if (is_tfrecord(path)) {
      for (const crema::tfrecord_location& record : crema::index_tfrecord(file)) {
        crema::read_tfrecord(file, record, data);
        (void)crema::tf_example(
            data, fmt::format("{}@{}", path, record.offset - crema::detail::tfrecord_header));
        ++members;
        bytes += record.size;
      }
      continue;
    }
    crema::tar_scanner scanner(file);
    while (const auto member = scanner.next()) {
      data.resize(static_cast<std::size_t>(std::min<std::uint64_t>(member->size, 1 << 20)));
      for (std::uint64_t at = 0; at < member->size; at += data.size()) {
        const auto count =
            static_cast<std::size_t>(std::min<std::uint64_t>(data.size(), member->size - at));
        file.read_at(member->offset + at, std::span(data).first(count));
      }
      ++members;
      bytes += member->size;
    }
  }
  fmt::print("verified {} shards: {} members, {} bytes of data\n", shards.size(), members, bytes);
  return 0;
}

int index_shards(const crema::tools::arguments& args, const std::string& pattern) {
  const auto shards = shards_named(pattern);
  const std::optional<std::string> folder = args.option("out");
  std::size_t samples = 0;
  for (const std::string& path : shards) {
    const crema::shard_file file(path);
    std::string text;
    if (is_tfrecord(path)) {
      const auto records = crema::index_tfrecord(file);
      samples += records.size();
      text = crema::tfrecord_index_text(records);
    } else {
      const auto entries = crema::index_webdataset(file);
      samples += entries.size();
      text = crema::webdataset_index_text(entries);
    }
    const fs::path index = folder
                               ? fs::path(*folder) / (fs::path(path).filename().string() + ".idx")
                               : fs::path(path + ".idx");
    // Written aside, then renamed: a reader never sees half an index.
    const fs::path partial = index.string() + ".partial";
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      out << text;
      out.close();
      if (!out) {
        throw crema::io_error(errno,
                              fmt::format("crema-shards: cannot write {}", partial.string()));
      }
    }
    fs::rename(partial, index);
  }
  fmt::print("indexed {} shards: {} samples\n", shards.size(), samples);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return crema::tools::run_tool("crema-shards", usage, argc, argv, [&] {
    const crema::tools::arguments args(
        argc, argv, 1, {"json", "lmdb"},
        {"list", "format", "prefix", "shard-samples", "shard-bytes", "out"});
    const std::string& command = args.positional(0, "a command (write, stat, verify, index)");
    if (command == "write") {
      args.allow_positionals(3);
      const fs::path root = args.positional(1, "ROOT");
      const fs::path out = args.positional(2, "OUT");
      if (args.flag("lmdb")) {
        if (args.option("list")) throw usage_error("--list or --lmdb: one kind of input");
#if defined(CREMA_SHARDS_LMDB)
        lmdb_items items(root);
        return write_shards(args, items, out);
#else
        throw usage_error("--lmdb: this crema-shards was built without crema::lmdb");
#endif
      }
      if (const auto list = args.option("list")) {
        crema::image_list_source source(*list, root);
        file_items items(source);
        return write_shards(args, items, out);
      }
      crema::image_folder_source source(root);
      file_items items(source);
      return write_shards(args, items, out);
    }
    if (command == "stat") {
      args.allow_positionals(2);
      return stat_shards(args, args.positional(1, "PATTERN"));
    }
    if (command == "verify") {
      args.allow_positionals(2);
      return verify_shards(args.positional(1, "PATTERN"));
    }
    if (command == "index") {
      args.allow_positionals(2);
      return index_shards(args, args.positional(1, "PATTERN"));
    }
    throw usage_error(fmt::format("unknown command '{}'", command));
  });
}
