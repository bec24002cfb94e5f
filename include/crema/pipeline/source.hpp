#pragma once

#include <crema/core/detail/ranges.hpp>
#include <crema/core/error.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace crema {

/// @brief Where a source stands in its pass: the index (in this shard) of the next record.
using record_position = std::uint64_t;

/// @brief A sequence of records a pipeline reads, one pass (epoch) at a time.
///
/// - `next()` returns a pointer to the next record, or nullptr at the end of the pass.
/// - Record lifetime: with `records_are_stable` true, a record stays valid and unchanged for the
///   source's lifetime, and the pipeline keeps the pointer. Otherwise it is valid only until the
///   next call to `next()` or `rewind()`: the pipeline copies it into the slot's own storage
///   (`record_storage<record_type>`) before it asks for the next one, so a record that is a view
///   into a buffer the source reuses never dangles.
/// - `rewind()` starts the next pass.
/// - `shard(rank, world)` keeps every record whose index in the pass is `rank` modulo `world`, so
///   `world` readers see disjoint parts whose union is the source; it rewinds.
/// - `position()` / `seek(position)` save and restore where the pass stands, to resume; a
///   position past the end of the pass is a `crema::config_error`, never a wrapped index.
/// - `key()` names the data (name + ":" + location) for sharing a reader through a
///   `source_registry`, and for error messages.
/// - Optionally, `record_key(record)` names one record (an LMDB key, a file name); the pipeline
///   puts it in error messages and `sample_context::key()`.
/// - Optionally, a static `prefetch(record)` (noexcept) starts loading the memory a transform
///   will read for `record` into the cache: for records that are views into memory read once and
///   likely cold, as an LMDB's map is. A producer calls it for the next record of its batch
///   before it transforms the current one, so the one arrives while the other is worked on.
/// Sources are used by one thread at a time; the pipeline serializes its producers' pulls.
/// `prefetch` is the exception: it sees only the record, and runs on any producer's thread.
template <class Source>
concept record_source = std::move_constructible<Source> &&
    requires(Source& source, const Source& const_source, std::size_t rank, std::size_t world,
             record_position position) {
  typename Source::record_type;
  { Source::records_are_stable } -> std::convertible_to<bool>;
  { source.next() } -> std::same_as<const typename Source::record_type*>;
  source.rewind();
  source.shard(rank, world);
  { const_source.position() } -> std::same_as<record_position>;
  source.seek(position);
  { const_source.key() } -> std::convertible_to<std::string>;
};

/// @brief A source that can name each record (`record_key`), for errors and sample contexts.
template <class Source>
concept keyed_record_source = record_source<Source> &&
    requires(const Source& source, const typename Source::record_type& record) {
  { source.record_key(record) } -> std::convertible_to<std::string>;
};

/// @brief A source whose records can be prefetched (`Source::prefetch(record)`).
template <class Source>
concept prefetching_record_source = record_source<Source> &&
    requires(const typename Source::record_type& record) {
  { Source::prefetch(record) }
  noexcept;
};

/// @brief A source that says which pass it reads (`epoch()`) and can be set to one
/// (`set_epoch(epoch)`, from the pass's start): one whose passes differ, as a shuffled one's do,
/// so that a pipeline resumed mid-run reads the pass the stopped one was reading.
template <class Source>
concept epoch_record_source = record_source<Source> &&
    requires(Source& source, const Source& const_source, std::uint64_t epoch) {
  { const_source.epoch() } -> std::convertible_to<std::uint64_t>;
  source.set_epoch(epoch);
};

/// @brief How a pipeline keeps its own copy of a record from a source whose records do not stay
/// valid: an owning `storage_type`, `store(record, storage)` (reusing the storage's memory, so
/// the steady state does not allocate), and `view(storage)`, which gives the transform a record
/// again.
///
/// The primary template stores the record itself, which is right for records that own their
/// data, and for records whose views point at memory that outlives the next record (crema's
/// `lmdb_record` views an LMDB's map, its `image_file` a source's table of names). Specialize it
/// for a record type that refers to memory the source reuses; crema does for
/// `std::span<const T>` (stored as a `std::vector<T>`) and `std::basic_string_view`. A pointer
/// or a view type does not compile here, but a struct holding views cannot be seen into: its
/// copy is shallow, and views into a reused buffer in it dangle unless it is specialized.
template <class Record>
struct record_storage {
  static_assert(!std::is_pointer_v<Record> && !std::ranges::borrowed_range<Record>,
                "crema: this source's records are only valid until its next record, and a record "
                "of this type refers to memory it does not own, so a copy of it would dangle; "
                "specialize crema::record_storage for it (an owning storage_type, store, view) "
                "or have the source return records that own their data");
  using storage_type = Record;
  static void store(const Record& record, storage_type& storage) { storage = record; }
  static const Record& view(const storage_type& storage) noexcept { return storage; }
};

/// @brief Spans are stored as vectors of their elements; their capacity is reused.
template <class T>
struct record_storage<std::span<const T>> {
  using storage_type = std::vector<T>;
  static void store(std::span<const T> record, storage_type& storage) {
    storage.assign(record.begin(), record.end());
  }
  static std::span<const T> view(const storage_type& storage) noexcept { return storage; }
};

/// @brief String views are stored as strings; their capacity is reused.
template <class Char, class Traits>
struct record_storage<std::basic_string_view<Char, Traits>> {
  using storage_type = std::basic_string<Char, Traits>;
  static void store(std::basic_string_view<Char, Traits> record, storage_type& storage) {
    storage.assign(record.begin(), record.end());
  }
  static std::basic_string_view<Char, Traits> view(const storage_type& storage) noexcept {
    return storage;
  }
};

namespace detail {

// Asks for the cache lines of `bytes` (up to `most` bytes of them) to be loaded, as a hint: no
// fault, no wait. Beyond a few kilobytes the processor's own prefetchers follow a sequential read
// anyway, and lines loaded much earlier than they are read would only be evicted again.
inline void prefetch_bytes(std::span<const std::byte> bytes, std::size_t most) noexcept {
  constexpr std::size_t line = 64;
  const std::size_t length = bytes.size() < most ? bytes.size() : most;
  for (std::size_t offset = 0; offset < length; offset += line) {
    __builtin_prefetch(bytes.data() + offset);
  }
}

inline void check_shard(std::size_t rank, std::size_t world) {
  if (world == 0) fail<config_error>("source shard: world must be at least 1, got 0");
  if (rank >= world)
    fail<config_error>("source shard: rank {} is outside a world of {}", rank, world);
}

}  // namespace detail
}  // namespace crema
