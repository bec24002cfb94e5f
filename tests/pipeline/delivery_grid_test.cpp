// Exactly-once delivery in single-pass mode over the grid producers 1..8, threads 1..4,
// consumers 1..4, prefetch 1..8, batch sizes {1, 7, 64}, source sizes {0, 1, 997, 20011}, and
// ordered or not. The unit suite runs a pairwise-covering subset (every pair of values of any two
// parameters appears in some run); CREMA_FULL_GRID builds the whole grid (label slow).
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/watchdog.hpp"
#include "pipeline/delivery.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <numeric>
#include <set>
#include <vector>

namespace {

struct grid_point {
  std::size_t producers, threads, consumers, prefetch, batch_size, source_size;
  bool ordered;
};

const std::vector<std::vector<std::size_t>> levels{
    {1, 2, 3, 4, 5, 6, 7, 8},  // producers
    {1, 2, 3, 4},              // threads
    {1, 2, 3, 4},              // consumers
    {1, 2, 3, 4, 5, 6, 7, 8},  // prefetch
    {1, 7, 64},                // batch size
    {0, 1, 997, 20011},        // source size
    {0, 1},                    // ordered
};

grid_point to_point(const std::vector<std::size_t>& choice) {
  return {levels[0][choice[0]], levels[1][choice[1]], levels[2][choice[2]], levels[3][choice[3]],
          levels[4][choice[4]], levels[5][choice[5]], choice[6] == 1};
}

// A deterministic greedy pairwise cover: each new row takes, parameter by parameter, the value
// that covers the most pairs not yet covered.
[[maybe_unused]] std::vector<grid_point> pairwise_points() {
  const std::size_t n = levels.size();
  std::set<std::array<std::size_t, 4>> uncovered;  // (parameter a, value, parameter b, value)
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      for (std::size_t x = 0; x < levels[a].size(); ++x) {
        for (std::size_t y = 0; y < levels[b].size(); ++y) uncovered.insert({a, x, b, y});
      }
    }
  }
  std::vector<grid_point> points;
  while (!uncovered.empty()) {
    // Start from the first uncovered pair so that every row makes progress.
    const auto seed = *uncovered.begin();
    std::vector<std::size_t> row(n, 0);
    std::vector<bool> fixed(n, false);
    row[seed[0]] = seed[1];
    row[seed[2]] = seed[3];
    fixed[seed[0]] = fixed[seed[2]] = true;
    for (std::size_t parameter = 0; parameter < n; ++parameter) {
      if (fixed[parameter]) continue;
      std::size_t best = 0;
      std::size_t best_gain = 0;
      for (std::size_t value = 0; value < levels[parameter].size(); ++value) {
        std::size_t gain = 0;
        for (std::size_t other = 0; other < n; ++other) {
          if (!fixed[other] || other == parameter) continue;
          const auto pair = parameter < other
                                ? std::array<std::size_t, 4>{parameter, value, other, row[other]}
                                : std::array<std::size_t, 4>{other, row[other], parameter, value};
          gain += uncovered.count(pair);
        }
        if (gain > best_gain) {
          best_gain = gain;
          best = value;
        }
      }
      row[parameter] = best;
      fixed[parameter] = true;
    }
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = a + 1; b < n; ++b) uncovered.erase({a, row[a], b, row[b]});
    }
    points.push_back(to_point(row));
  }
  return points;
}

[[maybe_unused]] std::vector<grid_point> all_points() {
  std::vector<grid_point> points;
  std::vector<std::size_t> choice(levels.size(), 0);
  for (;;) {
    points.push_back(to_point(choice));
    std::size_t digit = 0;
    while (digit < choice.size() && ++choice[digit] == levels[digit].size()) choice[digit++] = 0;
    if (digit == choice.size()) return points;
  }
}

void check_exactly_once(const grid_point& point) {
  CAPTURE(point.producers);
  CAPTURE(point.threads);
  CAPTURE(point.consumers);
  CAPTURE(point.prefetch);
  CAPTURE(point.batch_size);
  CAPTURE(point.source_size);
  CAPTURE(point.ordered);
  std::vector<int> records(point.source_size);
  std::iota(records.begin(), records.end(), 0);
  crema::double_buffered_pipeline pipe{crema::vector_source<int>(std::move(records)),
                                       [](const int& record) { return record; },
                                       {.batch_size = point.batch_size,
                                        .prefetch = point.prefetch,
                                        .producers = point.producers,
                                        .threads = point.threads,
                                        .consumers = point.consumers,
                                        .mode = crema::pipeline_mode::single_pass,
                                        .ordered = point.ordered}};
  const auto delivered = crema::test::drain_on_threads(pipe);

  std::vector<int> all;
  for (const auto& consumer : delivered) {
    // Each consumer's batches are numbered 0, 1, 2, ...: in order when ordered, a permutation
    // otherwise.
    std::vector<std::uint64_t> sequences = consumer.sequences;
    if (!point.ordered) std::sort(sequences.begin(), sequences.end());
    for (std::size_t i = 0; i < sequences.size(); ++i) REQUIRE(sequences[i] == i);
    if (point.ordered) REQUIRE(std::is_sorted(consumer.records.begin(), consumer.records.end()));
    all.insert(all.end(), consumer.records.begin(), consumer.records.end());
  }
  std::sort(all.begin(), all.end());
  REQUIRE(all.size() == point.source_size);
  for (std::size_t i = 0; i < all.size(); ++i) REQUIRE(all[i] == static_cast<int>(i));
}

}  // namespace

#ifdef CREMA_FULL_GRID
TEST_CASE("every record is delivered exactly once over the whole grid") {
  for (const auto& point : all_points()) {
    crema::test::watchdog guard(std::chrono::seconds(60), "one grid point");
    check_exactly_once(point);
  }
}
#else
TEST_CASE("every record is delivered exactly once over a pairwise cover of the grid") {
  const auto points = pairwise_points();
  CHECK(points.size() >= 64);  // 8 producer counts x 8 prefetch depths at the least
  for (const auto& point : points) {
    crema::test::watchdog guard(std::chrono::seconds(60), "one grid point");
    check_exactly_once(point);
  }
}
#endif
