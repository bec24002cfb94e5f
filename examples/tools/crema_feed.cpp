// crema-feed: reads a Caffe LMDB through crema's whole data layer (decode, transform, batch) as a
// training loop would, and says how fast, beside a raw cursor scan of the same database measured
// in the same run; or a folder or list of JPEGs, or WebDataset tar shards of them, through
// ImageNet-style input, beside a loop that only decodes the same images on the same threads.

#include "cli.hpp"
#include "common/machine.hpp"

#include <crema/io/caffe/blob_proto.hpp>
#if defined(CREMA_FEED_HTTP)
#include <crema/io/http/http_storage.hpp>
#endif
#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/image/image_list_source.hpp>
#include <crema/io/image/image_window_decoder.hpp>
#include <crema/io/lmdb/lmdb_environment.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/shard_list.hpp>
#include <crema/io/shards/tfrecord_source.hpp>
#include <crema/io/shards/webdataset_source.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using crema::tools::usage_error;

constexpr std::string_view usage = R"(usage:
  crema-feed DB --batch B [--crop S] [--mirror] [--mean-file F | --mean-values a,b,c]
             [--scale x] [--producers P] [--threads T] [--epochs E] [--seed S] [--ordered]
             [--checksum] [--json]
      Reads DB (a Caffe LMDB) E times (default 1) through decode, crop (random), mirror (random),
      mean, scale and batching into host batches of B, as a training loop would, on P producer
      coroutines (default 2) over T threads (default P). Prints samples/s, the share of the time
      the consumer waited for a batch, and a raw cursor scan of DB measured in the same run; for
      a DB of encoded images (decoded only in their crop), also a loop that reads and fully
      decodes them on T threads (decode_only_samples_per_s in --json). With
      --checksum (or --ordered), a checksum of every batch's bytes in delivery order, which the
      consumer computes (so it reads every byte, as a training loop does not): with --ordered
      the same seed gives the same checksum for every P and T. --json prints one JSON object.
  crema-feed (--images ROOT [--list FILE] | --shards PATTERN) --batch B
             (--random-resized-crop S | --resize S --center-crop C) [--mirror]
             [--normalize m1,m2,m3/s1,s2,s3] [--exact | --reduced-detail] [--producers P]
             [--threads T]
             [--epochs E] [--seed S] [--dump FILE] [--json] [--shard-blocks N] [--http-cache M]
      Reads the JPEGs of ROOT (one folder per class, as torchvision's ImageFolder; or the
      `path label` lines of FILE under ROOT, as Caffe's ImageData) E times through decoding
      only the window each sample needs, RandomResizedCrop(S) or Resize(S) + CenterCrop(C), a
      random flip, and ToTensor + Normalize (mean / std per channel, 0 / 1 by default) into float
      batches of B x 3 x S x S, on P producers over T threads. --exact decodes at full size (no
      DCT scaling): torchvision's values. --reduced-detail decodes a window one DCT scale
      smaller while that keeps 3/4 of the output's rows and columns (faster, less detail; its
      difference from Pillow's values is in docs/datasets.md). Prints samples/s beside a loop that reads and fully
      decodes the same files with libjpeg-turbo on T threads, in the same run
      (decode_only_samples_per_s in --json). --dump writes every batch to FILE in order (the
      pipeline ordered): its samples as float32, then its labels as float32, batch after batch;
      the same seed gives the same file for every P and T, and the Python package's
      crema.Loader gives the same bytes (python/tests check it).
      --shards reads WebDataset tar shards instead (`train-{000000..000127}.tar`, or a glob):
      each sample's jpg/jpeg/png/webp member and its cls; `crema-shards write` makes them from
      a folder. The decode-only loop then reads each sample's image from its shard. Shards may
      be http://, https:// or s3:// URLs (crema::http; S3 signed with the AWS_* environment);
      --http-cache M keeps M MiB of them in memory, in chunks of 8 MiB read whole.
      --shard-blocks N shuffles shard by shard: the shards in a keyed order, read N at a time,
      the samples of those N in a keyed order of their own (what a cache of N shards holds).
)";

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// Runs `work(t)` on threads t = 0 .. threads - 1 at once: the seconds they took together.
template <class Work>
double seconds_on_threads(std::size_t threads, const Work& work) {
  const auto start = clock_type::now();
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) workers.emplace_back([&work, t] { work(t); });
  for (std::thread& worker : workers) worker.join();
  return seconds_since(start);
}

// A read transaction and a cursor over a database's records, as a plain LMDB loop makes them.
class raw_cursor {
 public:
  raw_cursor(MDB_env* env, const std::filesystem::path& path) {
    MDB_dbi dbi = 0;
    int status = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn_);
    if (status == MDB_SUCCESS) status = mdb_dbi_open(txn_, nullptr, 0, &dbi);
    if (status == MDB_SUCCESS) status = mdb_cursor_open(txn_, dbi, &cursor_);
    if (status != MDB_SUCCESS) {
      close();
      crema::detail::lmdb_check(status, "raw scan: cannot read", path);
    }
  }
  raw_cursor(const raw_cursor&) = delete;
  raw_cursor& operator=(const raw_cursor&) = delete;
  ~raw_cursor() { close(); }

  // Calls `visit(value)` for every record's value, in key order.
  template <class Visit>
  void for_each(Visit&& visit) {
    MDB_val key{};
    MDB_val value{};
    for (int got = mdb_cursor_get(cursor_, &key, &value, MDB_FIRST); got == MDB_SUCCESS;
         got = mdb_cursor_get(cursor_, &key, &value, MDB_NEXT)) {
      visit(
          std::span<const std::byte>(static_cast<const std::byte*>(value.mv_data), value.mv_size));
    }
  }

 private:
  void close() noexcept {
    if (cursor_ != nullptr) mdb_cursor_close(cursor_);
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    cursor_ = nullptr;
    txn_ = nullptr;
  }

  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
};

// Every record's value copied out of the map, as the least any reader does: records per second.
double raw_cursor_scan(const std::filesystem::path& path, std::size_t& records) {
  // The process's environment for the database: LMDB allows one per database and process.
  const auto env =
      crema::lmdb_environment::open(path, crema::lmdb_environment::access::read, "raw scan");
  raw_cursor cursor(env->get(), path);
  std::vector<std::byte> copy;
  records = 0;
  const auto start = clock_type::now();
  cursor.for_each([&](std::span<const std::byte> value) {
    copy.assign(value.begin(), value.end());
    ++records;
  });
  return static_cast<double>(records) / seconds_since(start);
}

// The baseline of a DB of encoded images: T threads that each read the database with a cursor of
// their own and fully decode every T-th record's image with TurboJPEG (BGR, as Caffe decodes),
// `epochs` times, nothing else: images per second.
double decode_only_records(const std::filesystem::path& path, std::size_t threads,
                           std::size_t epochs) {
  const auto env =
      crema::lmdb_environment::open(path, crema::lmdb_environment::access::read, "decode only");
  std::atomic<std::size_t> decoded{0};
  std::atomic<std::size_t> failures{0};
  const double seconds = seconds_on_threads(threads, [&](std::size_t t) {
    try {
      crema::image_decoder decoder;
      raw_cursor cursor(env->get(), path);
      for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
        std::size_t index = 0;
        cursor.for_each([&](std::span<const std::byte> value) {
          if (index++ % threads != t) return;
          const crema::datum_view datum = crema::decode_datum(value, "decode only");
          (void)decoder.decode(datum.data, "decode only");
          decoded.fetch_add(1, std::memory_order_relaxed);
        });
      }
    } catch (const crema::error&) {
      failures.fetch_add(1);
    }
  });
  if (failures.load() != 0) {
    throw crema::format_error(
        fmt::format("decode-only loop: {} of the threads over {} could not decode a record",
                    failures.load(), path.string()));
  }
  return static_cast<double>(decoded.load()) / seconds;
}

// A hash of bytes chained over calls (in delivery order): four independent lanes of eight bytes,
// so that it keeps up with memory; combined at the end.
class checksum {
 public:
  void add(const void* data, std::size_t size) noexcept {
    const auto* bytes = static_cast<const unsigned char*>(data);
    std::size_t i = 0;
    for (; i + 32 <= size; i += 32) {
      for (std::size_t lane = 0; lane < 4; ++lane) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes + i + lane * 8, 8);
        lanes_[lane] = (lanes_[lane] ^ word) * prime;
      }
    }
    for (; i < size; ++i) lanes_[0] = (lanes_[0] ^ bytes[i]) * prime;
    lanes_[1] = (lanes_[1] ^ size) * prime;  // where each call ended counts too
  }
  [[nodiscard]] std::uint64_t value() const noexcept {
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (const std::uint64_t lane : lanes_) hash = (hash ^ lane ^ (lane >> 29)) * prime;
    return hash;
  }

 private:
  static constexpr std::uint64_t prime = 0x100000001b3ULL;
  std::uint64_t lanes_[4] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9e3779b97f4a7c15ULL,
                             0xd1b54a32d192ed03ULL};
};

std::vector<float> parse_values(const std::string& text) {
  std::vector<float> values;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    values.push_back(static_cast<float>(crema::tools::arguments::to_real(item, "--mean-values")));
  }
  return values;
}

int feed(const crema::tools::arguments& args) {
  args.allow_positionals(1);
  const std::filesystem::path path = args.positional(0, "DB");
  const std::size_t batch_size = args.count("batch", 0);
  if (batch_size == 0) throw usage_error("--batch must be given, at least 1");
  const std::size_t producers = args.count("producers", 2);
  const std::size_t threads = args.count("threads", producers);
  const std::size_t epochs = args.count("epochs", 1);
  const bool json = args.flag("json");
  // Hashing every byte on the consumer is work a training loop does not do: only when asked.
  const bool hashed = args.flag("checksum") || args.flag("ordered");
  if (epochs == 0) throw usage_error("--epochs must be at least 1");

  if (producers == 0 || threads == 0) throw usage_error("--producers and --threads: at least 1");
  crema::caffe_transform_options options;
  options.crop_size = args.count("crop", 0);
  options.mirror = args.flag("mirror");
  options.scale = static_cast<float>(args.real("scale", 1.0));
  if (!std::isfinite(options.scale)) {
    throw usage_error(fmt::format("--scale must be a finite number, not {}", options.scale));
  }
  if (const auto file = args.option("mean-file")) {
    options.mean_file = std::make_shared<const crema::blob>(crema::read_blob_proto(*file));
  }
  if (const auto values = args.option("mean-values")) options.mean_values = parse_values(*values);
  const crema::caffe_transform transform(options);

  // Encoded records are decoded only in their crop, in BGR as Caffe decodes them.
  crema::image_window_decoder decoder({.channels = 0, .order = crema::channel_order::bgr});
  crema::record_shape input;
  std::size_t records = 0;
  bool encoded = false;
  {
    crema::lmdb_source first(path);
    records = first.records();
    const crema::lmdb_record* record = first.next();
    input = crema::datum_shape(record->value, record->key_text(), decoder);
    encoded = crema::decode_datum(record->value, record->key_text()).encoded;
  }
  // What the first record says makes some options out of range: refused before anything runs.
  if (options.crop_size > input.height || options.crop_size > input.width) {
    throw usage_error(fmt::format("--crop {} is larger than the records' {} x {}",
                                  options.crop_size, input.height, input.width));
  }
  if (options.mean_values.size() > 1 && options.mean_values.size() != input.channels) {
    throw usage_error(fmt::format("--mean-values: {} values for records of {} channels",
                                  options.mean_values.size(), input.channels));
  }
  // The database read once before either is timed: both measure a warm page cache.
  std::size_t scanned = 0;
  (void)raw_cursor_scan(path, scanned);
  const double raw_per_s = raw_cursor_scan(path, scanned);
  // Encoded images: a loop that only decodes them, on as many threads, is the baseline too.
  const double decode_per_s = encoded ? decode_only_records(path, threads, epochs) : 0.0;

  crema::caffe_batcher batcher(input, transform, crema::make_host_batch<float>{}, decoder);
  const std::size_t elements = batcher.shape().elements();
  crema::double_buffered_pipeline pipe{
      crema::lmdb_source(path),
      batcher,
      {.batch_size = batch_size,
       .producers = producers,
       .threads = threads,
       .mode = epochs == 1 ? crema::pipeline_mode::single_pass : crema::pipeline_mode::repeat,
       .ordered = args.flag("ordered"),
       .seed = args.count("seed", 0)}};
  const std::size_t target = records * epochs;
  const bool progress = !json && ::isatty(STDERR_FILENO) != 0;
  checksum hash;
  std::size_t samples = 0;
  double starved = 0;
  auto consumer = pipe.consumer(0);
  const auto start = clock_type::now();
  auto last_report = start;
  while (samples < target) {
    const auto asked = clock_type::now();
    auto batch = consumer.pull();
    starved += seconds_since(asked);
    if (!batch) break;
    const std::size_t size = std::min(batch->size(), target - samples);
    if (hashed) {
      hash.add(batch->data.data(), size * elements * sizeof(float));
      hash.add(batch->labels.data(), size * sizeof(float));
    }
    samples += size;
    if (progress && clock_type::now() - last_report > std::chrono::milliseconds(200)) {
      last_report = clock_type::now();
      fmt::print(stderr, "\r{:5.1f}%  {} samples  {:.0f} samples/s   ",
                 100.0 * static_cast<double>(samples) / static_cast<double>(target), samples,
                 static_cast<double>(samples) / seconds_since(start));
    }
  }
  const double seconds = seconds_since(start);
  if (progress) fmt::print(stderr, "\r{:60}\r", "");
  const double per_s = static_cast<double>(samples) / seconds;
  const double starved_fraction = starved / seconds;
  const auto out = batcher.shape();
  if (json) {
    fmt::print(
        "{{\"db\": \"{}\", \"records\": {}, \"samples\": {}, \"seconds\": {:.6f}, "
        "\"samples_per_s\": {:.1f}, \"raw_scan_samples_per_s\": {:.1f}, \"ratio_to_raw_scan\": "
        "{:.4f}, {}\"starved_fraction\": {:.4f}, \"checksum\": {}, \"batch\": {}, "
        "\"shape\": [{}, {}, {}], \"producers\": {}, \"threads\": {}, \"machine\": \"{}\"}}\n",
        path.string(), records, samples, seconds, per_s, raw_per_s, per_s / raw_per_s,
        encoded ? fmt::format("\"decode_only_samples_per_s\": {:.1f}, \"ratio_to_decode_only\": "
                              "{:.4f}, ",
                              decode_per_s, per_s / decode_per_s)
                : std::string(),
        starved_fraction, hashed ? fmt::format("\"{:016x}\"", hash.value()) : "null", batch_size,
        out.channels, out.height, out.width, producers, threads,
        crema::bench::machine_description());
    return 0;
  }
  fmt::print("crema-feed: {} ({} records of {} x {} x {}), batches of {} x {} x {} x {}\n",
             path.string(), records, input.channels, input.height, input.width, batch_size,
             out.channels, out.height, out.width);
  fmt::print("  machine: {}\n", crema::bench::machine_description());
  fmt::print(
      "  pipeline: {:.0f} samples/s ({} producers on {} threads); the consumer waited {:.1f}% "
      "of the time\n",
      per_s, producers, threads, 100.0 * starved_fraction);
  fmt::print("  raw cursor scan: {:.0f} records/s; ratio = crema / raw scan = {:.3f}\n", raw_per_s,
             per_s / raw_per_s);
  if (encoded) {
    fmt::print(
        "  decode-only loop: {:.0f} images/s (read + full decode, {} threads); ratio = crema / "
        "decode only = {:.3f}\n",
        decode_per_s, threads, per_s / decode_per_s);
  }
  if (hashed) {
    fmt::print("  checksum: {:016x} ({} samples)\n", hash.value(), samples);
  } else {
    fmt::print("  checksum: not computed (--checksum or --ordered computes it)\n");
  }
  return 0;
}

// Whether crema-feed reads `Source` as shards (WebDataset or TFRecord), not image files.
template <class Source>
constexpr bool is_shard_source = std::is_same_v<Source, crema::webdataset_source> ||
                                 std::is_same_v<Source, crema::tfrecord_source>;

// The baseline of the image mode: T threads that read and fully decode every file once per epoch
// with TurboJPEG (to RGB), nothing else. Files are dealt from one counter.
template <class Source>
requires(!is_shard_source<Source>) double decode_only(const Source& source, std::size_t threads,
                                                      std::size_t epochs) {
  const std::size_t files = source.files();
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> failures{0};
  const double seconds = seconds_on_threads(threads, [&](std::size_t) {
    crema::image_file_reader reader;
    crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
    for (std::size_t i; (i = next.fetch_add(1)) < files * epochs;) {
      const crema::image_file file = source.file(i % files);
      try {
        (void)decoder.decode(reader.read(file), file.relative);
      } catch (const crema::error&) {
        failures.fetch_add(1);
      }
    }
  });
  if (failures.load() != 0) {
    throw crema::format_error(
        fmt::format("decode-only loop: {} of the files did not decode", failures.load()));
  }
  return static_cast<double>(files * epochs) / seconds;
}

// The baseline of the shard modes: as above, each sample's image read from its shard (and, for a
// TFRecord, its CRC checked and its Example decoded to find the image) and fully decoded.
template <class Source>
requires is_shard_source<Source>
double decode_only(const Source& source, std::size_t threads, std::size_t epochs) {
  const std::size_t records = source.records();
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> failures{0};
  const double seconds = seconds_on_threads(threads, [&](std::size_t) {
    std::vector<std::byte> buffer;
    crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
    for (std::size_t i; (i = next.fetch_add(1)) < records * epochs;) {
      try {
        const crema::encoded_sample image = source.record(i % records).read_encoded(buffer);
        (void)decoder.decode(image.bytes, image.key);
      } catch (const crema::error&) {
        failures.fetch_add(1);
      }
    }
  });
  if (failures.load() != 0) {
    throw crema::format_error(
        fmt::format("decode-only loop: {} of the samples did not decode", failures.load()));
  }
  return static_cast<double>(records * epochs) / seconds;
}

// The samples of one pass, and every byte read once before anything is timed: both loops
// measure a warm page cache.
template <class Source>
requires(!is_shard_source<Source>) std::size_t warm_samples(const Source& source) {
  crema::image_file_reader reader;
  for (std::size_t i = 0; i < source.files(); ++i) (void)reader.read(source.file(i));
  return source.files();
}
template <class Source>
requires is_shard_source<Source> std::size_t warm_samples(const Source& source) {
  std::vector<std::byte> block(std::size_t{1} << 20);
  for (const std::string& path : source.shards()) {
    const crema::shard_file file(path, source.storage());
    for (std::uint64_t at = 0; at < file.size(); at += block.size()) {
      file.read_at(at, std::span(block).first(static_cast<std::size_t>(
                           std::min<std::uint64_t>(block.size(), file.size() - at))));
    }
  }
  return source.records();
}

// The shards' raw read: one pass of the source, every sample's members read (as a transform
// reads them), nothing decoded, beside a sequential read of the same shards in 1 MiB blocks
// (`pread` of a file, a range request of a URL), both on one thread and both over a warm page
// cache.
struct raw_read_rates {
  double source_samples_per_s = 0;
  double source_bytes_per_s = 0;  // the shards' bytes over the pass's time
  double read_bytes_per_s = 0;
};

template <class Source>
requires(!is_shard_source<Source>) std::optional<raw_read_rates> raw_read(const Source&) {
  return std::nullopt;  // image files: the decode-only loop reads them
}
template <class Source>
requires is_shard_source<Source> std::optional<raw_read_rates> raw_read(const Source& source) {
  std::uint64_t bytes = 0;
  std::vector<std::byte> block(std::size_t{1} << 20);
  const auto read_start = clock_type::now();
  for (const std::string& path : source.shards()) {
    const crema::shard_file file(path, source.storage());
    for (std::uint64_t at = 0; at < file.size(); at += block.size()) {
      const auto size =
          static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), file.size() - at));
      file.read_at(at, std::span(block).first(size));
      bytes += size;
    }
  }
  const double read_seconds = seconds_since(read_start);
  Source pass = [&] {  // in shard order, as the files lie
    if constexpr (std::is_same_v<Source, crema::webdataset_source>) {
      return Source(source.shards(), source.storage());
    } else {
      return Source(source.shards(), {}, source.storage());
    }
  }();
  std::size_t samples = 0;
  std::conditional_t<std::is_same_v<Source, crema::webdataset_source>, crema::webdataset_sample,
                     std::vector<std::byte>>
      sample;
  const auto pass_start = clock_type::now();
  while (const auto* record = pass.next()) {
    record->read(sample);
    ++samples;
  }
  const double pass_seconds = seconds_since(pass_start);
  return raw_read_rates{static_cast<double>(samples) / pass_seconds,
                        static_cast<double>(bytes) / pass_seconds,
                        static_cast<double>(bytes) / read_seconds};
}

// Where the shards named by URL are read from: crema::http's storage, where crema-feed has it.
std::shared_ptr<const crema::shard_storage> storage_for(const std::vector<std::string>& paths,
                                                        const crema::tools::arguments& args) {
  if (std::none_of(paths.begin(), paths.end(),
                   [](const std::string& path) { return crema::is_url(path); })) {
    return nullptr;
  }
#if defined(CREMA_FEED_HTTP)
  crema::http_options options;
  options.cache_bytes = args.count("http-cache", 0) << 20;
  return std::make_shared<const crema::http_storage>(options);
#else
  throw usage_error("--shards: URLs need crema-feed built with crema::http (libcurl)");
#endif
}

std::array<float, 6> parse_normalize(const std::string& text) {
  const auto slash = text.find('/');
  std::vector<float> mean;
  std::vector<float> std;
  if (slash != std::string::npos) {
    mean = parse_values(text.substr(0, slash));
    std = parse_values(text.substr(slash + 1));
  }
  if (mean.size() != 3 || std.size() != 3) {
    throw usage_error(fmt::format("--normalize takes m1,m2,m3/s1,s2,s3, not '{}'", text));
  }
  for (const float value : std) {
    if (!(value > 0))
      throw usage_error(fmt::format("--normalize: std must be positive in '{}'", text));
  }
  return {mean[0], mean[1], mean[2], std[0], std[1], std[2]};
}

template <class Source>
int feed_images(const crema::tools::arguments& args, Source source, const std::string& what) {
  const std::size_t batch_size = args.count("batch", 0);
  if (batch_size == 0) throw usage_error("--batch must be given, at least 1");
  const std::size_t producers = args.count("producers", 2);
  const std::size_t threads = args.count("threads", producers);
  const std::size_t epochs = args.count("epochs", 1);
  if (epochs == 0) throw usage_error("--epochs must be at least 1");
  if (producers == 0 || threads == 0) throw usage_error("--producers and --threads: at least 1");
  const bool json = args.flag("json");

  crema::image_transform_options options;
  const auto random_crop = args.option("random-resized-crop");
  const auto resize = args.option("resize");
  const auto center = args.option("center-crop");
  std::string geometry;
  if (random_crop && !resize && !center) {
    const std::size_t size = args.count("random-resized-crop", 0);
    if (size == 0) throw usage_error("--random-resized-crop must be at least 1");
    options.geometry = crema::random_resized_crop{size, size};
    geometry = fmt::format("RandomResizedCrop({})", size);
  } else if (!random_crop && resize && center) {
    const std::size_t short_side = args.count("resize", 0);
    const std::size_t crop = args.count("center-crop", 0);
    if (crop == 0 || crop > short_side) {
      throw usage_error("--center-crop must be at least 1 and at most --resize");
    }
    options.geometry = crema::resize_center_crop{short_side, crop, crop};
    geometry = fmt::format("Resize({}) + CenterCrop({})", short_side, crop);
  } else {
    throw usage_error(
        "--images and --shards take --random-resized-crop S, or --resize S with --center-crop C");
  }
  options.mirror = args.flag("mirror");
  if (const auto text = args.option("normalize")) {
    const auto values = parse_normalize(*text);
    options.mean = {values[0], values[1], values[2]};
    options.std = {values[3], values[4], values[5]};
  }
  options.decode.dct_scaling = !args.flag("exact");
  if (args.flag("reduced-detail")) {
    if (args.flag("exact")) throw usage_error("--exact and --reduced-detail: one of them");
    options.decode.detail = crema::decode_detail::reduced;
  }
  const std::size_t files = warm_samples(source);
  if constexpr (is_shard_source<Source>) {
    if (args.option("shard-blocks")) {
      source.shuffle_shards(args.count("seed", 0), args.count("shard-blocks", 1));
    } else {
      source.shuffle(args.count("seed", 0));
    }
  } else {
    source.shuffle(args.count("seed", 0));
  }
  const double baseline_per_s = decode_only(source, threads, epochs);
  const std::optional<raw_read_rates> raw = raw_read(source);

  const auto dump_path = args.option("dump");
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> dump(
      dump_path ? std::fopen(dump_path->c_str(), "wb") : nullptr, &std::fclose);
  if (dump_path && !dump) {
    throw usage_error(fmt::format("--dump: cannot write {}: {}", *dump_path, std::strerror(errno)));
  }
  crema::image_batcher batcher(crema::image_transform(options), crema::make_host_batch<float>{});
  const auto out = batcher.shape();
  crema::double_buffered_pipeline pipe{
      std::move(source),
      std::move(batcher),
      {.batch_size = batch_size,
       .producers = producers,
       .threads = threads,
       .mode = epochs == 1 ? crema::pipeline_mode::single_pass : crema::pipeline_mode::repeat,
       .ordered = dump != nullptr,
       .seed = args.count("seed", 0)}};
  const std::size_t target = files * epochs;
  std::size_t samples = 0;
  double starved = 0;
  auto consumer = pipe.consumer(0);
  const auto start = clock_type::now();
  while (samples < target) {
    const auto asked = clock_type::now();
    auto batch = consumer.pull();
    starved += seconds_since(asked);
    if (!batch) break;
    const std::size_t size = std::min(batch->size(), target - samples);
    if (dump) {
      const std::size_t values = size * out.elements();
      if (std::fwrite(batch->data.data(), sizeof(float), values, dump.get()) != values ||
          std::fwrite(batch->labels.data(), sizeof(float), size, dump.get()) != size) {
        throw usage_error(
            fmt::format("--dump: cannot write {}: {}", *dump_path, std::strerror(errno)));
      }
    }
    samples += size;
  }
  const double seconds = seconds_since(start);
  const double per_s = static_cast<double>(samples) / seconds;
  if (json) {
    fmt::print(
        "{{\"images\": \"{}\", \"files\": {}, \"samples\": {}, \"seconds\": {:.6f}, "
        "\"samples_per_s\": {:.1f}, \"decode_only_samples_per_s\": {:.1f}, "
        "\"ratio_to_decode_only\": {:.4f}, \"starved_fraction\": {:.4f}, \"transform\": \"{}\", "
        "\"mirror\": {}, \"exact\": {}, \"reduced_detail\": {}, \"batch\": {}, "
        "\"shape\": [{}, {}, {}], \"producers\": {}, \"threads\": {}, {}\"machine\": \"{}\"}}\n",
        what, files, samples, seconds, per_s, baseline_per_s, per_s / baseline_per_s,
        starved / seconds, geometry, options.mirror, args.flag("exact"),
        args.flag("reduced-detail"), batch_size, out.channels, out.height, out.width, producers,
        threads,
        raw ? fmt::format(
                  "\"source_samples_per_s\": {:.1f}, \"source_bytes_per_s\": {:.0f}, "
                  "\"raw_read_bytes_per_s\": {:.0f}, \"source_ratio_to_raw_read\": {:.4f}, ",
                  raw->source_samples_per_s, raw->source_bytes_per_s, raw->read_bytes_per_s,
                  raw->source_bytes_per_s / raw->read_bytes_per_s)
            : std::string(),
        crema::bench::machine_description());
    return 0;
  }
  fmt::print("crema-feed: {} ({} images), {}{}, batches of {} x {} x {} x {}\n", what, files,
             geometry, options.mirror ? " + flip" : "", batch_size, out.channels, out.height,
             out.width);
  fmt::print("  machine: {}\n", crema::bench::machine_description());
  fmt::print(
      "  pipeline: {:.0f} samples/s ({} producers on {} threads); the consumer waited {:.1f}% "
      "of the time\n",
      per_s, producers, threads, 100.0 * starved / seconds);
  fmt::print(
      "  decode-only loop: {:.0f} images/s (read + full decode, {} threads); ratio = crema / "
      "decode only = {:.3f}\n",
      baseline_per_s, threads, per_s / baseline_per_s);
  if (raw) {
    fmt::print(
        "  source alone: {:.0f} samples/s, {:.0f} MB/s of shards; sequential 1 MiB reads of the "
        "same shards: {:.0f} MB/s; ratio = source / sequential = {:.3f}\n",
        raw->source_samples_per_s, raw->source_bytes_per_s / 1e6, raw->read_bytes_per_s / 1e6,
        raw->source_bytes_per_s / raw->read_bytes_per_s);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return crema::tools::run_tool("crema-feed", usage, argc, argv, [&] {
    const crema::tools::arguments args(
        argc, argv, 1, {"mirror", "ordered", "checksum", "json", "exact", "reduced-detail"},
        {"batch", "crop", "mean-file", "mean-values", "scale", "producers", "threads", "epochs",
         "seed", "images", "list", "shards", "random-resized-crop", "resize", "center-crop",
         "normalize", "dump", "shard-blocks", "http-cache"});
    const auto shards = args.option("shards");
    if (shards && (args.option("images") || args.option("list"))) {
      throw usage_error("--shards or --images: one data set");
    }
    for (const char* shards_only : {"shard-blocks", "http-cache"}) {
      if (!shards && args.option(shards_only)) {
        throw usage_error(fmt::format("--{} goes with --shards", shards_only));
      }
    }
    if (const auto root = shards ? shards : args.option("images")) {
      if (args.positional_count() != 0) throw usage_error("--images and --shards read no DB");
      for (const char* lmdb_only : {"crop", "mean-file", "mean-values", "scale"}) {
        if (args.option(lmdb_only)) {
          throw usage_error(
              fmt::format("--{} is for a DB; --images takes --random-resized-crop "
                          "or --resize, and --normalize",
                          lmdb_only));
        }
      }
      if (shards) {
        auto paths = crema::shard_paths(*shards);
        const auto tfrecords = std::count_if(paths.begin(), paths.end(), [](const auto& path) {
          return path.ends_with(".tfrecord") || path.ends_with(".tfrecords");
        });
        auto storage = storage_for(paths, args);
        if (tfrecords == 0) {
          return feed_images(args, crema::webdataset_source(std::move(paths), std::move(storage)),
                             *shards);
        }
        if (static_cast<std::size_t>(tfrecords) != paths.size()) {
          throw usage_error("--shards: every shard a .tar or every shard a .tfrecord");
        }
        return feed_images(args, crema::tfrecord_source(std::move(paths), {}, std::move(storage)),
                           *shards);
      }
      if (const auto list = args.option("list")) {
        return feed_images(args, crema::image_list_source(*list, *root),
                           fmt::format("{} (list {})", *root, *list));
      }
      return feed_images(args, crema::image_folder_source(*root), *root);
    }
    for (const char* image_only :
         {"list", "random-resized-crop", "resize", "center-crop", "normalize", "dump"}) {
      if (args.option(image_only)) {
        throw usage_error(fmt::format("--{} goes with --images ROOT or --shards", image_only));
      }
    }
    if (args.option("mean-file") && args.option("mean-values")) {
      throw usage_error("--mean-file and --mean-values: one kind of mean only");
    }
    return feed(args);
  });
}
