#pragma once

#include <crema/collective/mpi/detail/mpi_support.hpp>
#include <crema/collective/mpi/detail/reducer_wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace crema::mpi::detail {

// The communicators of the MPI reducers alive in this process. A reducer that gives up on a rank
// tells the ranks of all of them, not only its own: a rank waiting on another reducer for this
// process (which stops answering there, as p2p_sync's parameter reducer waits while its gradient
// reducer failed) learns which rank is at fault instead of blaming this one. Thread-safe.
class failure_board {
 public:
  // The one board of this process.
  static failure_board& of_this_process() {
    static failure_board board;
    return board;
  }

  void join(MPI_Comm comm) {
    std::scoped_lock lock(mutex_);
    comms_.push_back(comm);
  }
  void leave(MPI_Comm comm) noexcept {
    std::scoped_lock lock(mutex_);
    comms_.erase(std::remove(comms_.begin(), comms_.end(), comm), comms_.end());
  }

  // Tells every rank of every communicator on the board that has the culprit (rank `culprit` of
  // `comm`), but this process and the culprit, that this process gave up on it in `step`. The
  // notices are waited for a moment (MPI moves them only while it is called, and a connection
  // not made yet takes several calls), never longer: a rank that is gone never takes its own.
  void tell(MPI_Comm comm, int culprit, std::uint64_t step) {
    std::scoped_lock lock(mutex_);
    std::vector<MPI_Request> sent;
    MPI_Group from = MPI_GROUP_NULL;
    MPI_Comm_group(comm, &from);
    for (MPI_Comm other : comms_) {
      MPI_Group to = MPI_GROUP_NULL;
      MPI_Comm_group(other, &to);
      int there = MPI_UNDEFINED;
      MPI_Group_translate_ranks(from, 1, &culprit, to, &there);
      MPI_Group_free(&to);
      if (there == MPI_UNDEFINED) continue;
      int me = 0;
      int ranks = 0;
      MPI_Comm_rank(other, &me);
      MPI_Comm_size(other, &ranks);
      // Kept for the life of the process: the sends may outlive this call (one per failure).
      const failure_notice& notice =
          notices_.emplace_back(failure_notice{static_cast<std::uint64_t>(there), step});
      for (int r = 0; r < ranks; ++r) {
        if (r == me || r == there) continue;
        MPI_Request request = MPI_REQUEST_NULL;
        if (MPI_Isend(&notice, sizeof(notice), MPI_BYTE, r, reducer_failure_tag, other, &request) ==
            MPI_SUCCESS) {
          sent.push_back(request);
        }
      }
    }
    MPI_Group_free(&from);
    std::vector<completion> ends(sent.size());
    (void)wait_each(sent, ends, std::chrono::milliseconds(200));
  }

 private:
  std::mutex mutex_;
  std::vector<MPI_Comm> comms_;
  std::deque<failure_notice> notices_;
};

}  // namespace crema::mpi::detail
