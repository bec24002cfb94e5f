#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/lmdb/lmdb_environment.hpp>

#include <lmdb.h>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crema {
/// @brief How an `lmdb_writer` writes.
struct lmdb_writer_options {
  std::size_t records_per_commit = 1000;                 ///< records written per transaction
  std::size_t initial_map_bytes = std::size_t{1} << 30;  ///< grown (doubled) whenever it fills
};

/// @brief Writes a Caffe-format LMDB (a directory holding data.mdb and lock.mdb), as Caffe's
/// tools do: keys and values in the order given, committed every `records_per_commit` records.
///
/// The map grows by itself: when it fills, the transaction is replayed into a map twice as big.
/// The environment is the process's one for the database (`lmdb_environment`): open the writer
/// before any reader of the same database in this process. Not thread-safe. `finish()` commits what
/// is left and reports errors; the destructor commits too but cannot report them.
class lmdb_writer {
 public:
  /// @param directory made if missing; an existing database there is added to
  /// @throws crema::lmdb_error naming the path if LMDB cannot open or make it;
  ///         crema::config_error naming it if this process has it open read-only
  CREMA_LIBRARY_INLINE explicit lmdb_writer(std::filesystem::path directory,
                                            lmdb_writer_options options = {});
  lmdb_writer(const lmdb_writer&) = delete;
  lmdb_writer& operator=(const lmdb_writer&) = delete;
  ~lmdb_writer() {
    try {
      finish();
    } catch (...) {  // reported by finish() to those who call it
    }
  }

  /// @brief Writes (or overwrites) `key`.
  /// @throws crema::lmdb_error naming the path and key if LMDB refuses
  void put(std::string_view key, std::span<const std::byte> value) {
    pending_.emplace_back(std::string(key), std::vector<std::byte>(value.begin(), value.end()));
    if (pending_.size() >= options_.records_per_commit) commit();
  }
  /// @brief Commits every record put so far.
  void finish() { commit(); }
  /// @return records written and committed so far
  [[nodiscard]] std::size_t committed() const noexcept { return committed_; }

 private:
  CREMA_LIBRARY_INLINE void commit();

  // One transaction with every pending record; MDB_MAP_FULL is returned, other errors thrown.
  CREMA_LIBRARY_INLINE int write_pending();

  std::filesystem::path path_;
  lmdb_writer_options options_;
  std::shared_ptr<lmdb_environment> env_;
  std::vector<std::pair<std::string, std::vector<std::byte>>> pending_;
  std::size_t committed_ = 0;
};

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/lmdb/detail/lmdb_writer_impl.hpp>
#endif
