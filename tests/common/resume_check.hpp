#pragma once

// Checks that a pipeline stopped anywhere and resumed from its `position()` delivers what an
// uninterrupted run delivers: every batch's records, augmentations (the sample context's
// generator), pass, position, number and size, to every consumer in turn.

#include <crema/pipeline/double_buffered_pipeline.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace crema::test {

inline std::uint64_t mix_in(std::uint64_t seed, std::uint64_t value) noexcept {
  std::uint64_t z = seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Each item: the record's digest (by `Hash`), the record's first draw from its generator, and
// where the context says it came from.
template <class Hash>
struct digest_transform {
  struct item_type {
    std::uint64_t value = 0;
  };
  Hash hash;
  template <class Record>
  void operator()(const Record& record, item_type& item, const sample_context& context) const {
    std::uint64_t value = mix_in(hash(record), context.rng()());
    value = mix_in(value, context.epoch);
    item.value = mix_in(value, context.position);
  }
};

// One batch as a consumer sees it, in one number.
template <class Lease>
std::uint64_t batch_digest(const Lease& batch) {
  std::uint64_t value = mix_in(batch.sequence(), batch.epoch());
  value = mix_in(value, batch.first_position());
  value = mix_in(value, batch.size());
  value = mix_in(value, batch.padding());
  for (const auto& item : batch->items()) value = mix_in(value, item.value);
  return value;
}

// Pulls `pulls` batches from the consumers in turn (0, 1, ..., 0, 1, ...), starting with
// consumer `first_consumer`; an empty lease (the end of a single pass) ends the round early.
template <class Pipe>
std::vector<std::uint64_t> pull_in_turn(Pipe& pipe, std::size_t pulls, std::size_t first_consumer,
                                        bool& ended) {
  std::vector<std::uint64_t> digests;
  const std::size_t consumers = pipe.options().consumers;
  for (std::size_t i = 0; i < pulls; ++i) {
    auto batch = pipe.consumer((first_consumer + i) % consumers).pull();
    if (!batch) {
      ended = true;
      break;
    }
    digests.push_back(batch_digest(batch));
  }
  return digests;
}

// Runs `pulls` batches without a stop, then for each of `stops`: stops after that many pulls,
// resumes from `position()` with a fresh source, pulls the rest; the digests must be the same.
template <class MakeSource, class Hash>
void check_resumes_exactly(const MakeSource& make_source, const Hash& hash,
                           pipeline_options options, std::size_t pulls,
                           const std::vector<std::size_t>& stops) {
  using transform = digest_transform<std::decay_t<Hash>>;
  options.ordered = true;
  bool whole_ended = false;
  std::vector<std::uint64_t> whole;
  {
    double_buffered_pipeline pipe{make_source(), transform{hash}, options};
    whole = pull_in_turn(pipe, pulls, 0, whole_ended);
  }
  REQUIRE(whole.size() >= 1);
  for (const std::size_t stop : stops) {
    CAPTURE(stop);
    std::optional<pipeline_position> saved;
    bool ended = false;
    std::vector<std::uint64_t> resumed;
    {
      double_buffered_pipeline pipe{make_source(), transform{hash}, options};
      resumed = pull_in_turn(pipe, stop, 0, ended);
      saved = pipe.position();
    }
    REQUIRE(saved->batch == resumed.size());
    pipeline_options again = options;
    again.resume_from = saved;
    {
      double_buffered_pipeline pipe{make_source(), transform{hash}, again};
      const std::size_t consumers = options.consumers;
      auto rest =
          pull_in_turn(pipe, whole.size() - resumed.size(), resumed.size() % consumers, ended);
      resumed.insert(resumed.end(), rest.begin(), rest.end());
      if (whole_ended) {  // a single pass: the resumed one ends where the whole one did
        bool after_end = false;
        const auto more = pull_in_turn(pipe, consumers, resumed.size() % consumers, after_end);
        CHECK(more.empty());
        CHECK(after_end);
      }
    }
    CHECK(resumed == whole);
  }
}

}  // namespace crema::test

// A failed check on a position prints it: "{batch 4, epoch 0, position 16}".
template <>
struct doctest::StringMaker<crema::pipeline_position> {
  static doctest::String convert(const crema::pipeline_position& at) {
    const std::string text = "{batch " + std::to_string(at.batch) + ", epoch " +
                             std::to_string(at.epoch) + ", position " +
                             std::to_string(at.position) + "}";
    return doctest::String(text.c_str());
  }
};
