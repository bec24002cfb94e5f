#pragma once

#include <crema/core/error.hpp>
#include <crema/pipeline/pipeline_options.hpp>
#include <crema/pipeline/source.hpp>
#include <crema/pipeline/source_registry.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace crema::detail {

// The reader a pipeline pulls records from; shared through a source_registry by pipelines whose
// sources have the same key. Its lock serializes claims. Pipelines that share a reader share its
// passes, so they must agree on what a pass is: the mode is fixed by the first one.
template <class Source>
struct reader_body {
  reader_body(Source&& from, pipeline_mode chosen)
      : source(std::move(from)), key(source.key()), mode(chosen) {}
  std::mutex mutex;
  Source source;
  std::string key;
  const pipeline_mode mode;
  std::uint64_t epoch = 0;
  std::atomic<bool> exhausted{false};  // a single pass has reached the end; read without the lock
};

inline const char* mode_name(pipeline_mode mode) noexcept {
  return mode == pipeline_mode::repeat ? "repeating" : "single-pass";
}

// The pipeline's own reader of `from`, or the one `options.registry` holds for its key.
// @throws crema::config_error if the registry holds the key for another type of source or
//         another mode
template <class Source>
std::shared_ptr<reader_body<Source>> share_reader(Source&& from, const pipeline_options& options) {
  using body_type = reader_body<Source>;
  if (options.registry == nullptr) {
    return std::make_shared<body_type>(std::move(from), options.mode);
  }
  const std::string key = from.key();
  auto shared = options.registry->template find_or_make<body_type>(
      key, [&] { return std::make_shared<body_type>(std::move(from), options.mode); });
  if (shared->mode != options.mode) {
    fail<config_error>(
        "pipeline: source {} is read by a {} pipeline; a {} pipeline cannot share its reader "
        "(give it another key or registry)",
        key, mode_name(shared->mode), mode_name(options.mode));
  }
  return shared;
}

// Puts a reader where a stopped pipeline's position says: the pass (the source's own, for a source
// that has passes of its own, as a shuffled one has), the position in it, and the pass counter
// that keys the augmentations.
// @throws crema::config_error (from the source) if the position is past the end of the pass
template <class Source>
void resume_reader(reader_body<Source>& reader, const pipeline_position& at) {
  if constexpr (epoch_record_source<Source>) {
    reader.source.set_epoch(reader.source.epoch() + at.epoch);
  }
  reader.source.seek(at.position);
  reader.epoch = at.epoch;
}

}  // namespace crema::detail
