#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/deadline.hpp>
#include <crema/core/error.hpp>

#include <mpi.h>

#include <signal.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

// What crema's MPI components share: errors from MPI's codes, their own communicator, element
// types, the thread level, and surviving a dead peer. Their bounded waits are in
// bounded_waits.hpp, the requests they give up on in abandoned_requests.hpp.
namespace crema::mpi::detail {

// Turns an MPI error code into crema::mpi_error naming the call and MPI's words.
inline void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  crema::detail::fail_with_code<mpi_error>(code, "{} failed: {}", call, std::string(text, length));
}

// A communicator crema made for itself, a duplicate of the user's (so that its messages never
// meet theirs), freed when it goes: a constructor that throws after the duplicate leaks nothing.
// Freed only while MPI runs (after MPI_Finalize, nothing is left to free). Converts to MPI_Comm
// for MPI's calls, as the handle it holds.
class owned_comm {
 public:
  // Duplicates `comm`; collective over it, as MPI_Comm_dup is.
  explicit owned_comm(MPI_Comm comm) { check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup"); }
  owned_comm(owned_comm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  owned_comm& operator=(owned_comm&&) = delete;
  ~owned_comm() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  operator MPI_Comm() const noexcept { return comm_; }  // NOLINT(google-explicit-constructor)

  // Leaves the communicator to MPI, never freed: MPI gives a freed communicator's id to the next
  // one made on the same processes, and hands that one the messages still on their way to the
  // freed one (a peer given up on may send them when it wakes). Kept, its id stays taken on this
  // process, so no later communicator of it can be given them; MPI_Finalize ends it.
  void keep_until_exit() noexcept { comm_ = MPI_COMM_NULL; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) {
    return MPI_FLOAT;
  } else if constexpr (std::is_same_v<T, double>) {
    return MPI_DOUBLE;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return MPI_INT32_T;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return MPI_INT64_T;
  } else {
    return MPI_DATATYPE_NULL;
  }
}

// Raises mpi_error unless MPI is initialized at `MPI_THREAD_SERIALIZED` or more.
inline void require_thread_level(const char* component) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    crema::detail::fail_with_code<mpi_error>(0, "{}: MPI is not initialized", component);
  }
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    crema::detail::fail_with_code<mpi_error>(
        0,
        "{}: MPI runs at thread level {}; crema calls MPI from its users' threads one at a time: "
        "initialize it with MPI_Init_thread(..., MPI_THREAD_SERIALIZED, ...)",
        component, provided);
  }
}

// Keeps this rank alive when a peer dies in the middle of a message. Open MPI's TCP transport
// may still write to the dead peer's connection; the kernel then raises SIGPIPE, whose default
// action ends this rank at once, from inside MPI, before it can name the dead one (a parameter
// server killed for a client's death). Ignored, the write fails with EPIPE, MPI drops the
// connection, and crema's timeouts name the peer. Only the default action is replaced: a handler
// or disposition the program set is kept. Process-wide, as every signal disposition is.
inline void survive_dead_peers() {
  struct sigaction now {};
  if (::sigaction(SIGPIPE, nullptr, &now) != 0) return;
  if ((now.sa_flags & SA_SIGINFO) == 0 && now.sa_handler == SIG_DFL) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, nullptr);
  }
}

}  // namespace crema::mpi::detail
