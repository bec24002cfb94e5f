#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/lmdb/lmdb_environment.hpp>
#include <crema/pipeline/sample_context.hpp>
#include <crema/pipeline/shard_cursor.hpp>
#include <crema/pipeline/source.hpp>

#include <lmdb.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crema {

/// @brief One record of an LMDB: its key and value, viewed in the database's memory map.
///
/// The bytes stay valid and unchanged for the life of the `lmdb_source` that read them (its read
/// transaction stays open, so the snapshot it sees cannot change), so a pipeline keeps a record
/// as these two views: nothing is copied out of the map before the transform reads it.
struct lmdb_record {
  std::span<const std::byte> key;
  std::span<const std::byte> value;

  /// @return the key as text (Caffe's keys are "00000042_cat/img.jpg")
  [[nodiscard]] std::string_view key_text() const noexcept {
    return {reinterpret_cast<const char*>(key.data()), key.size()};
  }
};

/// @brief How an `lmdb_source` reads.
struct lmdb_source_options {
  /// Records skipped at the start of the first pass (Caffe's rand_skip, so that solvers started
  /// together do not read in step), modulo the shard's size; `position()` counts them.
  std::size_t skip = 0;
  /// With more than 0: a shuffle buffer of that many records; reads stay sequential and each
  /// record comes out of the buffer at a random place, drawn from (seed, epoch, draw).
  std::size_t shuffle_buffer = 0;
  /// An exact permutation per epoch, keyed by (seed, epoch), over an index of the keys made when
  /// the source opens: random reads, every record once per pass.
  bool permute = false;
  std::uint64_t seed = 0;
};

/// @brief A record source over a Caffe LMDB (what `convert_imageset` writes): read-only, one read
/// transaction for its whole life, records viewed in the memory map (a pipeline's transform reads
/// them there: no copy, no message object, no allocation per record).
///
/// The open transaction pins one snapshot of the database: a writer may go on writing it, but
/// the source does not see what it writes, and the pages the snapshot uses are not reused while
/// the source lives (the file grows instead). Datasets are written once, then read.
///
/// `shard(rank, world)` keeps the records whose ordinal in the pass is `rank` modulo `world`
/// (disjoint, together complete; with `permute`, the ordinal in the epoch's permutation of the
/// whole database, as `indexed_source` shards, so each rank sees another part every epoch);
/// `position()` / `seek()` save and restore where a pass stands, shuffled or not, exactly (a
/// shuffled pass is replayed to the position); the bookkeeping is the `shard_cursor` every indexed
/// source shares. `record_key` names a record by its LMDB key. Used by
/// one thread at a time (the pipeline serializes its readers); the environment is opened with
/// MDB_NOTLS, so that thread may change.
class lmdb_source {
 public:
  using record_type = lmdb_record;
  static constexpr bool records_are_stable = false;

  /// @param path a database directory (data.mdb inside) or a data file
  /// @throws crema::config_error naming the path if it does not exist or holds no records;
  ///         crema::lmdb_error naming it if it is not an LMDB that opens
  CREMA_LIBRARY_INLINE explicit lmdb_source(std::filesystem::path path,
                                            lmdb_source_options options = {});
  lmdb_source(lmdb_source&& other) noexcept
      : path_(std::move(other.path_)),
        options_(other.options_),
        env_(std::move(other.env_)),
        txn_(std::exchange(other.txn_, nullptr)),
        dbi_(other.dbi_),
        cursor_(std::exchange(other.cursor_, nullptr)),
        keys_(std::move(other.keys_)),
        shard_(other.shard_),
        cursor_ordinal_(other.cursor_ordinal_),
        read_(other.read_),
        buffer_(std::move(other.buffer_)),
        current_(other.current_) {}
  lmdb_source& operator=(lmdb_source&&) = delete;
  lmdb_source(const lmdb_source&) = delete;
  lmdb_source& operator=(const lmdb_source&) = delete;
  ~lmdb_source() { close(); }

  /// @return the next record of this shard's pass (valid until the next call), or nullptr at
  ///         the end of the pass
  /// @throws crema::lmdb_error naming the path if LMDB fails
  [[nodiscard]] CREMA_LIBRARY_INLINE const lmdb_record* next();
  /// @brief Starts the next pass (the next epoch's order, when shuffled).
  void rewind() {
    shard_.rewind();
    begin_pass();
  }
  /// @brief Keeps the records whose ordinal is `rank` modulo `world`; starts the pass again.
  void shard(std::size_t rank, std::size_t world) {
    shard_.shard(rank, world);
    begin_pass();
  }
  /// @brief Gives every rank of the world the same number of records per pass (`shard_balance`);
  /// starts the pass again.
  void balance(shard_balance balance) {
    shard_.balance(balance);
    begin_pass();
  }
  [[nodiscard]] record_position position() const noexcept { return shard_.position(); }
  /// @throws crema::config_error if `position` is past the end of this shard's pass
  void seek(record_position position) {
    shard_.seek(position, "lmdb_source", key());
    restart();
    advance_to(position);
  }
  [[nodiscard]] std::string key() const { return "lmdb:" + path_.string(); }
  /// @brief Starts loading the record's value (its first 16 KiB: past that the processor's own
  /// prefetchers follow the transform's sequential read) from the map into the cache: values are
  /// read once per pass and usually come from memory, not the cache. For the pipeline, which
  /// calls it for the next record of a batch while the transform works on the current one.
  static void prefetch(const lmdb_record& record) noexcept {
    detail::prefetch_bytes(record.value, std::size_t{16} << 10);
  }

  /// @return the record's LMDB key
  [[nodiscard]] std::string record_key(const lmdb_record& record) const {
    return std::string(record.key_text());
  }

  /// @return the records of this shard's pass
  [[nodiscard]] std::size_t size() const noexcept {
    return static_cast<std::size_t>(shard_.size());
  }
  /// @return the records in the database
  [[nodiscard]] std::size_t records() const noexcept {
    return static_cast<std::size_t>(shard_.records());
  }
  /// @return the pass being read (0 for the first)
  [[nodiscard]] std::uint64_t epoch() const noexcept { return shard_.epoch(); }
  /// @brief Reads pass `epoch` (its order, when shuffled) from its start.
  void set_epoch(std::uint64_t epoch) {
    shard_.set_epoch(epoch);
    begin_pass();
  }
  /// @return where the source stands (shard, epoch, position, permutation)
  [[nodiscard]] const shard_cursor& cursor() const noexcept { return shard_; }
  /// @return the path
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  // A new pass, in the same snapshot: the cursor goes back before the shard's first record.
  CREMA_LIBRARY_INLINE void restart() noexcept;

  // A pass from its start, or from `skip` in the first pass.
  CREMA_LIBRARY_INLINE void begin_pass();

  CREMA_LIBRARY_INLINE void advance_to(record_position position);

  // The next record of the shard in database order (nothing after the last).
  CREMA_LIBRARY_INLINE std::optional<lmdb_record> read_sequential();

  CREMA_LIBRARY_INLINE void fill_buffer();

  // Every key, in database order, for random reads.
  CREMA_LIBRARY_INLINE void index_keys();

  CREMA_LIBRARY_INLINE lmdb_record get(std::vector<std::byte>& key_bytes);

  static std::span<const std::byte> as_bytes(const MDB_val& value) noexcept {
    return {static_cast<const std::byte*>(value.mv_data), value.mv_size};
  }

  CREMA_LIBRARY_INLINE void close() noexcept;

  static constexpr std::size_t no_ordinal = static_cast<std::size_t>(-1);

  std::filesystem::path path_;
  lmdb_source_options options_;
  std::shared_ptr<lmdb_environment> env_;  // shared with the process's other users of it
  MDB_txn* txn_ = nullptr;
  MDB_dbi dbi_ = 0;
  MDB_cursor* cursor_ = nullptr;
  std::vector<std::vector<std::byte>> keys_;  // permute: every key, in database order
  shard_cursor shard_;  // records handed out in this pass, in which epoch and shard
  std::size_t cursor_ordinal_ = no_ordinal;  // the ordinal the cursor stands on
  std::size_t read_ = 0;                     // shard records read in order this pass
  std::vector<lmdb_record> buffer_;          // shuffle buffer: views, valid this pass
  lmdb_record current_{};
};

static_assert(record_source<lmdb_source>);
static_assert(keyed_record_source<lmdb_source>);

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/lmdb/detail/lmdb_source_impl.hpp>
#endif
