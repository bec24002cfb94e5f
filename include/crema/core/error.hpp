#pragma once

#include <crema/core/detail/fmt.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

/// @file
/// crema's exceptions. Every error crema reports is a `crema::error`; the subclasses say which
/// part failed and carry the native code where there is one. Messages are short, lowercase and
/// name the thing at fault: the path, key, field, size or rank.

namespace crema {

/// @brief The base of every exception crema throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief A setting that cannot work: a zero batch size, an unknown option, a bad combination.
class config_error : public error {
 public:
  using error::error;
};

/// @brief A size that cannot be represented or does not match: an element count whose byte size
/// overflows, a borrowed span of the wrong length.
class length_error : public error {
 public:
  using error::error;
};

/// @brief An operation called in a state that does not allow it, such as an asynchronous upload
/// from a buffer whose newest data is not at the host.
class state_error : public error {
 public:
  using error::error;
};

/// @brief A memory resource could not provide the bytes asked for.
class allocation_error : public error {
 public:
  /// @param bytes the size of the request that failed
  /// @param side  which memory was asked for: "host", "device", "pinned host", ...
  /// @param why   what the resource knows of the cause; may be empty
  allocation_error(std::size_t bytes, std::string_view side, std::string_view why = {})
      : error(why.empty()
                  ? crema::detail::format("cannot allocate {} bytes of {} memory", bytes, side)
                  : crema::detail::format("cannot allocate {} bytes of {} memory: {}", bytes, side,
                                          why)),
        bytes_(bytes),
        side_(side) {}

  /// @return the size of the request that failed, in bytes
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  /// @return which memory was asked for
  [[nodiscard]] const std::string& side() const noexcept { return side_; }

 private:
  std::size_t bytes_;
  std::string side_;
};

/// @brief Bytes that do not decode: a truncated record, a field of the wrong wire type.
class format_error : public error {
 public:
  using error::error;
};

/// @brief The base of the errors that carry a code from a native library.
class native_error : public error {
 public:
  native_error(int code, const std::string& what) : error(what), code_(code) {}
  /// @return the native library's own error code
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// @brief A CUDA runtime call failed; `code()` is the `cudaError_t`.
class cuda_error : public native_error {
 public:
  using native_error::native_error;
};

/// @brief An LMDB call failed; `code()` is LMDB's return code.
class lmdb_error : public native_error {
 public:
  using native_error::native_error;
};

/// @brief An MPI call failed or ranks disagreed; `code()` is the MPI error code (0 if none).
class mpi_error : public native_error {
 public:
  using native_error::native_error;
};

/// @brief A file could not be opened or read; `code()` is the system's error number (`errno`),
/// 0 where none applies (an empty file, a file over a size limit).
class io_error : public native_error {
 public:
  using native_error::native_error;
};

/// @brief A thread could not be started; `code()` is the system's error number (EAGAIN when a
/// process or address-space limit is reached).
class thread_error : public native_error {
 public:
  using native_error::native_error;
};

/// @brief A pipeline failed: a source or transform threw, or it was used after it stopped.
class pipeline_error : public error {
 public:
  using error::error;
};

/// @brief A collective failed: a bad topology, a mismatched call, a rank that timed out.
class collective_error : public error {
 public:
  using error::error;
};

}  // namespace crema

namespace crema::detail {

/// Whether crema checks misuse that costs a little on every call: a consumer index pulled from two
/// threads at once, a batch view used after its lease gave the slot back. On unless `NDEBUG` (so
/// in the debug and sanitizer builds); `-DCREMA_MISUSE_CHECKS=1` (or `0`) forces it either way.
/// Misuse that costs a branch (an empty lease used, a consumer holding every slot) is always
/// checked.
#if defined(CREMA_MISUSE_CHECKS)
inline constexpr bool misuse_checks = CREMA_MISUSE_CHECKS != 0;
#elif defined(NDEBUG)
inline constexpr bool misuse_checks = false;
#else
inline constexpr bool misuse_checks = true;
#endif

/// Throws `Error` with a message formatted by {fmt}. Kept out of line of the callers' hot
/// paths so that the check itself stays a compare and a branch.
template <class Error, class... Args>
[[noreturn, gnu::cold, gnu::noinline]] void fail(format_string<Args...> format, Args&&... args) {
  throw Error(crema::detail::format(format, std::forward<Args>(args)...));
}

/// Throws a native-code `Error` (cuda_error, lmdb_error, mpi_error) with a formatted message.
template <class Error, class... Args>
[[noreturn, gnu::cold, gnu::noinline]] void fail_with_code(int code, format_string<Args...> format,
                                                           Args&&... args) {
  throw Error(code, crema::detail::format(format, std::forward<Args>(args)...));
}

}  // namespace crema::detail
