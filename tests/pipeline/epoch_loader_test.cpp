// epoch_loader, and what it stands on: batches that end with their pass in repeat mode, and
// shards balanced across ranks. A training loop's epochs: a known number of batches each, the same
// bytes whatever the thread count, resumed exactly anywhere.
#include <crema/pipeline/epoch_loader.hpp>
#include <crema/pipeline/host_batch.hpp>
#include <crema/pipeline/vector_source.hpp>

#include "common/gate.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace {

using crema::partial_batch;

std::vector<int> numbers(int count) {
  std::vector<int> values(static_cast<std::size_t>(count));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

// Writes each record and a draw of its augmentation generator: a batch's bytes say which records
// it holds and which augmentations they got.
struct number_batcher {
  using batch_type = crema::host_batch<std::int64_t, std::int64_t>;
  [[nodiscard]] batch_type make_batch(const crema::batch_context& where) const {
    return batch_type(where.batch_size, {1, 1, 2});
  }
  void operator()(int record, batch_type& batch, const crema::sample_context& context) const {
    const auto out = batch.record(context.index);
    out[0] = record;
    out[1] = static_cast<std::int64_t>(context.rng().below(1000000));
    batch.set_label(context.index, record % 10);
  }
};

// One delivered batch, as a loop sees it.
struct seen_batch {
  std::uint64_t epoch = 0;
  std::vector<std::int64_t> values;
  std::vector<std::int64_t> labels;
  friend bool operator==(const seen_batch&, const seen_batch&) = default;
};

template <class Lease>
seen_batch see(const Lease& lease) {
  const auto& batch = *lease;
  const std::size_t size = lease.size();
  return {lease.epoch(),
          std::vector<std::int64_t>(batch.data.begin(),
                                    batch.data.begin() + static_cast<long>(size * 2)),
          std::vector<std::int64_t>(batch.labels.begin(),
                                    batch.labels.begin() + static_cast<long>(size))};
}

auto shuffled_numbers(int count, std::size_t rank = 0, std::size_t world = 1,
                      crema::shard_balance balance = crema::shard_balance::none) {
  return [=] {
    crema::vector_source<int> source(numbers(count));
    source.shuffle(7);
    source.shard(rank, world);
    source.balance(balance);
    return source;
  };
}

using loader_type = crema::epoch_loader<crema::vector_source<int>, number_batcher>;

// Every batch of `epochs` epochs, each epoch started as a loop starts it.
std::vector<seen_batch> read_epochs(loader_type& loader, std::uint64_t first,
                                    std::uint64_t epochs) {
  std::vector<seen_batch> seen;
  for (std::uint64_t epoch = first; epoch < first + epochs; ++epoch) {
    loader.start_epoch(epoch);
    while (auto lease = loader.next()) seen.push_back(see(lease));
  }
  return seen;
}

}  // namespace

TEST_SUITE("epoch_loader") {
  TEST_CASE(
      "in repeat mode, batches that end with their pass hold one pass each: the last kept "
      "short, dropped or padded") {
    crema::test::watchdog guard(std::chrono::seconds(60), "batches end with their pass");
    for (const partial_batch last :
         {partial_batch::keep, partial_batch::drop, partial_batch::pad}) {
      for (const std::size_t producers : {1U, 3U}) {
        CAPTURE(static_cast<int>(last));
        CAPTURE(producers);
        crema::double_buffered_pipeline pipe{crema::vector_source<int>(numbers(10)),
                                             number_batcher{},
                                             {.batch_size = 4,
                                              .producers = producers,
                                              .threads = 2,
                                              .last_batch = last,
                                              .batches_end_with_pass = true,
                                              .ordered = true}};
        auto consumer = pipe.consumer(0);
        const std::size_t per_pass = last == partial_batch::drop ? 2 : 3;
        for (std::uint64_t pass = 0; pass < 3; ++pass) {
          for (std::size_t i = 0; i < per_pass; ++i) {
            const auto lease = consumer.pull();
            REQUIRE(lease);
            CHECK(lease.epoch() == pass);
            CHECK(lease.first_position() == i * 4);
            const seen_batch batch = see(lease);
            const bool last_of_pass = i == 2;
            CHECK(lease.size() == (last_of_pass && last == partial_batch::keep ? 2U : 4U));
            CHECK(lease.padding() == (last_of_pass && last == partial_batch::pad ? 2U : 0U));
            for (std::size_t r = 0; r < lease.size(); ++r) {
              const std::size_t record = i * 4 + (r < 4 - lease.padding() ? r : r - 2);
              CHECK(batch.values[2 * r] == static_cast<std::int64_t>(record));
            }
          }
        }
      }
    }
  }

  TEST_CASE(
      "balanced shards give every rank the same batches per epoch, disjoint when dropped "
      "and covering the data when padded") {
    for (const partial_batch last :
         {partial_batch::keep, partial_batch::drop, partial_batch::pad}) {
      const auto balance =
          last == partial_batch::drop ? crema::shard_balance::drop : crema::shard_balance::pad;
      std::set<std::int64_t> seen;
      std::size_t total = 0;
      std::uint64_t batches = 0;
      for (std::size_t rank = 0; rank < 3; ++rank) {
        loader_type loader(shuffled_numbers(23, rank, 3, balance), number_batcher{},
                           {.batch_size = 3, .threads = 2, .last_batch = last});
        if (rank == 0) batches = loader.batches_per_epoch();
        CHECK(loader.batches_per_epoch() == batches);
        const auto epoch = read_epochs(loader, 0, 1);
        CHECK(epoch.size() == batches);
        for (const seen_batch& batch : epoch) {
          for (std::size_t r = 0; r < batch.labels.size(); ++r) {
            seen.insert(batch.values[2 * r]);
            ++total;
          }
        }
      }
      CAPTURE(static_cast<int>(last));
      if (last == partial_batch::drop) {
        CHECK(batches == 7 / 3);  // 23 / 3 = 7 records a rank
        CHECK(total == seen.size());
      } else {
        CHECK(batches == 3);  // 8 records a rank
        CHECK(seen.size() == 23U);
      }
    }
  }

  TEST_CASE(
      "an epoch loader gives the same batches whatever its thread count, another "
      "augmentation every epoch") {
    crema::test::watchdog guard(std::chrono::seconds(60), "epoch loader threads");
    std::vector<seen_batch> reference;
    for (const std::size_t threads : {1U, 2U, 4U}) {
      loader_type loader(shuffled_numbers(23), number_batcher{},
                         {.batch_size = 5, .threads = threads, .seed = 3});
      CHECK(loader.batches_per_epoch() == 5);
      CHECK_FALSE(loader.running());  // nothing starts before the first batch is asked for
      const auto seen = read_epochs(loader, 0, 3);
      CHECK(loader.running());
      REQUIRE(seen.size() == 15);
      if (reference.empty()) {
        reference = seen;
        // Every epoch holds every record once, in another order, with other augmentations.
        for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
          std::vector<std::int64_t> records;
          for (std::size_t b = 0; b < 5; ++b) {
            const seen_batch& batch = seen[epoch * 5 + b];
            CHECK(batch.epoch == epoch);
            for (std::size_t r = 0; r < batch.labels.size(); ++r) {
              records.push_back(batch.values[2 * r]);
            }
          }
          std::sort(records.begin(), records.end());
          std::vector<std::int64_t> all(23);
          std::iota(all.begin(), all.end(), std::int64_t{0});
          CHECK(records == all);
        }
        CHECK(seen[0].values != seen[5].values);
      } else {
        CHECK(seen == reference);
      }
    }
  }

  TEST_CASE(
      "an epoch loader resumed at any batch, or left mid-epoch, delivers what one never "
      "stopped delivers") {
    crema::test::watchdog guard(std::chrono::seconds(60), "epoch loader resume");
    loader_type whole(shuffled_numbers(17), number_batcher{},
                      {.batch_size = 4, .threads = 2, .seed = 9, .last_batch = partial_batch::pad});
    const auto reference = read_epochs(whole, 0, 3);
    REQUIRE(reference.size() == 15);
    for (std::size_t stop = 0; stop < reference.size(); ++stop) {
      CAPTURE(stop);
      crema::loader_position saved;
      {
        loader_type first(
            shuffled_numbers(17), number_batcher{},
            {.batch_size = 4, .threads = 3, .seed = 9, .last_batch = partial_batch::pad});
        first.seek({0, 0});
        for (std::size_t i = 0; i < stop; ++i) {
          if (first.position().batch == first.batches_per_epoch()) {
            first.start_epoch(first.position().epoch + 1);
          }
          CHECK(see(first.next()) == reference[i]);
        }
        saved = first.position();
      }
      loader_type resumed(
          shuffled_numbers(17), number_batcher{},
          {.batch_size = 4, .threads = 1, .seed = 9, .last_batch = partial_batch::pad});
      resumed.seek(saved);
      std::size_t i = stop;
      while (i < reference.size()) {
        auto lease = resumed.next();
        if (!lease) {
          resumed.start_epoch(resumed.position().epoch + 1);
          continue;
        }
        CHECK(see(lease) == reference[i]);
        ++i;
      }
    }
    // An epoch left after two batches: the next epoch starts at its first batch all the same.
    loader_type left(shuffled_numbers(17), number_batcher{},
                     {.batch_size = 4, .threads = 2, .seed = 9, .last_batch = partial_batch::pad});
    (void)left.next();
    (void)left.next();
    left.start_epoch(1);
    for (std::size_t i = 5; i < 10; ++i) CHECK(see(left.next()) == reference[i]);
    CHECK_FALSE(left.next());
  }

  TEST_CASE("a transform that does not return is named by next() after hang_timeout") {
    crema::test::watchdog guard(std::chrono::seconds(30), "epoch loader hang");
    crema::test::gate release;
    struct hanging_batcher : number_batcher {
      crema::test::gate* release = nullptr;
      void operator()(int record, batch_type& batch, const crema::sample_context& context) const {
        if (record == 5) release->wait();
        number_batcher::operator()(record, batch, context);
      }
    };
    hanging_batcher batcher;
    batcher.release = &release;
    std::string message;
    {
      crema::epoch_loader<crema::vector_source<int>, hanging_batcher> loader(
          [] { return crema::vector_source<int>(numbers(12)); }, batcher,
          {.batch_size = 4, .threads = 1, .hang_timeout = std::chrono::milliseconds(200)});
      REQUIRE(loader.next());  // records 0 to 3
      try {
        (void)loader.next();
      } catch (const crema::pipeline_error& error) {
        message = error.what();
      }
      release.open();  // the producer returns, and the loader can stop
    }
    CHECK(message.find("has been transforming record 5 (pass 0)") != std::string::npos);
  }

  TEST_CASE("batches kept past the loader stay valid, and a closed loader delivers nothing") {
    loader_type loader(shuffled_numbers(8), number_batcher{}, {.batch_size = 4, .threads = 2});
    CHECK(loader.slots() == 4);  // the pipeline's default for 2 threads
    auto kept = loader.next();
    const seen_batch before = see(kept);
    loader.close();
    CHECK(loader.next_for(std::chrono::milliseconds(1)).status == crema::pull_status::stopped);
    CHECK(see(kept) == before);
    // The lease owns its batch until it gives it back: the consumer may write it.
    kept->data[0] = -1;
    CHECK((*kept).data[0] == -1);
  }

  TEST_CASE(
      "an epoch loader refuses a shard without records, an epoch shorter than a dropped "
      "batch, and a position past its epoch, naming the source") {
    CHECK_THROWS_WITH_AS(
        loader_type(shuffled_numbers(2, 2, 3), number_batcher{}, {.batch_size = 1}),
        doctest::Contains("holds no record in this shard"), crema::config_error);
    CHECK_THROWS_WITH_AS(
        loader_type(shuffled_numbers(3), number_batcher{},
                    {.batch_size = 4, .last_batch = partial_batch::drop}),
        doctest::Contains("holds 3 records in this shard, fewer than a batch of 4"),
        crema::config_error);
    loader_type loader(shuffled_numbers(8), number_batcher{}, {.batch_size = 4});
    CHECK_THROWS_WITH_AS(loader.seek({0, 3}), doctest::Contains("batch 3 is past the 2 batches"),
                         crema::config_error);
  }
}
