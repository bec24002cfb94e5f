// The snippet of docs/datasets.md that reads shards over HTTP, run against the HTTP tests' server
// on the loopback address (docs.http_snippets): four shards and their index files, read shard by
// shard through a cache; every sample once.
#include <crema/io/http/http_storage.hpp>
#include <crema/io/shards/shard_index.hpp>
#include <crema/io/shards/shard_list.hpp>
#include <crema/io/shards/tar.hpp>
#include <crema/io/shards/webdataset_source.hpp>

#include "common/loopback_http_server.hpp"

#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <span>
#include <string>

int main() {
  const auto folder = std::filesystem::temp_directory_path() / "crema-doc-http-snippet";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  for (int s = 0; s < 4; ++s) {
    const std::string shard = (folder / fmt::format("train-{:06}.tar", s)).string();
    {
      crema::tar_writer tar(shard);
      for (int i = 0; i < 10; ++i) {
        const std::string key = fmt::format("sample{:03}", s * 10 + i);
        const std::string image = "image of " + key;
        tar.add(key + ".jpg", std::as_bytes(std::span(image)));
        tar.add(key + ".cls", std::as_bytes(std::span(std::string_view("3"))));
      }
      tar.finish();
    }
    std::ofstream(shard + ".idx")
        << crema::webdataset_index_text(crema::index_webdataset(crema::shard_file(shard)));
  }
  crema::test::loopback_http_server server(folder);
  const std::string base = server.url("");  // https://data.example.org/ on the page
  const std::uint64_t seed = 7;

  crema::http_options options;
  options.cache_bytes = std::size_t{1} << 30;  // a block of shards in memory, in 8 MiB chunks
  auto storage = std::make_shared<crema::http_storage>(options);
  crema::webdataset_source train(
      crema::shard_paths(base + "train-{000000..000003}.tar"),
      crema::shard_indexes{crema::shard_paths(base + "train-{000000..000003}.tar.idx")}, storage);
  train.shuffle_shards(seed, 2);  // 2 shards at a time: what the cache holds

  std::set<std::string> keys;
  crema::webdataset_sample sample;
  while (const auto* record = train.next()) {
    record->read(sample);
    if (sample.cls() != 3) return 1;
    keys.emplace(record->key());
  }
  std::filesystem::remove_all(folder);
  if (keys.size() != 40) return 1;
  fmt::print("the snippet ran: {} samples over HTTP, {} requests\n", keys.size(),
             storage->statistics().requests);
  return 0;
}
