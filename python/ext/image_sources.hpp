#pragma once

// The sources of encoded images a loader reads, made as a source_spec asks: image folders, list
// files, WebDataset and TFRecord shards, and (where built) Caffe LMDBs of encoded Datums. Shared
// by the loaders that decode on the CPU and those that decode with nvJPEG.

#include "loader_core.hpp"

#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/image/image_list_source.hpp>
#include <crema/io/shards/tfrecord_source.hpp>
#include <crema/io/shards/tfrecord_stream_source.hpp>
#include <crema/io/shards/webdataset_source.hpp>
#include <crema/io/shards/webdataset_stream_source.hpp>
#if CREMA_PYTHON_HTTP
#include <crema/io/http/http_storage.hpp>
#endif
#if CREMA_PYTHON_LMDB
#include <crema/io/lmdb/lmdb_source.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crema::python {

/// Copies of `prototype`, made once (scanned, sharded, shuffled): every start of the loader's
/// producers takes one (the copies share its table).
template <class Source>
[[nodiscard]] std::function<Source()> copies_of(Source prototype) {
  return [prototype = std::make_shared<const Source>(std::move(prototype))] { return *prototype; };
}

/// A source as the spec asks: sharded, balanced and shuffled, at its first pass.
template <class Source>
[[nodiscard]] std::function<Source()> prepared(Source prototype, const source_spec& spec) {
  prototype.shard(spec.rank, spec.world);
  prototype.balance(spec.balance);
  return copies_of(std::move(prototype));
}

/// Where the shards and index files `spec` names by URL are read from: an HTTP storage as
/// `spec.http` says; none where it names none.
[[nodiscard]] inline std::shared_ptr<const shard_storage> storage_for(const source_spec& spec) {
  const auto url = [](const std::string& name) { return is_url(name); };
  if (std::none_of(spec.shards.begin(), spec.shards.end(), url) &&
      std::none_of(spec.indexes.begin(), spec.indexes.end(), url)) {
    return nullptr;
  }
#if CREMA_PYTHON_HTTP
  using milliseconds = std::chrono::milliseconds;
  const auto ms = [](double seconds) { return milliseconds(std::llround(seconds * 1000)); };
  http_options options;
  options.retries = spec.http.retries;
  options.backoff = ms(spec.http.backoff_s);
  options.most_backoff = ms(spec.http.most_backoff_s);
  options.connect_timeout = ms(spec.http.connect_timeout_s);
  options.request_timeout = ms(spec.http.request_timeout_s);
  options.stall_timeout = std::chrono::seconds(spec.http.stall_timeout_s);
  options.aws_sigv4 = spec.http.aws_sigv4;
  options.s3_endpoint = spec.http.s3_endpoint;
  options.region = spec.http.region;
  options.headers = spec.http.headers;
  options.cache_bytes = spec.http.cache_bytes;
  options.chunk_bytes = spec.http.chunk_bytes;
  options.ca_file = spec.http.ca_file;
  return std::make_shared<const http_storage>(std::move(options));
#else
  detail::fail<config_error>(
      "shard {}: a URL, and this build of crema has no crema::http (libcurl) to read it",
      spec.shards.front());
#endif
}

/// A stream source as the spec asks: shuffled, sharded, and every rank's pass the same size
/// (the epoch's samples over the world: rounded down where the last batch is dropped, else up).
template <class Source>
[[nodiscard]] std::function<Source()> prepared_stream(Source prototype, const source_spec& spec,
                                                      std::uint64_t seed) {
  if (spec.shuffle) prototype.shuffle(seed);
  prototype.shard(spec.rank, spec.world);
  prototype.pass_size(spec.balance == shard_balance::drop
                          ? spec.epoch_samples / spec.world
                          : (spec.epoch_samples + spec.world - 1) / spec.world);
  return copies_of(std::move(prototype));
}

/// Shuffles a shard source as `spec` asks: any sample after any other, or shard by shard.
template <class Source>
void shuffle_shards(Source& source, const source_spec& spec, std::uint64_t seed) {
  if (!spec.shuffle) return;
  if (spec.shard_blocks != 0) {
    source.shuffle_shards(seed, spec.shard_blocks);
  } else {
    source.shuffle(seed);
  }
}

/// @return `build(make_source, classes)` for the image files or shards `spec` names: a folder
///         (whose class names are `classes`), a list file, WebDataset or TFRecord shards, read
///         indexed or (where `Streams`) streamed
template <bool Streams = true, class Build>
[[nodiscard]] auto with_file_source(const source_spec& spec, std::uint64_t seed, Build&& build) {
  if constexpr (Streams) {
    if (spec.stream && spec.kind == "webdataset") {
      webdataset_stream_source shards(spec.shards, storage_for(spec), {spec.shuffle_buffer});
      return build(prepared_stream(std::move(shards), spec, seed), std::vector<std::string>{});
    }
    if (spec.stream && spec.kind == "tfrecord") {
      tfrecord_stream_source records(spec.shards, {spec.image_feature, spec.label_feature},
                                     storage_for(spec), {spec.shuffle_buffer});
      return build(prepared_stream(std::move(records), spec, seed), std::vector<std::string>{});
    }
  } else if (spec.stream) {
    detail::fail<config_error>(
        "shards {}: stream=True is decoded on the CPU for now (decoder='cpu'); nvJPEG reads "
        "shards indexed",
        spec.shards.front());
  }
  if (spec.kind == "webdataset") {
    webdataset_source shards =
        spec.indexes.empty()
            ? webdataset_source(spec.shards, storage_for(spec))
            : webdataset_source(spec.shards, shard_indexes{spec.indexes}, storage_for(spec));
    shuffle_shards(shards, spec, seed);
    return build(prepared(std::move(shards), spec), std::vector<std::string>{});
  }
  if (spec.kind == "tfrecord") {
    const tf_image_features features{spec.image_feature, spec.label_feature};
    tfrecord_source records = spec.indexes.empty()
                                  ? tfrecord_source(spec.shards, features, storage_for(spec))
                                  : tfrecord_source(spec.shards, shard_indexes{spec.indexes},
                                                    features, storage_for(spec));
    shuffle_shards(records, spec, seed);
    return build(prepared(std::move(records), spec), std::vector<std::string>{});
  }
  if (spec.kind == "folder") {
    image_folder_source files(spec.path, image_folder_options{spec.extensions});
    if (spec.shuffle) files.shuffle(seed);
    std::vector<std::string> classes = files.classes();
    return build(prepared(std::move(files), spec), std::move(classes));
  }
  image_list_source files(spec.path, spec.root);
  if (spec.shuffle) files.shuffle(seed);
  return build(prepared(std::move(files), spec), std::vector<std::string>{});
}

#if CREMA_PYTHON_LMDB
/// The LMDB `spec` names, opened again at each start of the producers (a source holds its own
/// transaction).
[[nodiscard]] inline std::function<lmdb_source()> prepared_lmdb(const source_spec& spec,
                                                                std::uint64_t seed) {
  return [spec, seed] {
    lmdb_source source(spec.path, {.permute = spec.shuffle, .seed = seed});
    source.shard(spec.rank, spec.world);
    source.balance(spec.balance);
    return source;
  };
}
#endif

}  // namespace crema::python
