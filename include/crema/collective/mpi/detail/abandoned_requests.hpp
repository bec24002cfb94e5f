#pragma once

#include <crema/collective/mpi/detail/mpi_support.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

// The requests crema's MPI components give up on when a peer stops answering, and the buffers
// MPI may still use for them, kept until MPI is done with them or the program exits.
namespace crema::mpi::detail {

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

}  // namespace crema::mpi::detail
