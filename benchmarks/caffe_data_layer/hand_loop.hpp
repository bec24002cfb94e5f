#pragma once

// The hand-written data layer that crema's is measured against: on n threads, each its own LMDB
// cursor over every n-th record, decode, crop, mirror, mean and scale into a batch buffer of its
// own, every store through the caches, no pipeline. Shared by crema-bench-caffe_data_layer and
// the GPU data-layer benchmark (the same host's loop in the same run).

#include <crema/io/caffe/caffe_transform.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/lmdb/lmdb_environment.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>

#include "caffe_data_layer/shape.hpp"

#include <benchmark/benchmark.h>
#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

namespace crema::bench::data_layer {

// A read transaction and cursor of the process's environment for the database, for one thread.
class cursor {
 public:
  explicit cursor(const std::filesystem::path& path)
      : env_(crema::lmdb_environment::open(path, crema::lmdb_environment::access::read,
                                           "baseline")) {
    crema::detail::lmdb_check(mdb_txn_begin(env_->get(), nullptr, MDB_RDONLY, &txn_),
                              "baseline: txn", path);
    crema::detail::lmdb_check(mdb_dbi_open(txn_, nullptr, 0, &dbi_), "baseline: dbi", path);
    crema::detail::lmdb_check(mdb_cursor_open(txn_, dbi_, &cursor_), "baseline: cursor", path);
  }
  cursor(const cursor&) = delete;
  cursor& operator=(const cursor&) = delete;
  ~cursor() {
    mdb_cursor_close(cursor_);
    mdb_txn_abort(txn_);
  }
  // Calls visit(ordinal, key, value) for every record in order.
  template <class Visit>
  void scan(Visit visit) {
    MDB_val key{};
    MDB_val value{};
    std::size_t ordinal = 0;
    for (int got = mdb_cursor_get(cursor_, &key, &value, MDB_FIRST); got == MDB_SUCCESS;
         got = mdb_cursor_get(cursor_, &key, &value, MDB_NEXT)) {
      visit(ordinal++, key, value);
    }
  }

 private:
  std::shared_ptr<crema::lmdb_environment> env_;
  MDB_txn* txn_ = nullptr;
  MDB_dbi dbi_ = 0;
  MDB_cursor* cursor_ = nullptr;
};

// With `Prefetch`, the loop keeps one record in hand and asks for the next one's bytes before it
// works on it, as crema's producers do (`lmdb_source::prefetch`); the plain loop does not.
template <bool Prefetch>
void hand_loop(benchmark::State& state, const dataset& set) {
  const database& db = database_of(set);
  const auto threads = static_cast<std::size_t>(state.range(0));
  const crema::caffe_transform transform = transform_of(set);
  const std::size_t elements = 3 * set.crop * set.crop;
  std::uint64_t epoch = 0;
  for (auto _ : state) {
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        cursor reader(db.path());
        std::vector<float> data(set.batch * elements);
        std::vector<float> labels(set.batch);
        std::size_t filled = 0;
        const auto work = [&](std::size_t ordinal, const MDB_val& key, const MDB_val& value) {
          const std::string_view name(static_cast<const char*>(key.mv_data), key.mv_size);
          const crema::datum_view datum = crema::decode_datum(
              {static_cast<const std::byte*>(value.mv_data), value.mv_size}, name);
          crema::sample_rng rng(7, epoch, ordinal);
          const auto view = crema::image_view<std::uint8_t>::planar(
              reinterpret_cast<const std::uint8_t*>(datum.data.data()), 3, set.side, set.side);
          transform(view, std::span<float>(data).subspan(filled * elements, elements), rng, name);
          labels[filled] = static_cast<float>(datum.label);
          if (++filled == set.batch) {
            benchmark::DoNotOptimize(data.data());
            filled = 0;
          }
        };
        struct held {
          std::size_t ordinal;
          MDB_val key;
          MDB_val value;
        };
        std::optional<held> in_hand;
        reader.scan([&](std::size_t ordinal, const MDB_val& key, const MDB_val& value) {
          if (ordinal % threads != t) return;
          if constexpr (Prefetch) {
            crema::lmdb_source::prefetch(
                {{}, {static_cast<const std::byte*>(value.mv_data), value.mv_size}});
            if (in_hand) work(in_hand->ordinal, in_hand->key, in_hand->value);
            in_hand = held{ordinal, key, value};  // the map's bytes outlive the cursor's step
          } else {
            work(ordinal, key, value);
          }
        });
        if (in_hand) work(in_hand->ordinal, in_hand->key, in_hand->value);
      });
    }
    for (auto& worker : workers) worker.join();
    ++epoch;
  }
  count_records(state, db.records());
}
}  // namespace crema::bench::data_layer
