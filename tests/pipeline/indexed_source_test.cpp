// indexed_source: two functions make a source with sharding, positions and an exact shuffle; and
// records that are views into a buffer the source reuses reach the transform intact.

#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/indexed_source.hpp>

#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;

// The indices of `at` one pass of `source` visits.
std::vector<std::size_t> one_pass(crema::indexed_source<std::size_t>& source) {
  std::vector<std::size_t> seen;
  while (const std::size_t* record = source.next()) seen.push_back(*record);
  return seen;
}

crema::indexed_source<std::size_t> identity_source(std::size_t size) {
  return crema::indexed_source<std::size_t>(
      size, [](std::size_t i) { return i; }, "identity");
}

std::vector<std::size_t> iota(std::size_t size) {
  std::vector<std::size_t> all(size);
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

}  // namespace

TEST_SUITE("indexed_source") {
  TEST_CASE("shards are disjoint and together complete, for worlds 1 to 5, shuffled or not, in "
            "every epoch") {
    for (const bool shuffled : {false, true}) {
      for (std::size_t world = 1; world <= 5; ++world) {
        for (std::uint64_t epoch : {0ULL, 1ULL, 7ULL}) {
          CAPTURE(shuffled);
          CAPTURE(world);
          CAPTURE(epoch);
          std::vector<std::size_t> all;
          for (std::size_t rank = 0; rank < world; ++rank) {
            auto source = identity_source(103);
            if (shuffled) source.shuffle(99);
            source.shard(rank, world);
            source.set_epoch(epoch);
            const auto part = one_pass(source);
            CHECK(part.size() == source.shard_size());
            all.insert(all.end(), part.begin(), part.end());
          }
          std::sort(all.begin(), all.end());
          CHECK(all == iota(103));
        }
      }
    }
  }

  TEST_CASE("a shuffled pass is a permutation, another in each epoch, the same on every run") {
    auto source = identity_source(500);
    source.shuffle(2026);
    const auto first = one_pass(source);
    source.rewind();
    CHECK(source.epoch() == 1);
    const auto second = one_pass(source);
    auto sorted = first;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == iota(500));
    CHECK(first != iota(500));
    CHECK(first != second);
    auto again = identity_source(500);
    again.shuffle(2026);
    CHECK(one_pass(again) == first);
  }

  TEST_CASE("position and seek resume a pass, and a position past the end is refused") {
    auto source = identity_source(10);
    source.shuffle(5);
    source.shard(1, 3);  // 3 records
    const auto whole = one_pass(source);
    REQUIRE(whole.size() == 3);
    source.seek(1);
    CHECK(source.position() == 1);
    CHECK(*source.next() == whole[1]);
    CHECK(*source.next() == whole[2]);
    CHECK(source.next() == nullptr);
    CHECK_THROWS_WITH_AS(
        source.seek(4),
        "indexed_source: position 4 is past the end of indexed:identity (shard 1 of 3 holds 3 "
        "records)",
        crema::config_error);
  }

  TEST_CASE("a pipeline over an indexed source reads every record once per pass") {
    crema::test::watchdog guard(30s, "indexed pipeline");
    auto source = crema::indexed_source<std::string>(
        300, [](std::size_t i) { return fmt::format("record-{}", i); }, "strings");
    source.shuffle(3);
    crema::double_buffered_pipeline pipe{
        std::move(source),
        [](const std::string& record) { return record; },
        {.batch_size = 16, .producers = 3, .threads = 2, .mode = crema::pipeline_mode::single_pass}};
    std::set<std::string> seen;
    std::size_t count = 0;
    for (auto batch : pipe.consumer(0)) {
      for (const auto& record : *batch) {
        seen.insert(record);
        ++count;
      }
    }
    CHECK(count == 300);
    CHECK(seen.size() == 300);
  }
}

namespace {

// A source whose records are views into one buffer it rewrites for every record, as a reader
// over a reused decode buffer or a cursor would be.
class reused_buffer_source {
 public:
  using record_type = std::span<const int>;
  static constexpr bool records_are_stable = false;

  explicit reused_buffer_source(int count) : count_(count) {}
  const record_type* next() {
    if (position_ >= static_cast<crema::record_position>(count_)) return nullptr;
    const int value = static_cast<int>(position_++);
    std::fill(buffer_.begin(), buffer_.end(), value);  // overwrites the last record's bytes
    view_ = record_type(buffer_);
    return &view_;
  }
  void rewind() { position_ = 0; }
  void shard(std::size_t, std::size_t) {}
  [[nodiscard]] crema::record_position position() const { return position_; }
  void seek(crema::record_position position) { position_ = position; }
  [[nodiscard]] std::string key() const { return "reused:buffer"; }

 private:
  int count_;
  crema::record_position position_ = 0;
  std::vector<int> buffer_ = std::vector<int>(8);
  record_type view_;
};

}  // namespace

TEST_SUITE("record lifetime") {
  TEST_CASE("records that are views into a buffer the source reuses are copied before the next "
            "is read") {
    crema::test::watchdog guard(30s, "view records");
    const auto sum_of = [](const std::span<const int>& record) {
      return std::accumulate(record.begin(), record.end(), 0);
    };
    crema::double_buffered_pipeline pipe{reused_buffer_source(200),
                                         sum_of,
                                         {.batch_size = 10,
                                          .producers = 3,
                                          .threads = 2,
                                          .mode = crema::pipeline_mode::single_pass,
                                          .ordered = true}};
    int expected = 0;
    for (auto batch : pipe.consumer(0)) {
      for (int sum : *batch) CHECK(sum == 8 * expected++);
    }
    CHECK(expected == 200);
  }
}
