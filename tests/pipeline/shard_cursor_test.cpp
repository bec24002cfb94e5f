// shard_cursor: the one place where sharding, shuffling, epochs and seeking of indexed sources
// are worked out; then every source over numbered records is checked to follow it.

#include <crema/pipeline/indexed_source.hpp>
#include <crema/pipeline/shard_cursor.hpp>
#include <crema/pipeline/vector_source.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

namespace {

// The indices in the whole data that one pass of `cursor` visits, from where it stands.
std::vector<std::uint64_t> drain(crema::shard_cursor& cursor) {
  std::vector<std::uint64_t> seen;
  while (!cursor.exhausted()) {
    seen.push_back(cursor.next_index());
    cursor.advance();
  }
  return seen;
}

std::vector<std::uint64_t> iota(std::uint64_t size) {
  std::vector<std::uint64_t> all(size);
  std::iota(all.begin(), all.end(), std::uint64_t{0});
  return all;
}

// The pass of any source whose records are their own index.
template <class Source>
std::vector<std::uint64_t> one_pass(Source& source) {
  std::vector<std::uint64_t> seen;
  while (const auto* record = source.next()) seen.push_back(*record);
  return seen;
}

}  // namespace

TEST_SUITE("shard_cursor") {
  TEST_CASE(
      "the shards of a world are disjoint and together complete, for every world size up "
      "to the record count and past it, shuffled or not, in every epoch") {
    for (const std::uint64_t records : {1ULL, 2ULL, 7ULL, 64ULL, 103ULL}) {
      for (std::size_t world = 1; world <= 9; ++world) {
        for (const std::optional<std::uint64_t> seed :
             {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{42}}) {
          for (const std::uint64_t epoch : {0ULL, 1ULL, 5ULL}) {
            CAPTURE(records);
            CAPTURE(world);
            CAPTURE(seed.has_value());
            CAPTURE(epoch);
            std::vector<std::uint64_t> all;
            std::uint64_t sizes = 0;
            for (std::size_t rank = 0; rank < world; ++rank) {
              crema::shard_cursor cursor(records);
              cursor.shuffle(seed);
              cursor.shard(rank, world);
              cursor.set_epoch(epoch);
              const auto part = drain(cursor);
              CHECK(part.size() == cursor.size());
              // Shards differ in size by at most one record, the first ranks holding more.
              CHECK(cursor.size() == records / world + (rank < records % world ? 1 : 0));
              sizes += cursor.size();
              all.insert(all.end(), part.begin(), part.end());
            }
            CHECK(sizes == records);
            std::sort(all.begin(), all.end());
            CHECK(all == iota(records));
          }
        }
      }
    }
  }

  TEST_CASE(
      "balanced shards hold the same number of records on every rank: padded ones read "
      "every record, the pass's first again, and dropped ones read each record once at most") {
    for (const std::uint64_t records : {1ULL, 2ULL, 7ULL, 64ULL, 103ULL}) {
      for (std::size_t world = 1; world <= 9; ++world) {
        for (const std::optional<std::uint64_t> seed :
             {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{42}}) {
          CAPTURE(records);
          CAPTURE(world);
          CAPTURE(seed.has_value());
          std::vector<std::uint64_t> padded;
          std::vector<std::uint64_t> dropped;
          std::vector<std::uint64_t> order;  // the pass's records by ordinal, unsharded
          {
            crema::shard_cursor whole(records);
            whole.shuffle(seed);
            whole.set_epoch(3);
            order = drain(whole);
          }
          for (std::size_t rank = 0; rank < world; ++rank) {
            for (const crema::shard_balance balance :
                 {crema::shard_balance::pad, crema::shard_balance::drop}) {
              crema::shard_cursor cursor(records);
              cursor.shuffle(seed);
              cursor.shard(rank, world);
              cursor.balance(balance);
              cursor.set_epoch(3);
              const auto part = drain(cursor);
              CHECK(part.size() == cursor.size());
              if (balance == crema::shard_balance::pad) {
                CHECK(part.size() == (records + world - 1) / world);
                // Past the end, the ordinals wrap to the pass's first, as DistributedSampler's.
                for (std::size_t p = 0; p < part.size(); ++p) {
                  CHECK(part[p] == order[(rank + p * world) % records]);
                }
                padded.insert(padded.end(), part.begin(), part.end());
              } else {
                CHECK(part.size() == records / world);
                dropped.insert(dropped.end(), part.begin(), part.end());
              }
            }
          }
          std::sort(padded.begin(), padded.end());
          padded.erase(std::unique(padded.begin(), padded.end()), padded.end());
          CHECK(padded == iota(records));
          std::sort(dropped.begin(), dropped.end());
          CHECK(std::adjacent_find(dropped.begin(), dropped.end()) == dropped.end());
          CHECK(dropped.size() == records / world * world);
        }
      }
    }
  }

  TEST_CASE("a balanced source seeks and resumes in its padded pass like any other") {
    std::vector<std::uint64_t> values(10);
    std::iota(values.begin(), values.end(), std::uint64_t{0});
    crema::vector_source<std::uint64_t> source(values);
    source.shard(3, 4);
    source.balance(crema::shard_balance::pad);
    CHECK(one_pass(source) == std::vector<std::uint64_t>{3, 7, 1});
    source.seek(2);
    CHECK(one_pass(source) == std::vector<std::uint64_t>{1});
    source.balance(crema::shard_balance::drop);
    CHECK(one_pass(source) == std::vector<std::uint64_t>{3, 7});
  }

  TEST_CASE("in order, rank r of w reads records r, r + w, r + 2w, ...") {
    crema::shard_cursor cursor(10);
    cursor.shard(1, 3);
    CHECK(drain(cursor) == std::vector<std::uint64_t>{1, 4, 7});
    CHECK(cursor.ordinal_at(2) == 7);
  }

  TEST_CASE(
      "a shuffled pass is another permutation each epoch, the same for the same seed and "
      "epoch, and rewind counts the epochs") {
    crema::shard_cursor cursor(200);
    cursor.shuffle(7);
    const auto first = drain(cursor);
    cursor.rewind();
    CHECK(cursor.epoch() == 1);
    CHECK(cursor.position() == 0);
    const auto second = drain(cursor);
    CHECK(first != second);
    CHECK(first != iota(200));
    auto sorted = second;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == iota(200));

    crema::shard_cursor again(200);
    again.shuffle(7);
    again.set_epoch(1);
    CHECK(drain(again) == second);
    again.shuffle(std::nullopt);
    CHECK(drain(again) == iota(200));  // unshuffled from now on, still in epoch 1
    CHECK(again.epoch() == 1);
  }

  TEST_CASE("a copy of a cursor is a saved position: the copy goes on where the original was") {
    crema::shard_cursor cursor(50);
    cursor.shuffle(3);
    cursor.shard(2, 4);
    cursor.set_epoch(6);
    for (int i = 0; i < 5; ++i) cursor.advance();
    const crema::shard_cursor saved = cursor;
    const auto rest = drain(cursor);
    crema::shard_cursor resumed = saved;
    CHECK(resumed.position() == 5);
    CHECK(drain(resumed) == rest);
  }

  TEST_CASE(
      "seek moves to any position up to the end of the pass and refuses one past it, "
      "naming the source, the position and the shard") {
    crema::shard_cursor cursor(10);
    cursor.shuffle(1);
    cursor.shard(1, 3);  // 3 records
    const auto whole = drain(cursor);
    cursor.seek(1, "test_source", "test:ten");
    CHECK(cursor.next_index() == whole[1]);
    cursor.seek(3, "test_source", "test:ten");
    CHECK(cursor.exhausted());
    CHECK_THROWS_WITH_AS(cursor.seek(4, "test_source", "test:ten"),
                         "test_source: position 4 is past the end of test:ten (shard 1 of 3 "
                         "holds 3 records)",
                         crema::config_error);
    CHECK(cursor.position() == 3);  // a refused seek moves nothing
  }

  TEST_CASE("shard refuses a rank outside its world and a world of 0, and keeps the old shard") {
    crema::shard_cursor cursor(10);
    cursor.shard(1, 2);
    CHECK_THROWS_AS(cursor.shard(2, 2), crema::config_error);
    CHECK_THROWS_AS(cursor.shard(0, 0), crema::config_error);
    CHECK(cursor.rank() == 1);
    CHECK(cursor.world() == 2);
  }

  TEST_CASE("shard, shuffle and set_epoch start the pass again, and restart keeps the epoch") {
    crema::shard_cursor cursor(20);
    cursor.set_epoch(2);
    cursor.advance();
    cursor.restart();
    CHECK(cursor.position() == 0);
    CHECK(cursor.epoch() == 2);
    cursor.advance();
    cursor.shard(0, 2);
    CHECK(cursor.position() == 0);
    cursor.advance();
    cursor.shuffle(9);
    CHECK(cursor.position() == 0);
    CHECK(cursor.seed() == 9);
  }

  TEST_CASE(
      "a rank past the last record holds an empty shard, and an empty data set has no "
      "record") {
    crema::shard_cursor cursor(2);
    cursor.shard(4, 5);
    CHECK(cursor.size() == 0);
    CHECK(cursor.exhausted());
    crema::shard_cursor empty;
    empty.shuffle(1);
    CHECK(empty.exhausted());
    CHECK(drain(empty).empty());
  }
}

TEST_SUITE("shard_cursor through each source") {
  // Each source over numbered records must visit exactly the cursor's indices for the same
  // records, shard, seed and epoch (the LMDB and image sources are checked in their own suites).
  TEST_CASE(
      "vector_source and indexed_source follow the cursor, shuffled or not, in every shard "
      "and epoch, and report it") {
    const std::uint64_t records = 37;
    std::vector<std::uint64_t> values(records);
    std::iota(values.begin(), values.end(), std::uint64_t{0});
    for (const bool shuffled : {false, true}) {
      for (std::size_t world : {1, 3}) {
        for (std::size_t rank = 0; rank < world; ++rank) {
          for (const std::uint64_t epoch : {0ULL, 4ULL}) {
            CAPTURE(shuffled);
            CAPTURE(rank);
            CAPTURE(world);
            CAPTURE(epoch);
            crema::shard_cursor expected(records);
            if (shuffled) expected.shuffle(11);
            expected.shard(rank, world);
            expected.set_epoch(epoch);
            const auto want = drain(expected);

            crema::vector_source<std::uint64_t> vector(values, "numbers");
            auto indexed = crema::indexed_source<std::uint64_t>(
                records, [](std::size_t i) { return std::uint64_t{i}; }, "numbers");
            if (shuffled) {
              vector.shuffle(11);
              indexed.shuffle(11);
            }
            vector.shard(rank, world);
            indexed.shard(rank, world);
            vector.set_epoch(epoch);
            indexed.set_epoch(epoch);
            CHECK(one_pass(vector) == want);
            CHECK(one_pass(indexed) == want);
            CHECK(vector.cursor().position() == want.size());
            CHECK(indexed.cursor().epoch() == epoch);
          }
        }
      }
    }
  }

  TEST_CASE("vector_source counts its epochs, and a resumed pass delivers the rest of it") {
    std::vector<int> values(12);
    std::iota(values.begin(), values.end(), 0);
    crema::vector_source<int> source(values, "twelve");
    source.shuffle(5);
    while (source.next() != nullptr) {
    }
    source.rewind();
    CHECK(source.epoch() == 1);
    std::vector<int> first_half;
    for (int i = 0; i < 6; ++i) first_half.push_back(*source.next());
    const auto saved = source.position();
    std::vector<int> rest;
    while (const int* record = source.next()) rest.push_back(*record);

    crema::vector_source<int> resumed(values, "twelve");
    resumed.shuffle(5);
    resumed.set_epoch(1);
    resumed.seek(saved);
    std::vector<int> resumed_rest;
    while (const int* record = resumed.next()) resumed_rest.push_back(*record);
    CHECK(resumed_rest == rest);
  }
}
