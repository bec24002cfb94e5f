#pragma once

#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace crema::detail {

// Where one record of a batch came from: its pass over the source and its position in that pass.
// A batch may wrap into the next pass (or several, when the source is shorter than a batch), so
// this is kept per record: errors name the record exactly.
struct record_origin {
  std::uint64_t epoch = 0;
  record_position position = 0;
};

// One batch's worth of storage, made once and reused: the records a producer claimed (pointers
// into the source when its records are stable, else into `copies`), the items the transform
// made from them, and where the batch stands.
template <class Record, class Item>
struct batch_slot {
  batch_slot(std::size_t batch_size, bool copy_records)
      : records(batch_size, nullptr),
        copies(copy_records ? batch_size : 0),
        items(batch_size),
        origins(batch_size) {}

  std::vector<const Record*> records;
  std::vector<Record> copies;
  std::vector<Item> items;
  std::vector<record_origin> origins;  // per record; entry `size` is the record being read
  std::size_t size = 0;                // records in this batch (the last of a pass may be short)
  std::uint64_t sequence = 0;          // the consumer's batch number: order of the claims
  std::uint64_t epoch = 0;             // pass of the first record
  record_position first_position = 0;  // position of the first record in its pass
};

}  // namespace crema::detail
