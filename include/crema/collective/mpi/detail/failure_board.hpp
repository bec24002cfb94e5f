#pragma once

#include <crema/collective/mpi/detail/bounded_waits.hpp>
#include <crema/collective/mpi/detail/reducer_wire.hpp>
#include <crema/core/detail/chrono.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace crema::mpi::detail {

// The communicators of the MPI reducers alive in this process, and the wait this process is in.
// A reducer that gives up on a rank tells the ranks of all of them, not only its own; and a
// question (whom do you wait for?) is answered on whichever communicator it comes, with the wait
// of whichever reducer is waiting: a rank waiting on one reducer for this process, which waits on
// another (as p2p_sync's parameter reducer does while its gradient reducer waits), learns which
// rank is at fault instead of blaming this one. Thread-safe.
class failure_board {
 public:
  // Marks what this process waits for: rank `peer` of `comm` (or `waits_for_anyone`), or, with
  // MPI_COMM_NULL, nothing.
  void waiting(MPI_Comm comm, int peer) noexcept {
    std::scoped_lock lock(mutex_);
    waiting_in_ = comm;
    waiting_for_ = peer;
  }

  // Answers every question that has come on any communicator on the board. The answers go
  // without waiting for them.
  void answer_questions() {
    std::scoped_lock lock(mutex_);
    for (MPI_Comm comm : comms_) {
      for (;;) {
        int found = 0;
        MPI_Message message = MPI_MESSAGE_NULL;
        MPI_Status status{};
        if (MPI_Improbe(MPI_ANY_SOURCE, reducer_query_tag, comm, &found, &message, &status) !=
                MPI_SUCCESS ||
            found == 0) {
          break;
        }
        int bytes = 0;
        MPI_Get_count(&status, MPI_BYTE, &bytes);
        std::vector<std::byte> question(static_cast<std::size_t>(std::max(bytes, 0)));
        MPI_Mrecv(question.data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE);  // nothing in it
        // Kept for the life of the process: the send may outlive this call (questions come only
        // when a rank has waited too long).
        const waiting_reply& reply = replies_.emplace_back(waiting_reply{waits_for_in(comm), 0});
        MPI_Request request = MPI_REQUEST_NULL;
        if (MPI_Isend(&reply, sizeof(reply), MPI_BYTE, status.MPI_SOURCE, reducer_reply_tag, comm,
                      &request) == MPI_SUCCESS) {
          MPI_Request_free(&request);
        }
      }
    }
  }
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
    if (waiting_in_ == comm) waiting_in_ = MPI_COMM_NULL;
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
  // What this process waits for, as a rank of `comm`.
  std::int64_t waits_for_in(MPI_Comm comm) const {
    if (waiting_in_ == MPI_COMM_NULL) return waits_for_nobody;
    if (waiting_for_ < 0) return waiting_for_;
    if (comm == waiting_in_) return waiting_for_;
    return rank_in(waiting_in_, waiting_for_, comm);
  }
  // Rank `rank` of `from` as a rank of `to` (`waits_for_nobody` if it is not one).
  static std::int64_t rank_in(MPI_Comm from, int rank, MPI_Comm to) {
    MPI_Group from_group = MPI_GROUP_NULL;
    MPI_Group to_group = MPI_GROUP_NULL;
    MPI_Comm_group(from, &from_group);
    MPI_Comm_group(to, &to_group);
    int there = MPI_UNDEFINED;
    MPI_Group_translate_ranks(from_group, 1, &rank, to_group, &there);
    MPI_Group_free(&from_group);
    MPI_Group_free(&to_group);
    return there == MPI_UNDEFINED ? waits_for_nobody : there;
  }

  std::mutex mutex_;
  std::vector<MPI_Comm> comms_;
  MPI_Comm waiting_in_ = MPI_COMM_NULL;
  int waiting_for_ = -1;
  std::deque<failure_notice> notices_;
  std::deque<waiting_reply> replies_;
};

// A communicator's place on this process's board while it lives: joined when made, left when it
// goes. Declared after the communicator it holds, so that it leaves before that is freed.
class board_seat {
 public:
  explicit board_seat(MPI_Comm comm) : comm_(comm) { failure_board::of_this_process().join(comm); }
  board_seat(const board_seat&) = delete;
  board_seat& operator=(const board_seat&) = delete;
  ~board_seat() { failure_board::of_this_process().leave(comm_); }

 private:
  MPI_Comm comm_;
};

}  // namespace crema::mpi::detail
