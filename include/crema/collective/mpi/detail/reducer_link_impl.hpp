#pragma once

#include <crema/collective/mpi/detail/abandoned_requests.hpp>
#include <crema/collective/mpi/detail/reducer_link.hpp>
#include <crema/core/detail/fmt.hpp>
#include <crema/core/error.hpp>

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

// reducer_link's work: compiled once in the crema::mpi library (src/mpi/), or included by
// reducer_link.hpp, inline, with CREMA_HEADER_ONLY.

namespace crema::mpi::detail {

namespace link_detail {

// The operation a view names, in the words of the errors.
inline const char* operation_name(std::uint64_t op) {
  switch (static_cast<reducer_operation>(op)) {
    case reducer_operation::construct:
      return "construct";
    case reducer_operation::broadcast:
      return "broadcast";
    case reducer_operation::reduce_sum:
      return "reduce(sum)";
    case reducer_operation::reduce_average:
      return "reduce(average)";
    case reducer_operation::allreduce:
      return "allreduce";
  }
  return "?";
}

// A malformed verdict's byte count when MPI refused the message: longer than the receive.
inline constexpr std::uint64_t longer_than_a_view = ~std::uint64_t{0};

// Receives a message that MPI_Improbe matched, whatever its size (it is there already).
inline std::vector<std::byte> take_matched(MPI_Message& message, const MPI_Status& status) {
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  std::vector<std::byte> received(static_cast<std::size_t>(std::max(bytes, 0)));
  MPI_Mrecv(received.data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE);
  return received;
}

// Checks MPI's thread level and the timeout, then makes the link's own communicator.
inline owned_comm duplicate(MPI_Comm comm, std::chrono::milliseconds timeout) {
  require_thread_level("mpi_reducer");
  survive_dead_peers();
  if (timeout <= std::chrono::milliseconds::zero()) {
    crema::detail::fail<config_error>("mpi_reducer: timeout must be positive, got {} ms",
                                      timeout.count());
  }
  owned_comm own(comm);
  // A message another rank sent wrong (longer than the receive, say) is an error to name, not
  // a reason for MPI to end the job.
  MPI_Comm_set_errhandler(own, MPI_ERRORS_RETURN);
  return own;
}

}  // namespace link_detail

CREMA_LIBRARY_INLINE reducer_link::reducer_link(MPI_Comm comm, std::chrono::milliseconds timeout)
    : timeout_(timeout), comm_(link_detail::duplicate(comm, timeout)), seat_(comm_) {
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(comm_, &ranks);
  rank_ = static_cast<std::size_t>(rank);
  ranks_ = static_cast<std::size_t>(ranks);
}

CREMA_LIBRARY_INLINE std::string reducer_link::describe(const view& v) {
  return crema::detail::format(
      "{} of elements [{}, {}) root {} at step {} ({} local participants of {} elements of {} "
      "bytes)",
      link_detail::operation_name(v.op), v.begin, v.end, v.root, v.step, v.local, v.elements,
      v.element_bytes);
}

// Every rank tells rank 0 its view; rank 0 compares and answers everyone.
CREMA_LIBRARY_INLINE void reducer_link::agree(reducer_operation op, std::size_t begin,
                                              std::size_t end, std::size_t root,
                                              const reducer_shape& shape) {
  if (spent_) {
    crema::detail::fail_with_code<mpi_error>(
        0, "mpi_reducer: rank {} issues nothing more on a communicator that failed: {}", rank_,
        spent_reason_);
  }
  const view mine{static_cast<std::uint64_t>(op),
                  begin,
                  end,
                  root,
                  step_++,
                  shape.elements,
                  shape.local_participants,
                  shape.element_bytes};
  if (ranks_ == 1) return;
  const reducer_verdict answer = rank_ == 0 ? hear_views(mine) : hear_verdict(mine);
  switch (answer.kind) {
    case verdict_kind::agreed:
      return;
    case verdict_kind::silent:
      spend(crema::detail::format("rank {} did not answer within {} ms; rank {} was at its {}",
                                  answer.rank, timeout_.count(), rank_, describe(mine)));
    case verdict_kind::disagrees:
      // Every rank answered, and no data moves before an agreement: nothing is on its way.
      spend(crema::detail::format("ranks disagree: rank 0 was at its {}; rank {} at its {}",
                                  describe(answer.zero), answer.rank, describe(answer.theirs)),
            true);
    case verdict_kind::malformed:
      spend(crema::detail::format(
          "rank {} sent rank 0 {} for the {}; refused", answer.rank,
          answer.bytes == link_detail::longer_than_a_view
              ? crema::detail::format("more bytes than a view's {}", sizeof(view))
              : crema::detail::format("{} bytes where a view has {}", answer.bytes, sizeof(view)),
          describe(answer.zero)));
  }
}

// Rank 0's side of an agreement: hears every other rank's view, compares it with its own and
// tells everyone the verdict. The first rank that is silent, sends something that is not a
// view, or disagrees, in that order, is the one named.
CREMA_LIBRARY_INLINE reducer_verdict reducer_link::hear_views(const view& mine) {
  std::vector<std::array<std::byte, sizeof(view)>> received(ranks_);
  std::vector<MPI_Request> requests(ranks_ - 1, MPI_REQUEST_NULL);
  std::vector<completion> ends(ranks_ - 1);
  for (std::size_t r = 1; r < ranks_; ++r) {
    check(MPI_Irecv(received[r].data(), sizeof(view), MPI_BYTE, static_cast<int>(r),
                    reducer_view_tag, comm_, &requests[r - 1]),
          "MPI_Irecv");
  }
  reducer_verdict answer{.zero = mine};
  std::vector<int> senders(ranks_ - 1);
  std::iota(senders.begin(), senders.end(), 1);
  if (const auto silent = wait_each(requests, ends, senders, timeout_)) {
    answer.kind = verdict_kind::silent;
    answer.rank = *silent + 1;
  } else {
    for (std::size_t r = 1; r < ranks_ && answer.kind == verdict_kind::agreed; ++r) {
      int bytes = 0;
      if (ends[r - 1].code == MPI_SUCCESS) MPI_Get_count(&ends[r - 1].status, MPI_BYTE, &bytes);
      const auto theirs = decode_view(std::span(received[r])
                                          .first(ends[r - 1].code == MPI_SUCCESS
                                                     ? static_cast<std::size_t>(std::max(bytes, 0))
                                                     : sizeof(view)));
      if (ends[r - 1].code != MPI_SUCCESS || std::holds_alternative<std::string>(theirs)) {
        // A message longer than a view is refused by MPI: all rank 0 knows is that it was.
        answer = {verdict_kind::malformed,
                  r,
                  ends[r - 1].code == MPI_SUCCESS ? static_cast<std::uint64_t>(bytes)
                                                  : link_detail::longer_than_a_view,
                  mine,
                  {}};
      } else if (!(std::get<view>(theirs) == mine)) {
        answer = {verdict_kind::disagrees, r, 0, mine, std::get<view>(theirs)};
      }
    }
  }
  std::vector<MPI_Request> sends(ranks_ - 1, MPI_REQUEST_NULL);
  for (std::size_t r = 1; r < ranks_; ++r) {
    if (answer.kind == verdict_kind::silent && answer.rank == r) continue;  // not there
    check(MPI_Isend(&answer, sizeof(answer), MPI_BYTE, static_cast<int>(r), reducer_verdict_tag,
                    comm_, &sends[r - 1]),
          "MPI_Isend");
  }
  std::vector<completion> sent(ranks_ - 1);
  detail::wait_each(sends, sent, timeout_);  // a rank gone now is found next time
  return answer;
}

// Another rank's side of an agreement: tells rank 0 its view and hears the verdict, which it
// checks before it believes it.
CREMA_LIBRARY_INLINE reducer_verdict reducer_link::hear_verdict(const view& mine) {
  std::array<std::byte, sizeof(reducer_verdict)> received{};
  std::array<MPI_Request, 2> both{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  std::array<completion, 2> ends{};
  check(MPI_Isend(&mine, sizeof(view), MPI_BYTE, 0, reducer_view_tag, comm_, &both[0]),
        "MPI_Isend");
  check(MPI_Irecv(received.data(), sizeof(received), MPI_BYTE, 0, reducer_verdict_tag, comm_,
                  &both[1]),
        "MPI_Irecv");
  // Rank 0 answers only once it has waited `timeout` for a silent rank: wait longer for it,
  // so that the silent rank is the one named.
  const std::array<int, 2> zero{0, 0};
  if (wait_each(both, ends, zero, 2 * timeout_)) {
    // Rank 0 may be held up itself (in another reducer of its process): ask it.
    give_up_on_silent(
        0, crema::detail::format("rank {} did not hear from rank 0 within {} ms about its {}",
                                 rank_, 2 * timeout_.count(), describe(mine)));
  }
  if (const auto problem = receive_problem(ends[1], sizeof(received))) {
    spend(crema::detail::format("rank 0 sent rank {} {} as its verdict on the {}; refused", rank_,
                                *problem, describe(mine)));
  }
  auto verdict = decode_verdict(received, ranks_);
  if (const auto* problem = std::get_if<std::string>(&verdict)) {
    spend(crema::detail::format("rank 0 sent rank {} {} on the {}; refused", rank_, *problem,
                                describe(mine)));
  }
  return std::get<reducer_verdict>(verdict);
}

// Marks the link spent and raises the failure. `quiet`: every peer answered, and none has a
// message on its way to this link.
CREMA_LIBRARY_INLINE void reducer_link::spend(std::string reason, bool quiet) {
  spent_ = true;
  peers_quiet_ = quiet;
  spent_reason_ = reason;
  crema::detail::fail_with_code<mpi_error>(0, "mpi_reducer: {}", reason);
}

// A link spent with peers that may still send gave up on requests that may still move data (a
// receive under way when its peer stopped, a broadcast that cannot be cancelled): MPI may go on
// writing its buffers if the peer wakes.
CREMA_LIBRARY_INLINE bool reducer_link::keep_what_peers_may_reach() {
  if (!spent_ || peers_quiet_) return false;
  comm_.keep_until_exit();
  return true;
}

CREMA_LIBRARY_INLINE void reducer_link::wait(std::span<MPI_Request> requests,
                                             std::span<const int> peers, const char* what,
                                             bool cancellable) {
  std::vector<completion> ends(requests.size());
  if (const auto silent = wait_each(requests, ends, peers, timeout_, cancellable)) {
    give_up_on_silent(peers[*silent], what);
  }
  for (std::size_t i = 0; i < ends.size(); ++i) {
    if (ends[i].code != MPI_SUCCESS) {
      give_up_on(peers[i], crema::detail::format(
                               "rank {} could not exchange the {} of step {} with rank {}: {}",
                               rank_, what, step_ - 1, peers[i], failure_text(ends[i].code)));
    }
  }
}

CREMA_LIBRARY_INLINE void reducer_link::receive(MPI_Request& request, int peer, std::size_t bytes,
                                                const char* what) {
  completion end;
  if (wait_each({&request, 1}, {&end, 1}, {&peer, 1}, timeout_)) give_up_on_silent(peer, what);
  if (const auto problem = receive_problem(end, bytes)) {
    give_up_on(peer, crema::detail::format("rank {} sent rank {} {} in the {} of step {}; refused",
                                           peer, rank_, *problem, what, step_ - 1));
  }
}

// detail::wait_each, answering the other ranks' questions meanwhile (whom this rank waits for:
// the peer of its first request outstanding), and given up at once when another rank says it
// gave up on a rank: then that rank is the one to name, and it is named here.
CREMA_LIBRARY_INLINE std::optional<std::size_t> reducer_link::wait_each(
    std::span<MPI_Request> requests, std::span<completion> ends, std::span<const int> peers,
    std::chrono::milliseconds timeout, bool cancellable) {
  // Every millisecond at most: the messages of a healthy run arrive between two looks.
  auto next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  const auto first = detail::wait_each(
      requests, ends, timeout,
      [&] {
        const auto now = std::chrono::steady_clock::now();
        if (now < next_look) return false;
        next_look = now + std::chrono::milliseconds(1);
        for (std::size_t i = 0; i < ends.size(); ++i) {
          if (!ends[i].done) {
            wait_on(peers[i]);
            break;
          }
        }
        return between_polls();
      },
      cancellable);
  wait_on(std::nullopt);
  if (first && heard_) name_what_was_heard();
  return first;
}

// Tells the process's board what this link waits for now (a peer, or nothing), for the
// questions of other ranks.
CREMA_LIBRARY_INLINE void reducer_link::wait_on(std::optional<int> peer) noexcept {
  if (peer != waiting_for_) {
    waiting_for_ = peer;
    failure_board::of_this_process().waiting(peer ? comm_ : MPI_COMM_NULL, peer.value_or(-1));
  }
}

// What every wait does between its polls: answers the questions other ranks sent, and says
// whether another rank has sent a failure notice (kept, decoded or not, in `heard_`).
CREMA_LIBRARY_INLINE bool reducer_link::between_polls() {
  failure_board::of_this_process().answer_questions();
  if (heard_) return true;
  int found = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status{};
  if (MPI_Improbe(MPI_ANY_SOURCE, reducer_failure_tag, comm_, &found, &message, &status) !=
          MPI_SUCCESS ||
      found == 0) {
    return false;
  }
  heard_.emplace(static_cast<std::size_t>(status.MPI_SOURCE),
                 decode_failure(link_detail::take_matched(message, status), ranks_));
  return true;
}

// `peer` did not answer within the timeout (`anyone`: one of the ranks of a collective did
// not); it may itself be waiting for another rank. Asks along the waits (whom do you wait for?)
// and spends the link naming the first rank that does not answer, and how it was found.
CREMA_LIBRARY_INLINE void reducer_link::give_up_on_silent(int peer, const char* what) {
  give_up_on_silent(
      peer, peer == anyone
                ? crema::detail::format("rank {} waited {} ms for the others in the {} of step {}",
                                        rank_, timeout_.count(), what, step_ - 1)
                : crema::detail::format("rank {} waited {} ms for rank {} in the {} of step {}",
                                        rank_, timeout_.count(), peer, what, step_ - 1));
}

CREMA_LIBRARY_INLINE void reducer_link::give_up_on_silent(int peer, const std::string& waited) {
  wait_on(peer);  // still, for the questions of ranks that wait for this one
  const auto culprit = culprit_behind(peer);
  if (heard_) name_what_was_heard();
  if (!culprit) {
    spend(crema::detail::format("{}; every rank answers, so MPI itself is stuck", waited));
  }
  if (*culprit == peer) give_up_on(peer, waited);
  give_up_on(*culprit,
             crema::detail::format("{}, and the ranks it waits for lead to rank {}, which does "
                                   "not answer",
                                   waited, *culprit));
}

// The rank at fault behind `peer`, found by asking along the waits, each rank given a quarter
// of the timeout to answer: the first that does not answer (or sends nonsense), or that waits
// for nobody or for a rank already asked. A rank waiting in a collective (`anyone`) leads to
// every rank not asked yet. Nothing if every rank answers (or a failure notice came meanwhile:
// the caller reads it).
CREMA_LIBRARY_INLINE std::optional<int> reducer_link::culprit_behind(int peer) {
  const auto patience =
      std::max<std::chrono::milliseconds>(std::chrono::milliseconds(20), timeout_ / 4);
  std::vector<bool> asked(ranks_, false);
  asked[rank_] = true;
  std::vector<int> to_ask;
  const auto lead_to_everyone = [&] {
    for (std::size_t r = ranks_; r-- > 0;) {
      if (!asked[r]) to_ask.push_back(static_cast<int>(r));
    }
  };
  if (peer == anyone) {
    lead_to_everyone();
  } else {
    to_ask.push_back(peer);
  }
  while (!to_ask.empty()) {
    const int current = to_ask.back();
    to_ask.pop_back();
    if (asked[static_cast<std::size_t>(current)]) continue;
    asked[static_cast<std::size_t>(current)] = true;
    const auto reply = ask(current, patience);
    if (heard_) return std::nullopt;
    if (!reply) return current;
    if (reply->waits_for == anyone) {
      lead_to_everyone();
    } else if (reply->waits_for < 0 || asked[static_cast<std::size_t>(reply->waits_for)]) {
      return current;
    } else {
      to_ask.push_back(static_cast<int>(reply->waits_for));
    }
  }
  return std::nullopt;
}

// Asks `rank` whom it waits for; nothing if it does not answer within `patience`, or answers
// nonsense. Answers the others' questions meanwhile.
CREMA_LIBRARY_INLINE std::optional<waiting_reply> reducer_link::ask(
    int rank, std::chrono::milliseconds patience) {
  MPI_Request question = MPI_REQUEST_NULL;
  if (MPI_Isend(nullptr, 0, MPI_BYTE, rank, reducer_query_tag, comm_, &question) != MPI_SUCCESS) {
    return std::nullopt;
  }
  MPI_Request_free(&question);
  std::array<std::byte, sizeof(waiting_reply)> answer{};
  MPI_Request reply = MPI_REQUEST_NULL;
  if (MPI_Irecv(answer.data(), sizeof(answer), MPI_BYTE, rank, reducer_reply_tag, comm_, &reply) !=
      MPI_SUCCESS) {
    return std::nullopt;
  }
  completion end;
  if (detail::wait_each({&reply, 1}, {&end, 1}, patience, [this] { return between_polls(); }) ||
      receive_problem(end, sizeof(answer))) {
    return std::nullopt;
  }
  const auto decoded = decode_reply(answer, ranks_);
  const auto* waiting = std::get_if<waiting_reply>(&decoded);
  return waiting != nullptr ? std::optional(*waiting) : std::nullopt;
}

// Spends the link with what another rank's failure notice said: the rank it gave up on, or, if
// the notice was nonsense, its sender.
CREMA_LIBRARY_INLINE void reducer_link::name_what_was_heard() {
  const auto& [sender, notice] = *heard_;
  if (const auto* problem = std::get_if<std::string>(&notice)) {
    give_up_on(static_cast<int>(sender),
               crema::detail::format("rank {} sent rank {} {} in step {}; refused", sender, rank_,
                                     *problem, step_ - 1));
  }
  const auto& failure = std::get<failure_notice>(notice);
  spend(crema::detail::format("rank {} gave up on rank {} in step {}; rank {} stops too", sender,
                              failure.rank, failure.step, rank_));
}

// Tells every other rank but `culprit`, of this link and of the others in this process, that
// this one gave up on `culprit` (so that they name it, not this rank, which stops answering
// now), then spends the link.
CREMA_LIBRARY_INLINE void reducer_link::give_up_on(int culprit, std::string reason) {
  failure_board::of_this_process().tell(comm_, culprit, step_ - 1);
  spend(std::move(reason));
}

}  // namespace crema::mpi::detail
