#pragma once

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
  explicit lmdb_writer(std::filesystem::path directory, lmdb_writer_options options = {})
      : path_(std::move(directory)), options_(options) {
    std::error_code ignored;
    std::filesystem::create_directories(path_, ignored);
    env_ = lmdb_environment::open(path_, lmdb_environment::access::write, "lmdb_writer",
                                  options_.initial_map_bytes);
  }
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
  void commit() {
    if (pending_.empty()) return;
    for (;;) {
      const int written = write_pending();
      if (written == MDB_SUCCESS) break;
      if (written != MDB_MAP_FULL) detail::lmdb_check(written, "lmdb_writer: cannot write", path_);
      // The transaction was aborted: grow the map and write it again. (LMDB refuses while this
      // process holds a read transaction of the database: an lmdb_source of it, say.)
      detail::lmdb_check(mdb_env_set_mapsize(env_->get(), env_->map_bytes() * 2),
                         "lmdb_writer: cannot grow the map of", path_);
    }
    committed_ += pending_.size();
    pending_.clear();
  }

  // One transaction with every pending record; MDB_MAP_FULL is returned, other errors thrown.
  int write_pending() {
    MDB_txn* txn = nullptr;
    detail::lmdb_check(mdb_txn_begin(env_->get(), nullptr, 0, &txn), "lmdb_writer: cannot begin in",
                       path_);
    MDB_dbi dbi = 0;
    int status = mdb_dbi_open(txn, nullptr, 0, &dbi);
    for (auto& [key, value] : pending_) {
      if (status != MDB_SUCCESS) break;
      MDB_val k{key.size(), key.data()};
      MDB_val v{value.size(), value.data()};
      status = mdb_put(txn, dbi, &k, &v, 0);
      if (status != MDB_SUCCESS && status != MDB_MAP_FULL) {
        mdb_txn_abort(txn);
        detail::fail_with_code<lmdb_error>(status, "lmdb_writer: cannot write key {} to {}: {}",
                                           key, path_.string(), mdb_strerror(status));
      }
    }
    if (status == MDB_SUCCESS) return mdb_txn_commit(txn);
    mdb_txn_abort(txn);
    return status;
  }

  std::filesystem::path path_;
  lmdb_writer_options options_;
  std::shared_ptr<lmdb_environment> env_;
  std::vector<std::pair<std::string, std::vector<std::byte>>> pending_;
  std::size_t committed_ = 0;
};

}  // namespace crema
