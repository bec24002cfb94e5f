#pragma once

#include <crema/core/detail/library_inline.hpp>
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
  [[nodiscard]] static CREMA_LIBRARY_INLINE std::shared_ptr<lmdb_environment> open(
      const std::filesystem::path& path, access mode, std::string_view who,
      std::size_t map_bytes = 0);

  lmdb_environment(const lmdb_environment&) = delete;
  lmdb_environment& operator=(const lmdb_environment&) = delete;
  CREMA_LIBRARY_INLINE ~lmdb_environment();

  [[nodiscard]] MDB_env* get() const noexcept { return env_; }
  [[nodiscard]] bool writable() const noexcept { return writable_; }
  /// @return the map size now
  [[nodiscard]] CREMA_LIBRARY_INLINE std::size_t map_bytes() const noexcept;

 private:
  CREMA_LIBRARY_INLINE lmdb_environment(const std::filesystem::path& path, bool directory,
                                        bool writable, std::string_view who, std::size_t map_bytes);
  static CREMA_LIBRARY_INLINE std::mutex& registry_mutex();
  static CREMA_LIBRARY_INLINE std::map<std::string, std::weak_ptr<lmdb_environment>>& registry();

  MDB_env* env_ = nullptr;
  bool writable_ = false;
};

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/lmdb/detail/lmdb_environment_impl.hpp>
#endif
