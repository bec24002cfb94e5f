#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>

#include <lmdb.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

// lmdb_writer's work: compiled once in the crema::lmdb library (src/lmdb/), or included by its
// header, inline, with CREMA_HEADER_ONLY.

namespace crema {

CREMA_LIBRARY_INLINE lmdb_writer::lmdb_writer(std::filesystem::path directory,
                                              lmdb_writer_options options)
    : path_(std::move(directory)), options_(options) {
  std::error_code ignored;
  std::filesystem::create_directories(path_, ignored);
  env_ = lmdb_environment::open(path_, lmdb_environment::access::write, "lmdb_writer",
                                options_.initial_map_bytes);
}

CREMA_LIBRARY_INLINE void lmdb_writer::commit() {
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

CREMA_LIBRARY_INLINE int lmdb_writer::write_pending() {
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
      detail::fail_with_code<lmdb_error>(status, "lmdb_writer: cannot write key {} to {}: {}", key,
                                         path_.string(), mdb_strerror(status));
    }
  }
  if (status == MDB_SUCCESS) return mdb_txn_commit(txn);
  mdb_txn_abort(txn);
  return status;
}

}  // namespace crema
