#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/lmdb/lmdb_environment.hpp>

#include <lmdb.h>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>

// lmdb_environment's work: compiled once in the crema::lmdb library (src/lmdb/), or included by its
// header, inline, with CREMA_HEADER_ONLY.

namespace crema {

CREMA_LIBRARY_INLINE std::shared_ptr<lmdb_environment> lmdb_environment::open(
    const std::filesystem::path& path, access mode, std::string_view who, std::size_t map_bytes) {
  const bool directory = std::filesystem::is_directory(path);
  std::error_code error;
  auto data_file = std::filesystem::weakly_canonical(directory ? path / "data.mdb" : path, error);
  if (error) data_file = directory ? path / "data.mdb" : path;
  const std::string key = data_file.string();

  std::scoped_lock lock(registry_mutex());
  auto& open_ones = registry();
  if (const auto found = open_ones.find(key); found != open_ones.end()) {
    if (auto shared = found->second.lock()) {
      if (mode == access::write && !shared->writable_) {
        detail::fail<config_error>(
            "{}: {} is open read-only in this process, and LMDB allows one environment per "
            "database and process: open the writer before the readers",
            who, path.string());
      }
      return shared;
    }
  }
  // Closed under the registry's lock, so that no one opens the database again before the
  // close is done.
  auto made = std::shared_ptr<lmdb_environment>(
      new lmdb_environment(path, directory, mode == access::write, who, map_bytes),
      [](lmdb_environment* environment) {
        std::scoped_lock closing(registry_mutex());
        delete environment;
      });
  std::erase_if(open_ones, [](const auto& entry) { return entry.second.expired(); });
  open_ones[key] = made;
  return made;
}

CREMA_LIBRARY_INLINE lmdb_environment::~lmdb_environment() { mdb_env_close(env_); }

CREMA_LIBRARY_INLINE std::size_t lmdb_environment::map_bytes() const noexcept {
  MDB_envinfo info{};
  mdb_env_info(env_, &info);
  return info.me_mapsize;
}

CREMA_LIBRARY_INLINE lmdb_environment::lmdb_environment(const std::filesystem::path& path,
                                                        bool directory, bool writable,
                                                        std::string_view who, std::size_t map_bytes)
    : writable_(writable) {
  detail::lmdb_check(mdb_env_create(&env_), std::string(who) + ": cannot create an environment for",
                     path);
  unsigned flags = MDB_NOTLS | (directory ? 0U : unsigned{MDB_NOSUBDIR});
  if (writable) {
    if (map_bytes != 0) mdb_env_set_mapsize(env_, map_bytes);
  } else {
    flags |= MDB_RDONLY;
  }
  int opened = mdb_env_open(env_, path.c_str(), flags, 0664);
  if (!writable && (opened == EACCES || opened == EROFS)) {
    // A lock file it may not write (read-only media): read without one.
    opened = mdb_env_open(env_, path.c_str(), flags | MDB_NOLOCK, 0664);
  }
  if (opened != MDB_SUCCESS) {
    mdb_env_close(env_);
    detail::fail_with_code<lmdb_error>(opened, "{}: {} is not an LMDB that opens: {}", who,
                                       path.string(), mdb_strerror(opened));
  }
}

CREMA_LIBRARY_INLINE std::mutex& lmdb_environment::registry_mutex() {
  static std::mutex mutex;
  return mutex;
}
CREMA_LIBRARY_INLINE std::map<std::string, std::weak_ptr<lmdb_environment>>&
lmdb_environment::registry() {
  static std::map<std::string, std::weak_ptr<lmdb_environment>> open_ones;
  return open_ones;
}

}  // namespace crema
