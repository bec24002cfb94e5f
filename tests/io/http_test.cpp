// Shards over HTTP (crema::http): http_storage against a server on the loopback address that the
// test starts — sizes and ranges read as the files hold them on one kept connection, the shard
// sources over URLs giving what they give over the same files, with and without index files;
// failures retried from the byte reached, stalls cut by the timeout, errors that are not retried,
// every error naming the URL and the byte offset; S3 URLs resolved and signed.

#include <crema/io/http/http_storage.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/shard_index.hpp>
#include <crema/io/shards/shard_list.hpp>
#include <crema/io/shards/tar.hpp>
#include <crema/io/shards/tfrecord.hpp>
#include <crema/io/shards/tfrecord_source.hpp>
#include <crema/io/shards/webdataset_source.hpp>
#include <crema/io/shards/webdataset_stream_source.hpp>

#include "common/error_message.hpp"
#include "common/loopback_http_server.hpp"
#include "common/scratch_directory.hpp"
#include "common/text_bytes.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using crema::test::bytes_of;
using crema::test::loopback_http_server;
using crema::test::message_of;
using crema::test::scratch_directory;
using fault = loopback_http_server::fault;
using namespace std::chrono_literals;

// Bytes that differ at every offset, so a range read from the wrong place shows.
std::vector<std::byte> pattern(std::size_t size, std::uint32_t seed) {
  std::vector<std::byte> bytes(size);
  std::uint32_t state = seed * 2654435761u + 1;
  for (std::byte& b : bytes) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<std::byte>(state >> 24);
  }
  return bytes;
}

void write_file(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// Shards "train-<s>.tar" of `samples` samples each: a "jpg" of 5–40 KB of pattern bytes and a
// "cls".
void write_shards(const fs::path& folder, std::size_t shards, std::size_t samples) {
  for (std::size_t s = 0; s < shards; ++s) {
    crema::tar_writer tar((folder / fmt::format("train-{}.tar", s)).string());
    for (std::size_t i = 0; i < samples; ++i) {
      const std::size_t n = s * samples + i;
      const std::string key = fmt::format("sample{:04}", n);
      tar.add(key + ".cls", bytes_of(std::to_string(n % 10)));
      tar.add(key + ".jpg", pattern(5000 + n * 997 % 35000, static_cast<std::uint32_t>(n)));
    }
    tar.finish();
  }
}

// Fast retries, for tests that fail on purpose.
crema::http_options quick() {
  crema::http_options options;
  options.retries = 2;
  options.backoff = 5ms;
  options.most_backoff = 20ms;
  return options;
}

// Every sample of a pass: its key, class and image bytes, as an image batcher gets them.
struct read_sample {
  std::string key;
  std::int64_t label;
  std::vector<std::byte> image;
  bool operator==(const read_sample&) const = default;
};

template <class Source>
std::vector<read_sample> pass_of(Source& source) {
  std::vector<read_sample> samples;
  std::vector<std::byte> buffer;
  while (const auto* record = source.next()) {
    const crema::encoded_sample sample = record->read_encoded(buffer);
    const std::string name(sample.key);
    samples.push_back({name.substr(name.rfind('/') + 1),
                       sample.label,
                       {sample.bytes.begin(), sample.bytes.end()}});
  }
  return samples;
}

// Sets an environment variable for one scope.
class scoped_environment {
 public:
  scoped_environment(const char* name, const char* value) : name_(name) {
    ::setenv(name, value, 1);
  }
  scoped_environment(const scoped_environment&) = delete;
  scoped_environment& operator=(const scoped_environment&) = delete;
  ~scoped_environment() { ::unsetenv(name_); }

 private:
  const char* name_;
};

}  // namespace

TEST_SUITE("http") {
  TEST_CASE("size and ranges read as the file holds them, one request each, on one connection") {
    scratch_directory scratch("http-ranges");
    const auto bytes = pattern(300'000, 7);
    write_file(scratch.path() / "blob.bin", bytes);
    loopback_http_server server(scratch.path());
    const auto storage = std::make_shared<crema::http_storage>(quick());
    const std::string url = server.url("blob.bin");

    const crema::shard_file file(url, storage);
    CHECK(file.size() == bytes.size());
    CHECK(file.path() == url);
    for (const auto& [offset, size] : {std::pair<std::size_t, std::size_t>{0, 1},
                                       {1, 512},
                                       {4096, 100'000},
                                       {299'999, 1},
                                       {0, 300'000}}) {
      std::vector<std::byte> got(size);
      file.read_at(offset, got);
      CHECK(
          std::equal(got.begin(), got.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset)));
    }
    CHECK(server.requests() == 6);  // the size asked, then one GET a read
    CHECK(server.connections() == 1);
    const crema::http_statistics done = storage->statistics();
    CHECK(done.requests == 6);
    CHECK(done.retries == 0);
    CHECK(done.bytes == 1 + 512 + 100'000 + 1 + 300'000);

    INFO("a read past the end is refused before any request");
    std::vector<std::byte> past(10);
    CHECK(message_of<crema::io_error>([&] { file.read_at(299'995, past); }) ==
          fmt::format("shard {}: ends at byte 300000, short of byte 300005", url));
    CHECK(server.requests() == 6);
  }

  TEST_CASE("a shard set asks a URL's size once, however often the shard is opened again") {
    scratch_directory scratch("http-reopen");
    for (int s = 0; s < 3; ++s)
      write_file(scratch.path() / fmt::format("b{}.bin", s), pattern(1000, 1));
    loopback_http_server server(scratch.path());
    const auto storage = std::make_shared<crema::http_storage>(quick());
    const crema::shard_set shards(crema::shard_paths(server.url("b{0..2}.bin")), storage, 1);
    for (int round = 0; round < 3; ++round) {
      for (std::size_t s = 0; s < 3; ++s) CHECK(shards.open(s)->size() == 1000);
    }
    CHECK(server.requests() == 3);  // one a shard, though only one stays open at a time
  }

  TEST_CASE("threads reading through one storage at once each get their own bytes") {
    scratch_directory scratch("http-threads");
    const auto bytes = pattern(1 << 20, 3);
    write_file(scratch.path() / "blob.bin", bytes);
    loopback_http_server server(scratch.path());
    const auto storage = std::make_shared<crema::http_storage>(quick());
    const crema::shard_file file(server.url("blob.bin"), storage);
    std::atomic<int> wrong{0};
    std::vector<std::thread> readers;
    for (std::uint32_t t = 0; t < 4; ++t) {
      readers.emplace_back([&, t] {
        std::uint32_t state = t + 1;
        for (int i = 0; i < 40; ++i) {
          state = state * 1664525u + 1013904223u;
          const std::size_t offset = state % (bytes.size() - 70'000);
          std::vector<std::byte> got(1 + state % 65'536);
          file.read_at(offset, got);
          if (!std::equal(got.begin(), got.end(),
                          bytes.begin() + static_cast<std::ptrdiff_t>(offset))) {
            ++wrong;
          }
        }
      });
    }
    for (std::thread& reader : readers) reader.join();
    CHECK(wrong == 0);
    CHECK(server.connections() <= 4);  // a connection a thread at most, kept between reads
  }

  TEST_CASE("WebDataset shards over URLs give what the same files give, with index files too") {
    scratch_directory scratch("http-webdataset");
    write_shards(scratch.path(), 3, 20);
    loopback_http_server server(scratch.path());
    const auto storage = std::make_shared<crema::http_storage>(quick());

    crema::webdataset_source local(
        crema::shard_paths((scratch.path() / "train-{0..2}.tar").string()));
    const auto urls = crema::shard_paths(server.url("train-{0..2}.tar"));
    REQUIRE(urls.size() == 3);
    crema::webdataset_source remote(urls, storage);
    CHECK(remote.records() == 60);
    const auto expected = pass_of(local);
    CHECK(pass_of(remote) == expected);

    INFO("shuffled and sharded, as over files");
    local.shuffle(11);
    remote.shuffle(11);
    local.shard(1, 2);
    remote.shard(1, 2);
    CHECK(pass_of(remote) == pass_of(local));

    INFO(
        "index files over URLs: three requests a shard to open (its size, the index's, the index)");
    for (std::size_t s = 0; s < 3; ++s) {
      const crema::shard_file shard((scratch.path() / fmt::format("train-{}.tar", s)).string());
      std::ofstream(scratch.path() / fmt::format("train-{}.tar.idx", s))
          << crema::webdataset_index_text(crema::index_webdataset(shard));
    }
    const std::size_t before = server.requests();
    crema::webdataset_source indexed(
        urls, crema::shard_indexes{crema::shard_paths(server.url("train-{0..2}.tar.idx"))},
        storage);
    CHECK(server.requests() - before == 3 * 3);
    CHECK(pass_of(indexed) == expected);
    CHECK(server.requests() - before == 3 * 3 + 60);  // then one GET a sample
  }

  TEST_CASE("TFRecord files over URLs give what the same files give") {
    scratch_directory scratch("http-tfrecord");
    for (std::size_t f = 0; f < 2; ++f) {
      crema::tfrecord_writer out((scratch.path() / fmt::format("part-{}.tfrecord", f)).string());
      for (std::size_t i = 0; i < 15; ++i) {
        out.write(crema::tf_example_builder()
                      .add_bytes("image/encoded",
                                 pattern(2000 + i * 100, static_cast<std::uint32_t>(f * 100 + i)))
                      .add_int64("image/class/label", static_cast<std::int64_t>(i % 4))
                      .bytes());
      }
      out.finish();
    }
    loopback_http_server server(scratch.path());
    const auto storage = std::make_shared<crema::http_storage>(quick());
    crema::tfrecord_source local(
        crema::shard_paths((scratch.path() / "part-{0..1}.tfrecord").string()));
    crema::tfrecord_source remote(crema::shard_paths(server.url("part-{0..1}.tfrecord")), {},
                                  storage);
    CHECK(remote.records() == 30);
    CHECK(pass_of(remote) == pass_of(local));
  }

  TEST_CASE("with a cache, reads come from chunks fetched once, the least recently used dropped") {
    scratch_directory scratch("http-cache");
    const auto bytes = pattern(250'000, 4);  // chunks of 64 KiB: 3 whole, then 53,392 bytes
    write_file(scratch.path() / "blob.bin", bytes);
    loopback_http_server server(scratch.path());
    crema::http_options options = quick();
    options.chunk_bytes = 65'536;
    options.cache_bytes = 2 * 65'536;
    const auto storage = std::make_shared<crema::http_storage>(options);
    const crema::shard_file file(server.url("blob.bin"), storage);
    const auto read = [&](std::size_t offset, std::size_t size) {
      std::vector<std::byte> got(size);
      file.read_at(offset, got);
      return std::equal(got.begin(), got.end(),
                        bytes.begin() + static_cast<std::ptrdiff_t>(offset));
    };
    const std::size_t sized = server.requests();  // the size, asked when the file opened
    CHECK(read(0, 1000));
    CHECK(read(5000, 60'000));
    CHECK(read(65'000, 1000));  // across chunks 0 and 1
    CHECK(server.requests() - sized == 2);
    CHECK(read(100, 100));         // chunk 0, used after chunk 1 now
    CHECK(read(240'000, 10'000));  // the last chunk, short: chunk 1, least recently used, dropped
    CHECK(read(200, 100));         // chunk 0 still there
    CHECK(server.requests() - sized == 3);
    CHECK(read(70'000, 100));  // chunk 1 again
    CHECK(server.requests() - sized == 4);
    CHECK(storage->statistics().bytes == 3 * 65'536 + (250'000 - 3 * 65'536));

    INFO("threads that want one chunk at once share one request");
    const std::size_t before = server.requests();
    std::vector<std::thread> readers;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 4; ++t) {
      readers.emplace_back([&, t] {
        if (!read(131'072 + static_cast<std::size_t>(t) * 1000, 5000)) ++wrong;
      });
    }
    for (std::thread& reader : readers) reader.join();
    CHECK(wrong == 0);
    CHECK(server.requests() - before == 1);

    INFO("a chunk whose fetch fails is not kept: the next read asks again");
    server.fail_next(3, fault::status, 500);
    std::vector<std::byte> got(10);
    CHECK(message_of<crema::io_error>([&] {
            file.read_at(200'000, got);
          }).ends_with("HTTP 500: injected failure (after 3 attempts)"));
    CHECK(read(200'000, 10));
  }

  TEST_CASE("shards shuffled shard by shard, over a cache of a block: a request a chunk") {
    scratch_directory scratch("http-blocks");
    write_shards(scratch.path(), 4, 30);
    loopback_http_server server(scratch.path());
    crema::http_options options = quick();
    options.chunk_bytes = 128 * 1024;
    std::uint64_t chunks = 0;
    std::uint64_t most = 0;  // the most chunks of a shard
    for (std::size_t s = 0; s < 4; ++s) {
      const std::string shard = (scratch.path() / fmt::format("train-{}.tar", s)).string();
      const std::uint64_t of_shard =
          (fs::file_size(shard) + options.chunk_bytes - 1) / options.chunk_bytes;
      chunks += of_shard;
      most = std::max(most, of_shard);
      std::ofstream(shard + ".idx")
          << crema::webdataset_index_text(crema::index_webdataset(crema::shard_file(shard)));
    }
    options.cache_bytes = 2 * most * options.chunk_bytes;  // a block of two shards, not all four
    const auto storage = std::make_shared<crema::http_storage>(options);
    crema::webdataset_source local(
        crema::shard_paths((scratch.path() / "train-{0..3}.tar").string()));
    crema::webdataset_source remote(
        crema::shard_paths(server.url("train-{0..3}.tar")),
        crema::shard_indexes{crema::shard_paths(server.url("train-{0..3}.tar.idx"))}, storage);
    local.shuffle_shards(3, 2);
    remote.shuffle_shards(3, 2);
    const std::size_t opened = server.requests();
    CHECK(pass_of(remote) == pass_of(local));
    CHECK(server.requests() - opened == chunks);  // every chunk once, for 120 samples
    CHECK(storage->statistics().retries == 0);
  }

  TEST_CASE("shards streamed over URLs through a cache of two chunks: each asked for once") {
    scratch_directory scratch("http-stream");
    write_shards(scratch.path(), 3, 25);
    loopback_http_server server(scratch.path());
    crema::http_options options = quick();
    options.chunk_bytes = 256 * 1024;
    options.cache_bytes = 2 * options.chunk_bytes;  // less than the shards' 1.7 MB
    const auto storage = std::make_shared<crema::http_storage>(options);
    crema::webdataset_stream_source remote(crema::shard_paths(server.url("train-{0..2}.tar")),
                                           storage);
    remote.shuffle(8);
    CHECK(server.requests() == 0);  // nothing asked before the first sample
    std::uint64_t chunks = 0;
    for (std::size_t s = 0; s < 3; ++s) {
      chunks += (fs::file_size(scratch.path() / fmt::format("train-{}.tar", s)) +
                 options.chunk_bytes - 1) /
                options.chunk_bytes;
    }
    crema::webdataset_stream_source local(
        crema::shard_paths((scratch.path() / "train-{0..2}.tar").string()));
    local.shuffle(8);
    CHECK(pass_of(remote) == pass_of(local));
    CHECK(server.requests() == 3 + chunks);  // each shard's size, then each chunk once

    INFO("through a shuffle buffer, the samples the files give");
    crema::webdataset_stream_source buffered(crema::shard_paths(server.url("train-{0..2}.tar")),
                                             storage, {.shuffle_buffer = 10});
    crema::webdataset_stream_source local_buffered(
        crema::shard_paths((scratch.path() / "train-{0..2}.tar").string()), nullptr,
        {.shuffle_buffer = 10});
    buffered.shuffle(8);
    local_buffered.shuffle(8);
    CHECK(pass_of(buffered) == pass_of(local_buffered));
  }

  TEST_CASE("failed attempts are retried with backoff, and the read then gives every byte") {
    scratch_directory scratch("http-retry");
    const auto bytes = pattern(200'000, 9);
    write_file(scratch.path() / "blob.bin", bytes);
    loopback_http_server server(scratch.path());
    const auto storage = std::make_shared<crema::http_storage>(quick());
    const crema::shard_file file(server.url("blob.bin"), storage);
    std::vector<std::byte> got(150'000);

    SUBCASE("503 and 429 answers") {
      server.fail_next(1, fault::status, 503);
      server.fail_next(1, fault::status, 429);
      file.read_at(10'000, got);
      CHECK(storage->statistics().retries == 2);
    }
    SUBCASE("a body cut short: the next attempt asks from the byte reached") {
      server.fail_next(1, fault::cut);
      file.read_at(10'000, got);
      CHECK(storage->statistics().retries == 1);
      const auto received = server.received();
      REQUIRE(received.size() == 3);
      CHECK(received[1].find("Range: bytes=10000-159999") != std::string::npos);
      CHECK(received[2].find("Range: bytes=85000-159999") != std::string::npos);
    }
    SUBCASE("a stalled answer, cut by the request timeout") {
      crema::http_options options = quick();
      options.request_timeout = 300ms;
      const auto impatient = std::make_shared<crema::http_storage>(options);
      const crema::shard_file through(server.url("blob.bin"), impatient);
      server.fail_next(1, fault::stall, 0, 10s);
      const auto start = std::chrono::steady_clock::now();
      through.read_at(10'000, got);
      CHECK(std::chrono::steady_clock::now() - start < 5s);
      CHECK(impatient->statistics().retries == 1);
    }
    CHECK(std::equal(got.begin(), got.end(), bytes.begin() + 10'000));
  }

  TEST_CASE("a read that fails after its retries, or is refused, names the URL and the offset") {
    scratch_directory scratch("http-errors");
    write_file(scratch.path() / "blob.bin", pattern(100'000, 1));
    loopback_http_server server(scratch.path());
    const auto storage = std::make_shared<crema::http_storage>(quick());
    const std::string url = server.url("blob.bin");
    const crema::shard_file file(url, storage);
    std::vector<std::byte> got(1000);

    server.fail_next(3, fault::status, 500);
    CHECK(message_of<crema::io_error>([&] { file.read_at(4096, got); }) ==
          fmt::format("shard {}: cannot read 1000 bytes at byte 4096: HTTP 500: injected failure "
                      "(after 3 attempts)",
                      url));

    INFO("refusals are not retried: a missing object (ENOENT), a forbidden one (EACCES)");
    const std::size_t before = server.requests();
    const std::string missing = server.url("none.tar");
    try {
      crema::webdataset_source({missing}, storage);
      FAIL("no error");
    } catch (const crema::io_error& error) {
      CHECK(error.code() == ENOENT);
      CHECK(std::string(error.what()) ==
            fmt::format("shard {}: cannot ask its size: HTTP 404: no such object", missing));
    }
    server.fail_next(1, fault::status, 403);
    try {
      file.read_at(0, got);
      FAIL("no error");
    } catch (const crema::io_error& error) {
      CHECK(error.code() == EACCES);
      CHECK(std::string(error.what()) ==
            fmt::format("shard {}: cannot read 1000 bytes at byte 0: HTTP 403: injected failure",
                        url));
    }
    CHECK(server.requests() - before == 2);

    INFO("a server that ignores ranges is not retried either");
    server.fail_next(1, fault::whole_file);
    CHECK(message_of<crema::io_error>([&] { file.read_at(10, got); }) ==
          fmt::format("shard {}: cannot read 1000 bytes at byte 10: the server ignores byte "
                      "ranges (it answered 200 to a range request)",
                      url));

    INFO("a URL libcurl cannot use is not retried");
    const std::string malformed =
        message_of<crema::io_error>([&] { (void)storage->size("http://127.0.0.1:99999/a.tar"); });
    CHECK(malformed.starts_with(
        "shard http://127.0.0.1:99999/a.tar: cannot ask its size: libcurl: "));
    CHECK(malformed.find("attempts") == std::string::npos);

    INFO("a server gone: the connection refused, after the retries");
    server.stop();
    const std::string refused = message_of<crema::io_error>([&] { file.read_at(0, got); });
    CHECK(refused.starts_with(
        fmt::format("shard {}: cannot read 1000 bytes at byte 0: libcurl: ", url)));
    CHECK(refused.ends_with("(after 3 attempts)"));
  }

  TEST_CASE("a URL with no storage, an unknown scheme, a bad option: configuration errors") {
    CHECK(crema::is_url("https://host/a.tar"));
    CHECK(crema::is_url("s3://bucket/a.tar"));
    CHECK_FALSE(crema::is_url("/data/a.tar"));
    CHECK_FALSE(crema::is_url("data/odd://name.tar"));
    CHECK(message_of<crema::config_error>([] { crema::shard_file("http://127.0.0.1:1/a.tar"); }) ==
          "shard http://127.0.0.1:1/a.tar: a URL, and no storage to read it through was given "
          "(crema::http's http_storage reads HTTP, HTTPS and S3 URLs)");
    const crema::http_storage storage(quick());
    CHECK(message_of<crema::config_error>([&] { (void)storage.size("ftp://host/a.tar"); }) ==
          "shard ftp://host/a.tar: http_storage reads http://, https:// and s3:// URLs");
    CHECK(message_of<crema::config_error>([&] { (void)storage.size("s3://bucket"); }) ==
          "shard s3://bucket: an S3 URL is s3://bucket/key");
    crema::http_options odd;
    odd.headers = {"no colon here"};
    crema::http_options no_chunks;
    no_chunks.cache_bytes = 1000;
    no_chunks.chunk_bytes = 0;
    CHECK(message_of<crema::config_error>([&] { crema::http_storage{no_chunks}; }) ==
          "http_storage: a cache of 1000 bytes needs chunks of at least a byte");
    CHECK(message_of<crema::config_error>([&] { crema::http_storage{odd}; }) ==
          "http_storage: header \"no colon here\" is not \"Name: value\"");
  }

  TEST_CASE(
      "S3 URLs: resolved at the endpoint, path-style, and signed with the environment's keys") {
    scratch_directory scratch("http-s3");
    fs::create_directories(scratch.path() / "bucket" / "train");
    const auto bytes = pattern(50'000, 5);
    write_file(scratch.path() / "bucket" / "train" / "blob.bin", bytes);
    loopback_http_server server(scratch.path());

    SUBCASE("AWS itself, virtual-hosted, when no endpoint is set") {
      crema::http_options options = quick();
      options.region = "eu-west-1";
      CHECK(crema::http_storage(options).resolve("s3://my-bucket/a/b.tar") ==
            "https://my-bucket.s3.eu-west-1.amazonaws.com/a/b.tar");
    }
    SUBCASE("unsigned without credentials") {
      crema::http_options options = quick();
      options.s3_endpoint = server.url("");  // a trailing slash, dropped
      const auto storage = std::make_shared<crema::http_storage>(options);
      CHECK(storage->resolve("s3://bucket/train/blob.bin") == server.url("bucket/train/blob.bin"));
      const crema::shard_file file("s3://bucket/train/blob.bin", storage);
      CHECK(file.size() == bytes.size());
      CHECK(server.received().back().find("Authorization") == std::string::npos);
    }
    SUBCASE("signed with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN") {
      const scoped_environment key("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
      const scoped_environment secret("AWS_SECRET_ACCESS_KEY", "secret/example");
      const scoped_environment token("AWS_SESSION_TOKEN", "token-example");
      const scoped_environment region("AWS_REGION", "us-west-2");
      const scoped_environment endpoint("AWS_ENDPOINT_URL", server.url("").c_str());
      const auto storage = std::make_shared<crema::http_storage>(quick());
      const crema::shard_file file("s3://bucket/train/blob.bin", storage);
      std::vector<std::byte> got(1000);
      file.read_at(2000, got);
      CHECK(std::equal(got.begin(), got.end(), bytes.begin() + 2000));
      for (const std::string& request : server.received()) {
        CAPTURE(request);
        CHECK(request.find("Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") !=
              std::string::npos);
        CHECK(request.find("/us-west-2/s3/aws4_request, SignedHeaders=") != std::string::npos);
        CHECK(request.find("x-amz-content-sha256: UNSIGNED-PAYLOAD") != std::string::npos);
        CHECK(request.find("x-amz-security-token: token-example") != std::string::npos);
        CHECK(request.find("X-Amz-Date: ") != std::string::npos);
      }
      INFO("the signature itself is checked against S3's rules by the Python package's tests");
    }
    SUBCASE("aws_sigv4 for https URLs needs credentials") {
      crema::http_options options = quick();
      options.aws_sigv4 = "aws:amz:us-east-1:s3";
      CHECK(message_of<crema::config_error>([&] { crema::http_storage{options}; }) ==
            "http_storage: aws_sigv4 \"aws:amz:us-east-1:s3\" asks for signed requests, and the "
            "environment has no credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
    }
  }
}
