#pragma once

#include <crema/core/error.hpp>

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

namespace crema {
namespace detail {

// Turns an LMDB return code into crema::lmdb_error naming what was done to which database.
inline void lmdb_check(int code, std::string_view what, const std::filesystem::path& path) {
  if (code != MDB_SUCCESS) {
    fail_with_code<lmdb_error>(code, "{} {}: {}", what, path.string(), mdb_strerror(code));
  }
}

}  // namespace detail

/// @brief The one LMDB environment a process has for a database.
///
/// LMDB allows a database to be opened once per process: a second environment on the same files
/// and a close of either break the locks LMDB keeps in the lock file, and readers of the other
/// may then fail or crash. Every `lmdb_source`, `lmdb_writer` and raw reader in crema therefore
/// asks `open` for the environment, which shares the one already open for the database (found by
/// the canonical path of its data file) and closes it when the last user lets it go.
///
/// Read-only environments are opened `MDB_RDONLY` (and without a lock file where the medium is
/// read-only); writable ones also serve readers. Every environment is opened `MDB_NOTLS`, so a
/// thread may hold read transactions of several users at once. Thread-safe.
class lmdb_environment {
 public:
  enum class access {
    read,   ///< reading only
    write,  ///< writing (and reading)
  };

  /// @brief The process's environment for the database at `path` (a directory holding
  /// data.mdb, or a data file), opened now if no one has it open.
  /// @param who names the caller in errors ("lmdb_source")
  /// @param map_bytes the map size for a writable environment opened now
  /// @throws crema::config_error naming the path if a writer asks for a database this process
  ///         has open read-only; crema::lmdb_error naming it if LMDB cannot open it
  [[nodiscard]] static std::shared_ptr<lmdb_environment> open(const std::filesystem::path& path,
                                                              access mode, std::string_view who,
                                                              std::size_t map_bytes = 0) {
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

  lmdb_environment(const lmdb_environment&) = delete;
  lmdb_environment& operator=(const lmdb_environment&) = delete;
  ~lmdb_environment() { mdb_env_close(env_); }

  [[nodiscard]] MDB_env* get() const noexcept { return env_; }
  [[nodiscard]] bool writable() const noexcept { return writable_; }
  /// @return the map size now
  [[nodiscard]] std::size_t map_bytes() const noexcept {
    MDB_envinfo info{};
    mdb_env_info(env_, &info);
    return info.me_mapsize;
  }

 private:
  lmdb_environment(const std::filesystem::path& path, bool directory, bool writable,
                   std::string_view who, std::size_t map_bytes)
      : writable_(writable) {
    detail::lmdb_check(mdb_env_create(&env_),
                       std::string(who) + ": cannot create an environment for", path);
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

  static std::mutex& registry_mutex() {
    static std::mutex mutex;
    return mutex;
  }
  static std::map<std::string, std::weak_ptr<lmdb_environment>>& registry() {
    static std::map<std::string, std::weak_ptr<lmdb_environment>> open_ones;
    return open_ones;
  }

  MDB_env* env_ = nullptr;
  bool writable_ = false;
};

}  // namespace crema
