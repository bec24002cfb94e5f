#pragma once

#include <crema/collective/compression.hpp>
#include <crema/collective/detail/elementwise.hpp>
#include <crema/collective/mpi/detail/mpi_support.hpp>
#include <crema/core/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

/// @file
/// An asynchronous parameter server over MPI, in the manner of caffe-parallel: one rank holds the
/// parameters and hands out iterations; the other ranks compute a diff for their iteration, send
/// it (compressed, by option), and wait for fresh parameters. The server applies the average of
/// the diffs that arrived when every working client has reported or a wait passes, and every wait
/// on either side is bounded: a silent client is reported late, then lost (its iteration goes to
/// another); a silent server makes its clients raise `crema::mpi_error`.

namespace crema::mpi {

/// @brief What the server does with a diff computed on parameters more than `max_staleness`
/// versions old.
enum class stale_diff {
  refresh,  ///< not applied: the client gets the newest parameters and the same iteration again
  drop,     ///< not applied and counted: the client gets the newest parameters and new work
};

/// @brief How a parameter server and its clients work; every rank of a job passes the same.
struct ps_options {
  /// The rank of the server in the communicator; every other rank is a client.
  int server = 0;
  /// Server: how long an update waits for working clients after the one before it (caffe-parallel
  /// waited 3 s); then it applies the diffs that arrived, and the clients that did not report are
  /// late.
  std::chrono::milliseconds wait{std::chrono::seconds(3)};
  /// Server: a client that has not answered its work for this long is lost; its iteration goes
  /// to another client. A diff from it later is dropped and it gets work again.
  std::chrono::milliseconds lost_after{std::chrono::seconds(30)};
  /// Client: how long it waits for the server before raising `crema::mpi_error`; both: how long
  /// one message may take. Longer than `wait`.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// τ: the most versions a diff's parameters may be behind the server's and still be applied.
  std::uint64_t max_staleness = std::numeric_limits<std::uint64_t>::max();
  stale_diff on_stale = stale_diff::refresh;
  /// Client: how diffs travel (the server reads whatever a client sends).
  compression diffs{};
};

/// @brief An update rule: `policy(parameters, mean_diff, version)` changes the parameters by the
/// average of the diffs that arrived for update `version` (0 for the first).
template <class Policy, class T>
concept update_policy = requires(Policy& policy, std::span<T> parameters, std::span<const T> diff,
                                 std::uint64_t version) {
  policy(parameters, diff, version);
};

/// @brief Stochastic gradient descent with momentum and weight decay, as Caffe's SGD solver:
/// `v = momentum * v + learning_rate * (g + weight_decay * w)`, `w -= v`. The diffs are gradients.
template <class T>
class sgd_momentum {
 public:
  /// @brief A step of 0.01, momentum 0.9, no weight decay.
  sgd_momentum() = default;
  /// @param learning_rate the step
  /// @param momentum      the share of the last step kept
  /// @param weight_decay  the L2 penalty's factor
  explicit sgd_momentum(T learning_rate, T momentum = T(0.9), T weight_decay = T(0))
      : learning_rate_(learning_rate), momentum_(momentum), weight_decay_(weight_decay) {}

  void operator()(std::span<T> parameters, std::span<const T> gradient, std::uint64_t) {
    if (velocity_.size() != parameters.size()) velocity_.assign(parameters.size(), T(0));
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      velocity_[i] =
          momentum_ * velocity_[i] + learning_rate_ * (gradient[i] + weight_decay_ * parameters[i]);
      parameters[i] -= velocity_[i];
    }
  }

 private:
  T learning_rate_ = T(0.01);
  T momentum_ = T(0.9);
  T weight_decay_ = T(0);
  std::vector<T> velocity_;
};

/// @brief The diffs are changes of the parameters (a client's own optimizer stepped): the
/// average is added.
struct add_diff {
  template <class T>
  void operator()(std::span<T> parameters, std::span<const T> diff, std::uint64_t) const {
    for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i] += diff[i];
  }
};

/// @brief What the server saw of one client.
struct ps_client_record {
  int rank = 0;
  std::uint64_t diffs = 0;      ///< diffs received
  std::uint64_t applied = 0;    ///< of them, in an update
  std::uint64_t dropped = 0;    ///< of them, too stale (`stale_diff::drop`) or sent while lost
  std::uint64_t refreshed = 0;  ///< of them, too stale and redone (`stale_diff::refresh`)
  std::uint64_t late = 0;       ///< updates made without it while it was working
  std::uint64_t times_lost = 0;
  bool lost = false;                        ///< lost now
  std::uint64_t max_staleness = 0;          ///< of the diffs received
  std::uint64_t max_applied_staleness = 0;  ///< of the diffs applied (at most τ)
  std::uint64_t staleness_sum = 0;          ///< of the diffs received
  /// When its diffs arrived, from the update before them: a straggler's are late in the wait.
  std::chrono::nanoseconds last_arrival{0};
  std::chrono::nanoseconds max_arrival{0};
  std::chrono::nanoseconds arrival_sum{0};
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
};

/// @brief What a parameter server did.
struct ps_server_stats {
  std::uint64_t version = 0;            ///< updates applied
  std::uint64_t timed_out_updates = 0;  ///< of them, made at the wait's end without everyone
  std::uint64_t iterations_handed_out = 0;
  std::uint64_t iterations_handed_again = 0;  ///< of lost clients, given to others
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
  /// Messages of an earlier session on a reused communicator, dropped.
  std::uint64_t foreign_messages = 0;
  std::vector<ps_client_record> clients;  ///< by rank, the server's own left out
};

/// @brief What a client did.
struct ps_client_stats {
  std::uint64_t pushes = 0;
  std::uint64_t coordinates_sent = 0;
  std::uint64_t refreshed = 0;    ///< iterations handed back to redo on newer parameters
  std::uint64_t bytes_sent = 0;   ///< its messages, headers included
  std::uint64_t bytes_dense = 0;  ///< what its diffs would have been uncompressed
  std::uint64_t bytes_received = 0;
  /// Messages of an earlier session on a reused communicator, dropped.
  std::uint64_t foreign_messages = 0;
};

namespace detail {

inline constexpr int hello_tag = 11;
inline constexpr int diff_tag = 12;
inline constexpr int reply_tag = 13;
inline constexpr int parameters_tag = 14;

inline constexpr std::uint64_t ps_magic = 0x6372656d612d7073;  // "crema-ps"

// Every message opens with its session: a number the server draws and every rank learns at
// construction. MPI reuses a freed communicator's context for the next one, and a message of an
// earlier server or client still on its way over TCP can arrive in the next session's: such a
// message is told by its session and dropped, never read as this session's.
struct ps_hello {
  std::uint64_t session = 0;
  std::uint64_t magic = ps_magic;
  std::uint64_t count = 0;
  std::uint64_t value_bytes = 0;
};

struct ps_push {
  std::uint64_t session = 0;
  std::uint64_t base_version = 0;
  std::uint64_t iteration = 0;
};

enum class ps_reply_kind : std::uint64_t { work = 1, done, refused };

struct ps_reply {
  std::uint64_t session = 0;
  ps_reply_kind kind = ps_reply_kind::work;
  std::uint64_t version = 0;
  std::uint64_t iteration = 0;
  std::uint64_t refreshed = 0;        // the same iteration again, on newer parameters
  std::uint64_t with_parameters = 0;  // a parameters message follows
  char reason[240] = {};              // why, for `refused`
};

// The server draws the session; every rank of the new communicator learns it (collective).
inline std::uint64_t agree_on_session(MPI_Comm comm, int server) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::uint64_t session = 0;
  if (rank == server) {
    std::random_device entropy;
    session = (std::uint64_t{entropy()} << 32) ^ entropy() ^ 1u;  // never 0
  }
  check(MPI_Bcast(&session, 1, MPI_UINT64_T, server, comm), "MPI_Bcast");
  return session;
}

// Duplicates `comm` (collective) and checks the job's shape and the server's rank.
template <class T>
MPI_Comm ps_communicator(MPI_Comm comm, std::size_t count, const ps_options& options,
                         const char* component, bool server) {
  require_thread_level(component);
  diff_encoder<T>::validate(count, options.diffs);
  if (count > static_cast<std::size_t>(INT_MAX) / sizeof(T)) {
    crema::detail::fail<config_error>(
        "{}: {} parameters of {} bytes are past the {} bytes one MPI message can carry", component,
        count, sizeof(T), INT_MAX);
  }
  if (options.wait <= std::chrono::milliseconds::zero() ||
      options.lost_after <= std::chrono::milliseconds::zero() || options.timeout <= options.wait) {
    crema::detail::fail<config_error>(
        "{}: wait ({} ms) and lost_after ({} ms) must be positive and timeout ({} ms) longer than "
        "wait",
        component, options.wait.count(), options.lost_after.count(), options.timeout.count());
  }
  MPI_Comm own = MPI_COMM_NULL;
  check(MPI_Comm_dup(comm, &own), "MPI_Comm_dup");
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(own, &rank);
  MPI_Comm_size(own, &ranks);
  std::string problem;
  if (ranks < 2) {
    problem =
        fmt::format("{}: needs a server and at least one client; the communicator has {} rank",
                    component, ranks);
  } else if (options.server < 0 || options.server >= ranks) {
    problem = fmt::format("{}: server rank {} is not in a communicator of {} ranks", component,
                          options.server, ranks);
  } else if (server != (rank == options.server)) {
    problem = fmt::format("{}: made on rank {} while the server is rank {}", component, rank,
                          options.server);
  }
  if (!problem.empty()) {
    MPI_Comm_free(&own);
    crema::detail::fail<config_error>("{}", problem);
  }
  return own;
}

inline void free_communicator(MPI_Comm& comm) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

// Cancels and frees a request that may still be in flight (a peer that is gone never takes it).
inline void abandon(MPI_Request& request) {
  if (request == MPI_REQUEST_NULL) return;
  int done = 0;
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  if (done) return;
  MPI_Cancel(&request);
  MPI_Request_free(&request);
}

}  // namespace detail

/// @brief The server of the parameters, on rank `options.server` of a communicator whose other
/// ranks each make a `ps_client<T>` with the same options.
///
/// `serve(iterations)` hands out iterations 0 .. iterations-1 to idle clients, one at a time, with
/// the newest parameters. An update is made when every working client (or one yet to say hello)
/// has sent its diff, or
/// `wait` after the update before, from the diffs that arrived (their average, given to the
/// policy); then each client that reported gets the new parameters and its next iteration. A diff
/// more than τ versions old is redone or dropped (`stale_diff`); a client silent for `lost_after`
/// is lost and its iteration handed out again. When every iteration is applied, dropped or handed
/// again and done, every client gets the final parameters and a shutdown.
///
/// Not thread-safe: one thread calls `serve`, and `stats` from it (or from `on_update`).
/// @tparam T      float or double
/// @tparam Policy an `update_policy` for T
template <class T, update_policy<T> Policy = sgd_momentum<T>>
class parameter_server {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "crema: the parameters are of float or double");

 public:
  /// @param comm       the communicator of the server and its clients (duplicated here: every
  ///                   rank makes its server or client at once, as for an MPI collective)
  /// @param parameters the parameters, their initial values; updated in place and sent from
  /// @param policy     the update rule
  /// @param options    the same on every rank
  /// @throws crema::config_error on fewer than 2 ranks, a server rank that is not this one, or
  ///         bad times; crema::mpi_error if MPI is not initialized for threads
  parameter_server(MPI_Comm comm, std::span<T> parameters, Policy policy = {},
                   ps_options options = {})
      : parameters_(parameters),
        policy_(std::move(policy)),
        options_(options),
        comm_(detail::ps_communicator<T>(comm, parameters.size(), options_, name, true)),
        session_(detail::agree_on_session(comm_, options_.server)),
        sum_(parameters.size()) {
    int ranks = 0;
    MPI_Comm_size(comm_, &ranks);
    for (int rank = 0; rank < ranks; ++rank) {
      if (rank == options_.server) continue;
      stats_.clients.push_back({.rank = rank});
      clients_.push_back({.rank = rank});
    }
  }
  parameter_server(const parameter_server&) = delete;
  parameter_server& operator=(const parameter_server&) = delete;
  ~parameter_server() {
    for (auto& send : sends_) detail::abandon(send.request);
    detail::free_communicator(comm_);
  }

  /// @brief Serves `iterations` iterations, then shuts every client down (they get the final
  /// parameters). Blocks; allocates as messages grow.
  /// @param on_update called after each update with its version (1 for the first) and the
  ///                  parameters
  /// @return what happened (also `stats()`)
  /// @throws crema::mpi_error if every client is lost with work left, or a client's parameters
  ///         differ in size (every client is told and raises it too)
  template <class OnUpdate = void (*)(std::uint64_t, std::span<const T>)>
  const ps_server_stats& serve(
      std::uint64_t iterations, OnUpdate on_update = [](std::uint64_t, std::span<const T>) {});

  /// @return what the server saw so far
  [[nodiscard]] const ps_server_stats& stats() const noexcept { return stats_; }
  /// @return the number of updates made
  [[nodiscard]] std::uint64_t version() const noexcept { return stats_.version; }

 private:
  static constexpr const char* name = "parameter_server";
  using clock = std::chrono::steady_clock;

  enum class phase { greeting, working, reported, idle, lost };
  struct client {
    int rank = 0;
    phase now = phase::greeting;
    std::uint64_t iteration = 0;
    clock::time_point since{};  // when it was given work (or the serve began)
  };
  struct pending_send {
    MPI_Request request = MPI_REQUEST_NULL;
    std::size_t client = 0;
  };

  client& client_of(int rank) {
    return clients_[static_cast<std::size_t>(rank < options_.server ? rank : rank - 1)];
  }
  ps_client_record& record_of(const client& c) {
    return stats_.clients[static_cast<std::size_t>(&c - clients_.data())];
  }

  std::optional<std::uint64_t> next_iteration() {
    if (!again_.empty()) {
      const std::uint64_t iteration = again_.front();
      again_.pop_front();
      return iteration;
    }
    if (next_ < iterations_) {
      ++stats_.iterations_handed_out;
      return next_++;
    }
    return std::nullopt;
  }

  // Sends a reply and, for work and shutdowns of clients that listen, the parameters.
  void send_reply(client& c, detail::ps_reply reply) {
    reply.session = session_;
    replies_.push_back(reply);  // a deque: earlier replies stay where their sends read them
    const std::size_t index = static_cast<std::size_t>(&c - clients_.data());
    auto& record = record_of(c);
    sends_.push_back({MPI_REQUEST_NULL, index});
    detail::check(MPI_Isend(&replies_.back(), sizeof reply, MPI_BYTE, c.rank, detail::reply_tag,
                            comm_, &sends_.back().request),
                  "MPI_Isend");
    record.bytes_sent += sizeof reply;
    stats_.bytes_sent += sizeof reply;
    if (!reply.with_parameters) return;
    sends_.push_back({MPI_REQUEST_NULL, index});
    detail::check(
        MPI_Isend(parameters_.data(), static_cast<int>(parameters_.size_bytes()), MPI_BYTE, c.rank,
                  detail::parameters_tag, comm_, &sends_.back().request),
        "MPI_Isend");
    record.bytes_sent += parameters_.size_bytes();
    stats_.bytes_sent += parameters_.size_bytes();
  }

  // Gives `c` work (with the newest parameters), or makes it idle where none is left.
  void hand_out(client& c, bool refresh = false) {
    const auto iteration = refresh ? std::optional(c.iteration) : next_iteration();
    if (!iteration) {
      c.now = phase::idle;
      return;
    }
    c.now = phase::working;
    c.iteration = *iteration;
    c.since = clock::now();
    send_reply(c, {.kind = detail::ps_reply_kind::work,
                   .version = stats_.version,
                   .iteration = *iteration,
                   .refreshed = refresh ? 1u : 0u,
                   .with_parameters = 1});
  }

  // Sends still reading the parameters must end before they change: a client that does not take
  // its parameters within the timeout is lost, and what is still on its way to a lost client is
  // cancelled without a second wait.
  void finish_sends() {
    for (auto& send : sends_) {
      client& c = clients_[send.client];
      if (c.now == phase::lost) {
        detail::abandon(send.request);
      } else if (detail::wait_all({&send.request, 1}, options_.timeout)) {
        lose(c);
      }
    }
    sends_.clear();
    replies_.clear();
  }

  void lose(client& c) {
    if (c.now == phase::lost) return;
    if (c.now == phase::working) {
      again_.push_back(c.iteration);
      ++stats_.iterations_handed_again;
    }
    c.now = phase::lost;
    auto& record = record_of(c);
    record.lost = true;
    ++record.times_lost;
  }

  // Receives one message if one is there; returns whether one was.
  bool receive_one() {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status{};
    detail::check(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &found, &message, &status),
                  "MPI_Improbe");
    if (!found) return false;
    client& c = client_of(status.MPI_SOURCE);
    if (!detail::receive_matched(message, status, incoming_, options_.timeout)) {
      lose(c);  // it stopped in the middle of its message
      return true;
    }
    const auto bytes = static_cast<std::uint64_t>(incoming_.size());
    std::uint64_t session = 0;
    if (incoming_.size() >= sizeof session) std::memcpy(&session, incoming_.data(), sizeof session);
    if (session != session_) {
      ++stats_.foreign_messages;
      return true;
    }
    auto& record = record_of(c);
    record.bytes_received += bytes;
    stats_.bytes_received += bytes;
    if (status.MPI_TAG == detail::hello_tag) {
      greet(c);
    } else if (status.MPI_TAG == detail::diff_tag) {
      take_diff(c);
    }
    return true;
  }

  void greet(client& c) {
    detail::ps_hello hello;
    if (incoming_.size() == sizeof hello) std::memcpy(&hello, incoming_.data(), sizeof hello);
    if (hello.magic != detail::ps_magic || hello.count != parameters_.size() ||
        hello.value_bytes != sizeof(T)) {
      refuse_all(fmt::format(
          "parameter_server: rank {} has {} parameters of {} bytes; the server on rank {} has {} "
          "of {} bytes",
          c.rank, hello.count, hello.value_bytes, options_.server, parameters_.size(), sizeof(T)));
    }
    if (c.now == phase::greeting || c.now == phase::lost) {
      record_of(c).lost = false;
      hand_out(c);
    }
  }

  [[noreturn]] void refuse_all(const std::string& reason) {
    detail::ps_reply refusal{.kind = detail::ps_reply_kind::refused};
    std::memcpy(refusal.reason, reason.data(), std::min(reason.size(), sizeof refusal.reason - 1));
    for (auto& c : clients_) send_reply(c, refusal);
    finish_sends();
    crema::detail::fail_with_code<mpi_error>(0, "{}", reason);
  }

  void take_diff(client& c) {
    detail::ps_push push;
    auto& record = record_of(c);
    ++record.diffs;
    if (incoming_.size() < sizeof push) {
      ++record.dropped;
      return;
    }
    std::memcpy(&push, incoming_.data(), sizeof push);
    if (c.now != phase::working || push.iteration != c.iteration) {
      // Sent before it was lost, or a diff it owed before: its iteration went to another.
      ++record.dropped;
      if (c.now == phase::lost) {
        record.lost = false;
        hand_out(c);
      }
      return;
    }
    const std::uint64_t staleness = stats_.version - std::min(push.base_version, stats_.version);
    record.max_staleness = std::max(record.max_staleness, staleness);
    record.staleness_sum += staleness;
    if (staleness > options_.max_staleness) {
      if (options_.on_stale == stale_diff::refresh) {
        ++record.refreshed;
        hand_out(c, true);
      } else {
        ++record.dropped;
        hand_out(c);
      }
      return;
    }
    try {
      add_encoded_diff<T>(std::span<const std::byte>(incoming_).subspan(sizeof push),
                          std::span<T>(sum_));
    } catch (const format_error& e) {
      refuse_all(fmt::format("parameter_server: rank {} sent a diff crema cannot read: {}", c.rank,
                             e.what()));
    }
    ++record.applied;
    record.max_applied_staleness = std::max(record.max_applied_staleness, staleness);
    const auto arrival = clock::now() - round_began_;
    record.last_arrival = arrival;
    record.max_arrival = std::max(record.max_arrival, record.last_arrival);
    record.arrival_sum += arrival;
    c.now = phase::reported;
    ++contributors_;
  }

  template <class OnUpdate>
  void update(bool timed_out, OnUpdate& on_update) {
    if (contributors_ > 1) {
      crema::detail::scale_into(sum_.data(), sum_.data(), sum_.size(), T(1) / T(contributors_));
    }
    finish_sends();
    policy_(parameters_, std::span<const T>(sum_), stats_.version);
    ++stats_.version;
    if (timed_out) ++stats_.timed_out_updates;
    std::fill(sum_.begin(), sum_.end(), T(0));
    contributors_ = 0;
    round_began_ = clock::now();
    for (auto& c : clients_) {
      if (c.now == phase::working && timed_out) ++record_of(c).late;
    }
    on_update(stats_.version, std::span<const T>(parameters_));
    for (auto& c : clients_) {
      if (c.now == phase::reported) hand_out(c);
    }
  }

  [[nodiscard]] bool any(phase p) const {
    return std::any_of(clients_.begin(), clients_.end(),
                       [&](const client& c) { return c.now == p; });
  }

  void shut_down() {
    for (auto& c : clients_) {
      send_reply(c, {.kind = detail::ps_reply_kind::done,
                     .version = stats_.version,
                     .with_parameters = c.now == phase::lost ? 0u : 1u});
    }
    // A lost client may never take its shutdown: only the others' sends are waited for. The
    // replies stay until the server goes (a small send is usually out at once, but need not be).
    for (auto& send : sends_) {
      if (clients_[send.client].now == phase::lost) {
        MPI_Request_free(&send.request);
      } else if (detail::wait_all({&send.request, 1}, options_.timeout)) {
        lose(clients_[send.client]);
      }
    }
    sends_.clear();
  }

  std::span<T> parameters_;
  Policy policy_;
  ps_options options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::uint64_t session_ = 0;
  std::vector<T> sum_;  // of the diffs of this update
  std::size_t contributors_ = 0;
  std::vector<client> clients_;
  std::deque<std::uint64_t> again_;  // iterations of lost clients
  std::uint64_t next_ = 0;
  std::uint64_t iterations_ = 0;
  clock::time_point round_began_{};
  bool served_ = false;
  std::vector<std::byte> incoming_;
  std::deque<detail::ps_reply> replies_;
  std::vector<pending_send> sends_;
  ps_server_stats stats_;
};

/// @brief A client of a `parameter_server`: every rank but the server's makes one, with the
/// same options.
///
/// `pull()` waits for parameters (written into the span) and an iteration to compute; `push(diff)`
/// sends the diff of that iteration (compressed by `options.diffs`, with error feedback) without
/// waiting; `exchange(diff)` does both. `pull()` returns no iteration once the server shut down,
/// the final parameters in place. A server silent for `timeout` makes `pull` raise
/// `crema::mpi_error` naming it.
///
/// Not thread-safe: one thread calls it. `push` allocates only while its message grows.
/// @tparam T float or double
template <class T>
class ps_client {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "crema: the parameters are of float or double");

 public:
  /// @param comm       the communicator of the server and its clients (duplicated here)
  /// @param parameters where the server's parameters are written, as many as the server's
  /// @param options    the same on every rank
  /// @throws crema::config_error as `parameter_server`'s, or a bad compression
  ps_client(MPI_Comm comm, std::span<T> parameters, ps_options options = {})
      : parameters_(parameters),
        options_(options),
        encoder_(parameters.size(), options.diffs),
        comm_(detail::ps_communicator<T>(comm, parameters.size(), options_, name, false)),
        session_(detail::agree_on_session(comm_, options_.server)) {
    MPI_Comm_rank(comm_, &rank_);
    hello_ = {.session = session_, .count = parameters_.size(), .value_bytes = sizeof(T)};
    detail::check(MPI_Isend(&hello_, sizeof hello_, MPI_BYTE, options_.server, detail::hello_tag,
                            comm_, &send_),
                  "MPI_Isend");
    stats_.bytes_sent += sizeof hello_;
  }
  ps_client(const ps_client&) = delete;
  ps_client& operator=(const ps_client&) = delete;
  ~ps_client() {
    detail::abandon(send_);
    detail::free_communicator(comm_);
  }

  /// @brief Waits for the server's parameters and this client's next iteration.
  /// @return the iteration to compute, or nothing once the server shut down (the final
  ///         parameters in place)
  /// @throws crema::mpi_error if the server is silent for `timeout`, or refused this job;
  ///         crema::state_error if the iteration it gave before was not pushed
  std::optional<std::uint64_t> pull();

  /// @brief Sends the diff of the iteration `pull` gave, compressed; returns once the message is
  /// on its way (waiting only for the previous one to have left).
  /// @throws crema::state_error without an iteration to answer; crema::length_error on a diff of
  ///         another size; crema::mpi_error if the previous message did not leave in `timeout`
  void push(std::span<const T> diff);

  /// @brief `push(diff)`, then `pull()`.
  std::optional<std::uint64_t> exchange(std::span<const T> diff) {
    push(diff);
    return pull();
  }

  /// @return the version of the parameters in place (the server's updates before them)
  [[nodiscard]] std::uint64_t version() const noexcept { return version_; }
  /// @return this client's rank
  [[nodiscard]] int rank() const noexcept { return rank_; }
  /// @return what this client sent and received
  [[nodiscard]] const ps_client_stats& stats() const noexcept { return stats_; }
  /// @return what is owed to the server: the part of past diffs not sent yet
  [[nodiscard]] std::span<const T> owed() const noexcept { return encoder_.owed(); }

 private:
  static constexpr const char* name = "ps_client";

  // The parameters that follow a foreign reply (of whatever size) are received and dropped: they
  // come before this session's, from the same rank.
  void drop_foreign_parameters() {
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status{};
    const bool found = detail::poll_until(
        [&] {
          int there = 0;
          detail::check(MPI_Improbe(options_.server, detail::parameters_tag, comm_, &there,
                                    &message, &status),
                        "MPI_Improbe");
          return there != 0;
        },
        options_.timeout);
    if (found && !detail::receive_matched(message, status, foreign_, options_.timeout)) {
      server_silent("dropping an earlier session's parameters");
    }
  }

  void await(MPI_Request& request, const char* what) {
    if (detail::wait_all({&request, 1}, options_.timeout)) server_silent(what);
  }

  [[noreturn]] void server_silent(const char* what) const {
    crema::detail::fail_with_code<mpi_error>(
        0, "ps_client: rank {} heard nothing from the server, rank {}, within {} ms ({})", rank_,
        options_.server, options_.timeout.count(), what);
  }

  std::span<T> parameters_;
  ps_options options_;
  diff_encoder<T> encoder_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::uint64_t session_ = 0;
  std::vector<std::byte> foreign_;  // where a foreign message's parameters are dropped
  int rank_ = 0;
  detail::ps_hello hello_;
  detail::ps_reply reply_;
  std::vector<std::byte> message_;
  MPI_Request send_ = MPI_REQUEST_NULL;
  std::optional<std::uint64_t> iteration_;  // the work to answer
  std::uint64_t version_ = 0;
  bool done_ = false;
  ps_client_stats stats_;
};

// --- definitions -------------------------------------------------------------------------------

template <class T, update_policy<T> Policy>
template <class OnUpdate>
const ps_server_stats& parameter_server<T, Policy>::serve(std::uint64_t iterations,
                                                          OnUpdate on_update) {
  if (served_) {
    crema::detail::fail<state_error>("parameter_server: serves once; its clients are shut down");
  }
  served_ = true;
  iterations_ = iterations;
  round_began_ = clock::now();
  for (auto& c : clients_) c.since = round_began_;
  for (;;) {
    const bool heard = receive_one();
    const auto now = clock::now();
    if (contributors_ > 0) {
      // Everyone: no client is working or yet to say hello (the first update waits for all).
      const bool everyone = !any(phase::working) && !any(phase::greeting);
      if (everyone || now - round_began_ >= options_.wait) update(!everyone, on_update);
    }
    for (auto& c : clients_) {
      if ((c.now == phase::working || c.now == phase::greeting) &&
          now - c.since >= options_.lost_after) {
        lose(c);
      }
    }
    for (auto& c : clients_) {  // an iteration handed back finds an idle client
      if (!again_.empty() && c.now == phase::idle) hand_out(c);
    }
    const bool work_left = !again_.empty() || next_ < iterations_;
    if (!work_left && contributors_ == 0 && !any(phase::working)) break;
    if (std::all_of(clients_.begin(), clients_.end(),
                    [](const client& c) { return c.now == phase::lost; })) {
      shut_down();
      crema::detail::fail_with_code<mpi_error>(
          0, "parameter_server: every client is lost, with {} iterations not done",
          again_.size() + (iterations_ - next_));
    }
    if (!heard) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  shut_down();
  return stats_;
}

template <class T>
std::optional<std::uint64_t> ps_client<T>::pull() {
  if (done_) return std::nullopt;
  if (iteration_) {  // the server waits for this diff before it sends anything more
    crema::detail::fail<state_error>(
        "ps_client: rank {} pulls again before it pushed the diff of iteration {}", rank_,
        *iteration_);
  }
  MPI_Request request = MPI_REQUEST_NULL;
  for (;;) {
    detail::check(MPI_Irecv(&reply_, sizeof reply_, MPI_BYTE, options_.server, detail::reply_tag,
                            comm_, &request),
                  "MPI_Irecv");
    await(request, "waiting for parameters");
    stats_.bytes_received += sizeof reply_;
    if (reply_.session == session_) break;
    ++stats_.foreign_messages;
    if (reply_.with_parameters) drop_foreign_parameters();
  }
  if (reply_.kind == detail::ps_reply_kind::refused) {
    done_ = true;
    reply_.reason[sizeof reply_.reason - 1] = '\0';
    crema::detail::fail_with_code<mpi_error>(0, "{}", reply_.reason);
  }
  if (reply_.with_parameters) {
    detail::check(MPI_Irecv(parameters_.data(), static_cast<int>(parameters_.size_bytes()),
                            MPI_BYTE, options_.server, detail::parameters_tag, comm_, &request),
                  "MPI_Irecv");
    await(request, "receiving parameters");
    stats_.bytes_received += parameters_.size_bytes();
    version_ = reply_.version;
  }
  if (reply_.kind == detail::ps_reply_kind::done) {
    done_ = true;
    iteration_.reset();
    return std::nullopt;
  }
  if (reply_.refreshed) ++stats_.refreshed;
  iteration_ = reply_.iteration;
  return iteration_;
}

template <class T>
void ps_client<T>::push(std::span<const T> diff) {
  if (!iteration_) {
    crema::detail::fail<state_error>(
        "ps_client: rank {} pushes a diff with no iteration to answer: pull() first", rank_);
  }
  if (diff.size() != parameters_.size()) {
    crema::detail::fail<length_error>(
        "ps_client: rank {} pushes a diff of {} elements, expected {}", rank_, diff.size(),
        parameters_.size());
  }
  await(send_, "sending its previous message");
  message_.clear();
  crema::detail::append_bytes(message_, detail::ps_push{session_, version_, *iteration_});
  stats_.coordinates_sent += encoder_.encode(diff, message_);
  if (message_.size() > static_cast<std::size_t>(INT_MAX)) {
    crema::detail::fail<length_error>("ps_client: a message of {} bytes is past MPI's int count",
                                      message_.size());
  }
  detail::check(MPI_Isend(message_.data(), static_cast<int>(message_.size()), MPI_BYTE,
                          options_.server, detail::diff_tag, comm_, &send_),
                "MPI_Isend");
  ++stats_.pushes;
  stats_.bytes_sent += message_.size();
  stats_.bytes_dense += sizeof(detail::ps_push) + dense_diff_bytes<T>(parameters_.size());
  iteration_.reset();
}

}  // namespace crema::mpi
