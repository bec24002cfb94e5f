#pragma once

#include <crema/core/slot_pool.hpp>
#include <crema/pipeline/lease.hpp>
#include <crema/pipeline/sample_context.hpp>
#include <crema/pipeline/source.hpp>
#include <crema/pipeline/transform.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace crema::detail {

// Where one record of a batch came from: its pass over the source and its position in that pass.
// A batch may wrap into the next pass (or several, when the source is shorter than a batch), so
// this is kept per record: errors name the record exactly, and the sample context is exact.
struct record_origin {
  std::uint64_t epoch = 0;
  record_position position = 0;
};

// A batch object the consumer gives back with its device's completion event (`retire_after`, as
// `device_batch` has), through `lease::release_after`.
template <class Batch>
concept retires_after_device_work = requires {
  &Batch::retire_after;
};

// Stable sources need no storage of the pipeline's own.
struct no_record_storage {
  struct storage_type {};
};

// One batch's worth of storage, made once per slot and reused: the records a producer claimed
// (pointers into the source when its records are stable, else copies in the slot's own storage,
// made before the source is asked for the next record), their origins, and what the transform
// makes of them: one item per record, or one batch object.
template <class Source, class Transform>
struct batch_slot {
  using record_type = typename Source::record_type;
  static constexpr bool copies_records = !Source::records_are_stable;
  using storage_policy =
      std::conditional_t<copies_records, record_storage<record_type>, no_record_storage>;
  using storage_type = typename storage_policy::storage_type;
  static constexpr bool holds_batch = batch_transform<Transform, record_type>;
  using item_type = typename item_type_of<Transform, record_type>::type;
  using batch_type = typename batch_type_of<Transform, record_type>::type;
  // A batch object released with the consumer's completion event may come back while the
  // device still reads it and its upload may still be running; its next fill waits for both.
  // Such slots are refilled oldest first, so that the wait is the shortest; the others newest
  // first, while their memory is in the cache.
  static constexpr slot_reuse reuse = holds_batch && retires_after_device_work<batch_type>
                                          ? slot_reuse::least_recent
                                          : slot_reuse::most_recent;

  template <class MakeBatch>
  batch_slot(std::size_t batch_size, MakeBatch&& make_batch)
      : records(copies_records ? 0 : batch_size, nullptr),
        copies(copies_records ? batch_size : 0),
        origins(batch_size) {
    if constexpr (holds_batch) {
      batch.emplace(make_batch());
    } else {
      items.resize(batch_size);
    }
  }

  // A slot that holds nothing: the marker that ends a consumer's single pass.
  struct marker_tag {};
  explicit batch_slot(marker_tag) noexcept {}

  // Record `i`, as the transform sees it.
  [[nodiscard]] decltype(auto) record(std::size_t i) const {
    if constexpr (copies_records) {
      return storage_policy::view(copies[i]);
    } else {
      return static_cast<const record_type&>(*records[i]);
    }
  }

  // Keeps `record` as record `size` of the batch (a pointer, or a copy).
  void keep(const record_type& record) {
    if constexpr (copies_records) {
      storage_policy::store(record, copies[size]);
    } else {
      records[size] = &record;
    }
  }

  [[nodiscard]] batch_info info() const noexcept {
    return {consumer, size, sequence, epoch, first_position, padding};
  }

  std::vector<const record_type*> records;
  std::vector<storage_type> copies;
  std::vector<record_origin> origins;  // per record; entry `size` is the record being read
  std::vector<std::conditional_t<holds_batch, char, item_type>> items;
  std::optional<batch_type> batch;
  std::size_t consumer = 0;            // the consumer the slot belongs to
  std::size_t size = 0;                // records in this batch (the last of a pass may be short)
  std::uint64_t sequence = 0;          // the consumer's batch number
  std::uint64_t epoch = 0;             // pass of the first record
  record_position first_position = 0;  // position of the first record in its pass
  std::size_t padding = 0;             // records at the end that repeat the first ones
  release_count releases;              // leases that gave it back (counted with misuse_checks)
};

}  // namespace crema::detail
