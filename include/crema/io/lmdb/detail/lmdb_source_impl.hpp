#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>

#include <lmdb.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

// lmdb_source's work: compiled once in the crema::lmdb library (src/lmdb/), or included by its
// header, inline, with CREMA_HEADER_ONLY.

namespace crema {

CREMA_LIBRARY_INLINE lmdb_source::lmdb_source(std::filesystem::path path,
                                              lmdb_source_options options)
    : path_(std::move(path)), options_(options) {
  std::error_code error;
  if (!std::filesystem::exists(path_, error)) {
    detail::fail<config_error>("lmdb_source: {} does not exist", path_.string());
  }
  env_ = lmdb_environment::open(path_, lmdb_environment::access::read, "lmdb_source");
  try {
    detail::lmdb_check(mdb_txn_begin(env_->get(), nullptr, MDB_RDONLY, &txn_),
                       "lmdb_source: cannot begin reading", path_);
    detail::lmdb_check(mdb_dbi_open(txn_, nullptr, 0, &dbi_), "lmdb_source: cannot open", path_);
    MDB_stat stat{};
    detail::lmdb_check(mdb_stat(txn_, dbi_, &stat), "lmdb_source: cannot stat", path_);
    if (stat.ms_entries == 0) {
      detail::fail<config_error>("lmdb_source: {} holds no records", path_.string());
    }
    shard_ = shard_cursor(stat.ms_entries);
    if (options_.permute) shard_.shuffle(options_.seed);
    detail::lmdb_check(mdb_cursor_open(txn_, dbi_, &cursor_), "lmdb_source: cannot read", path_);
    if (options_.permute) index_keys();
    begin_pass();
  } catch (...) {
    close();
    throw;
  }
}

CREMA_LIBRARY_INLINE const lmdb_record* lmdb_source::next() {
  if (shard_.exhausted()) return nullptr;
  if (options_.permute) {
    current_ = get(keys_[shard_.next_index()]);
  } else if (options_.shuffle_buffer > 0) {
    fill_buffer();
    sample_rng rng(options_.seed, shard_.epoch(), shard_.position());
    const std::size_t pick = static_cast<std::size_t>(rng.below(buffer_.size()));
    current_ = buffer_[pick];
    if (const auto more = read_sequential()) {
      buffer_[pick] = *more;
    } else {
      buffer_[pick] = buffer_.back();
      buffer_.pop_back();
    }
  } else {
    current_ = *read_sequential();
  }
  shard_.advance();
  return &current_;
}

CREMA_LIBRARY_INLINE void lmdb_source::restart() noexcept {
  shard_.restart();
  read_ = 0;
  cursor_ordinal_ = no_ordinal;
  buffer_.clear();
}

CREMA_LIBRARY_INLINE void lmdb_source::begin_pass() {
  restart();
  if (shard_.epoch() == 0 && options_.skip > 0 && size() > 0) advance_to(options_.skip % size());
}

CREMA_LIBRARY_INLINE void lmdb_source::advance_to(record_position position) {
  if (options_.permute) {
    shard_.seek(position, "lmdb_source", key());
  } else {
    while (shard_.position() < position) (void)next();  // replayed, draw by draw
  }
}

CREMA_LIBRARY_INLINE std::optional<lmdb_record> lmdb_source::read_sequential() {
  if (read_ >= size()) return std::nullopt;
  const std::size_t target = static_cast<std::size_t>(shard_.ordinal_at(read_));
  MDB_val key{};
  MDB_val value{};
  int status = MDB_SUCCESS;
  // A balanced shard's padding reads the pass's first records again: from the first key.
  if (cursor_ordinal_ == no_ordinal || target < cursor_ordinal_) {
    status = mdb_cursor_get(cursor_, &key, &value, MDB_FIRST);
    cursor_ordinal_ = 0;
  } else {
    status = mdb_cursor_get(cursor_, &key, &value, MDB_GET_CURRENT);
  }
  while (status == MDB_SUCCESS && cursor_ordinal_ < target) {
    status = mdb_cursor_get(cursor_, &key, &value, MDB_NEXT);
    ++cursor_ordinal_;
  }
  if (status != MDB_SUCCESS) {
    detail::fail_with_code<lmdb_error>(status, "lmdb_source: cannot read record {} of {}: {}",
                                       target, path_.string(), mdb_strerror(status));
  }
  ++read_;
  return lmdb_record{as_bytes(key), as_bytes(value)};
}

CREMA_LIBRARY_INLINE void lmdb_source::fill_buffer() {
  while (buffer_.size() < options_.shuffle_buffer) {
    const auto more = read_sequential();
    if (!more) break;
    buffer_.push_back(*more);
  }
}

CREMA_LIBRARY_INLINE void lmdb_source::index_keys() {
  MDB_val key{};
  MDB_val value{};
  int status = mdb_cursor_get(cursor_, &key, &value, MDB_FIRST);
  while (status == MDB_SUCCESS) {
    const auto bytes = as_bytes(key);
    keys_.emplace_back(bytes.begin(), bytes.end());
    status = mdb_cursor_get(cursor_, &key, &value, MDB_NEXT);
  }
  if (status != MDB_NOTFOUND) {
    detail::lmdb_check(status, "lmdb_source: cannot index the keys of", path_);
  }
}

CREMA_LIBRARY_INLINE lmdb_record lmdb_source::get(std::vector<std::byte>& key_bytes) {
  MDB_val key{key_bytes.size(), key_bytes.data()};
  MDB_val value{};
  const int status = mdb_get(txn_, dbi_, &key, &value);
  if (status != MDB_SUCCESS) {
    detail::fail_with_code<lmdb_error>(
        status, "lmdb_source: cannot read key {} of {}: {}",
        std::string_view(reinterpret_cast<const char*>(key_bytes.data()), key_bytes.size()),
        path_.string(), mdb_strerror(status));
  }
  return {key_bytes, as_bytes(value)};
}

CREMA_LIBRARY_INLINE void lmdb_source::close() noexcept {
  if (cursor_ != nullptr) mdb_cursor_close(cursor_);
  if (txn_ != nullptr) mdb_txn_abort(txn_);
  cursor_ = nullptr;
  txn_ = nullptr;
  env_.reset();
}

}  // namespace crema
