#pragma once

#include <crema/collective/mpi/detail/abandoned_requests.hpp>
#include <crema/collective/mpi/detail/mpi_support.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/deadline.hpp>
#include <crema/core/error.hpp>

#include <mpi.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// The waits of crema's MPI components (the reducer, the parameter server): each bounded by a
// timeout, and what they say of a receive that went wrong, for the errors that name a peer.
namespace crema::mpi::detail {

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
