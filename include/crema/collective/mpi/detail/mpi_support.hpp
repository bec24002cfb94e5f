#pragma once

#include <crema/core/detail/deadline.hpp>
#include <crema/core/error.hpp>

#include <mpi.h>

#include <signal.h>

#include <algorithm>
#include <array>
#include <chrono>
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

// What crema's MPI components share: errors from MPI's codes, element types, and bounded waits.
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

// A buffer that MPI may still use after its owner has gone: kept until the program exits (MPI
// uses no buffer once MPI_Finalize has run, and the program runs it before it returns).
inline void keep_until_exit(std::shared_ptr<const void> buffer) {
  static std::mutex guard;
  static std::vector<std::shared_ptr<const void>> kept;
  const std::scoped_lock lock(guard);
  kept.push_back(std::move(buffer));
}

// Whether `request` has ended; MPI frees it (to null) if so. Only while MPI runs.
inline bool request_ended(MPI_Request& request) {
  if (request == MPI_REQUEST_NULL) return true;
  int done = 0;
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  return done != 0 || request == MPI_REQUEST_NULL;
}

// Cancels `request` unless it has ended, and frees it to MPI (null afterwards), for a buffer
// that stays where MPI may still use it.
inline void give_up(MPI_Request& request) {
  if (request_ended(request)) return;
  MPI_Cancel(&request);
  MPI_Request_free(&request);
}

// Requests given up on, with the buffers they use. A peer that stops in the middle of a message
// leaves it half-way: MPI_Cancel cannot take back a receive already matched to it, nor a send
// already under way, and if the peer wakes, MPI goes on writing or reading the buffer as its
// bytes come and go. A component that carries on without the peer keeps such a buffer here, so
// that it is neither reused nor freed under MPI, until the request ends (`sweep`). What is still
// outstanding when this goes is freed to MPI, and its buffer kept until the program exits.
class abandoned_requests {
 public:
  abandoned_requests() = default;
  abandoned_requests(const abandoned_requests&) = delete;
  abandoned_requests& operator=(const abandoned_requests&) = delete;
  ~abandoned_requests() {
    if (finalized()) return;  // nothing moves any more: the buffers can go
    for (auto& [request, buffer] : kept_) {
      if (request_ended(request)) continue;
      MPI_Request_free(&request);
      if (buffer) keep_until_exit(std::move(buffer));
    }
  }

  // Gives up on `request` (null afterwards): cancels it, keeping `buffer`, what the request
  // reads or writes (shared with its owner, who must not use it again while it is kept), until
  // the request has ended. Nothing is kept for a request that has ended already.
  void keep(MPI_Request& request, std::shared_ptr<const void> buffer = {}) {
    if (!outstanding(request)) return;
    MPI_Cancel(&request);
    kept_.push_back({std::exchange(request, MPI_REQUEST_NULL), std::move(buffer)});
  }
  // The same for a buffer of bytes, taken from its owner (and left empty) only where the request
  // has not ended: its memory moves with it.
  void keep(MPI_Request& request, std::vector<std::byte>&& buffer) {
    if (!outstanding(request)) return;
    keep(request, std::make_shared<const std::vector<std::byte>>(std::move(buffer)));
  }
  // Lets go of the requests that have ended (cancelled, or finished after all), and of their
  // buffers.
  void sweep() {
    std::erase_if(kept_, [](entry& kept) { return request_ended(kept.request); });
  }

 private:
  struct entry {
    MPI_Request request = MPI_REQUEST_NULL;
    std::shared_ptr<const void> buffer;
  };

  static bool finalized() {
    int done = 0;
    MPI_Finalized(&done);
    return done != 0;
  }
  // Whether `request` may still move data; one that cannot is made null (MPI frees one that has
  // ended; after MPI_Finalize nothing moves).
  static bool outstanding(MPI_Request& request) {
    if (request == MPI_REQUEST_NULL) return false;
    if (finalized()) {
      request = MPI_REQUEST_NULL;
      return false;
    }
    return !request_ended(request);
  }

  std::vector<entry> kept_;
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

// Calls `ready()` until it says true or `timeout` passes; returns whether it did. MPI moves data
// only while it is asked (MPI_Test drives its progress): it polls without sleeping for a while,
// as MPI_Wait would, then more gently for a peer that is late.
template <class Ready>
bool poll_until(Ready&& ready, std::chrono::milliseconds timeout) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = crema::detail::deadline_after(timeout);
  for (;;) {
    if (ready()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    if (now - started < std::chrono::milliseconds(50)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// How one request ended: MPI's code for it and, for a receive, its status.
struct completion {
  bool done = false;
  int code = MPI_SUCCESS;
  MPI_Status status{};
};

// Waits for every request until `timeout`, noting how each ended in `ends` (one per request). A
// request MPI fails (a receive of a message longer than its buffer, say) ends with MPI's code,
// where the communicator returns errors (MPI_ERRORS_RETURN) rather than aborting. Returns the
// index of the first request that did not end, after cancelling and freeing every one that did
// not, or nothing.
//
// `give_up()`, asked at every poll that leaves a request outstanding, ends the wait early as a
// timeout does when it says true.
//
// Requests of non-blocking collectives cannot be cancelled or freed (MPI forbids both): with
// `cancellable` false, those that did not end are left as they are.
template <class GiveUp>
std::optional<std::size_t> wait_each(std::span<MPI_Request> requests, std::span<completion> ends,
                                     std::chrono::milliseconds timeout, GiveUp&& give_up,
                                     bool cancellable = true) {
  bool gave_up = false;
  const bool all_ended = poll_until(
      [&] {
        bool all = true;
        for (std::size_t i = 0; i < requests.size(); ++i) {
          if (ends[i].done) continue;
          int complete = 0;
          ends[i].code = MPI_Test(&requests[i], &complete, &ends[i].status);
          ends[i].done = complete != 0 || ends[i].code != MPI_SUCCESS;
          all = all && ends[i].done;
        }
        if (!all && give_up()) gave_up = true;  // asked only while something is outstanding
        return all || gave_up;
      },
      timeout);
  if (all_ended && !gave_up) return std::nullopt;
  std::optional<std::size_t> first;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (ends[i].done || requests[i] == MPI_REQUEST_NULL) continue;
    if (!first) first = i;
    if (cancellable) {
      MPI_Cancel(&requests[i]);
      MPI_Request_free(&requests[i]);
    }
  }
  if (gave_up && !first) first = 0;
  return first;
}
inline std::optional<std::size_t> wait_each(std::span<MPI_Request> requests,
                                            std::span<completion> ends,
                                            std::chrono::milliseconds timeout) {
  return wait_each(requests, ends, timeout, [] { return false; });
}

// MPI's words for an error code.
[[nodiscard]] inline std::string failure_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(std::max(length, 0)));
}

// What is wrong with a receive of `expected` bytes that ended as `end`, or nothing: a message of
// another size, one longer than the buffer (which MPI refuses), or MPI's own failure.
[[nodiscard]] inline std::optional<std::string> receive_problem(const completion& end,
                                                                std::size_t expected) {
  if (end.code != MPI_SUCCESS) {
    int error_class = 0;
    MPI_Error_class(end.code, &error_class);
    if (error_class == MPI_ERR_TRUNCATE) {
      return crema::detail::format("a message longer than the {} bytes expected", expected);
    }
    return crema::detail::format("nothing MPI could deliver ({})", failure_text(end.code));
  }
  int bytes = 0;
  MPI_Get_count(&end.status, MPI_BYTE, &bytes);
  if (bytes < 0 || static_cast<std::size_t>(bytes) != expected) {
    return crema::detail::format("{} bytes where {} were expected", bytes, expected);
  }
  return std::nullopt;
}

// Gives up on the requests of an operation that are still outstanding when it ends (early, by an
// exception): `give_up` on each. A receive posted ahead and left so would take the next message
// of a peer that wakes, into memory its owner has reused or freed by then; a cancelled one takes
// nothing (one already under way cannot be cancelled: its buffer must stay with the component, or
// be the caller's). On a normal end every request is null: nothing to do.
template <std::size_t Sets>
class requests_given_up_on_exit {
 public:
  template <class... Requests>
  explicit requests_given_up_on_exit(Requests&... sets) noexcept
      : sets_{std::span<MPI_Request>(sets)...} {}
  requests_given_up_on_exit(const requests_given_up_on_exit&) = delete;
  requests_given_up_on_exit& operator=(const requests_given_up_on_exit&) = delete;
  ~requests_given_up_on_exit() {
    for (const std::span<MPI_Request> set : sets_) {
      for (MPI_Request& request : set) give_up(request);
    }
  }

 private:
  std::array<std::span<MPI_Request>, Sets> sets_;
};
template <class... Requests>
requests_given_up_on_exit(Requests&...) -> requests_given_up_on_exit<sizeof...(Requests)>;

// Waits for `request` until `timeout`; returns whether it ended. One that did not is left as it
// is, for the caller to give up on (`abandoned_requests`).
inline bool wait_for(MPI_Request& request, std::chrono::milliseconds timeout) {
  return poll_until(
      [&] {
        int done = 0;
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        return done != 0;
      },
      timeout);
}

// Receives a message that MPI_Improbe matched, of whatever size, into `into` (resized to it);
// returns whether it arrived within `timeout`. A message that did not (its sender stopped in the
// middle) is given up on: MPI may still write its rest, so `into`'s memory goes to `abandoned`
// with it, and `into` is left empty.
inline bool receive_matched(MPI_Message& message, const MPI_Status& status,
                            std::vector<std::byte>& into, std::chrono::milliseconds timeout,
                            abandoned_requests& abandoned) {
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  into.resize(static_cast<std::size_t>(bytes));
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Imrecv(into.data(), bytes, MPI_BYTE, &message, &request), "MPI_Imrecv");
  if (wait_for(request, timeout)) return true;
  abandoned.keep(request, std::move(into));
  return false;
}

}  // namespace crema::mpi::detail
