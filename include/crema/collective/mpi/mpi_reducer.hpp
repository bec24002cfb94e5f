#pragma once

#include <crema/collective/detail/elementwise.hpp>
#include <crema/collective/host/device_tree_reducer.hpp>
#include <crema/collective/mpi/detail/abandoned_requests.hpp>
#include <crema/collective/mpi/detail/mpi_support.hpp>
#include <crema/collective/mpi/detail/reducer_link.hpp>
#include <crema/collective/reduction.hpp>
#include <crema/collective/topology.hpp>
#include <crema/collective/tree_collective.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/error.hpp>
#include <crema/core/host_threads.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace crema::mpi {

/// @brief How sums cross ranks.
enum class across_ranks {
  tree,       ///< crema's tree over point-to-point messages: the single-process reducer's bits
  allreduce,  ///< `MPI_Allreduce`: MPI's own algorithm, equal within rounding
};

/// @brief How an `mpi_reducer` works.
struct reducer_options {
  across_ranks across = across_ranks::tree;
  /// How long any rank waits for another in one operation before it raises `crema::mpi_error`
  /// naming it; after a timeout the reducer issues nothing more on its communicator.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// Elements per message of crema's tree across ranks (MPI_Allreduce gets whole ranges).
  std::size_t chunk_elements = std::size_t{1} << 20;
};

/// @brief Rank `rank` of `ranks`, with `local` consumers: the shard its consumer `consumer` reads,
/// as (shard, shards) for `source.shard`, so that all ranks together read every record once per
/// epoch (shard rank x local + consumer of ranks x local).
[[nodiscard]] constexpr std::pair<std::size_t, std::size_t> shard_of(
    std::size_t rank, std::size_t ranks, std::size_t local, std::size_t consumer) noexcept {
  return {rank * local + consumer, ranks * local};
}

/// @brief The MPI model of `tree_collective`: participants on several ranks (processes, and
/// through MPI, machines), each rank with a local tree of its own participants and buffers.
///
/// Global participant `g` is local participant `g % local` of rank `g / local`; every rank has the
/// same number of local participants and elements. A reduction sums each rank's local tree (in
/// its order), then across ranks: over crema's own tree of ranks through point-to-point messages
/// (the same bits as the single-process reducer over `topology()`, the joined tree), or through
/// `MPI_Allreduce` by option; then delivers (the average's 1/N over all participants). Every
/// rank calls every operation, with the same arguments, in the same order, as with MPI's own
/// collectives, on the communicator the user passes (duplicated, so crema's messages never meet
/// the user's).
///
/// Before each operation the ranks agree on it (operation, range, root, step, sizes): a rank whose
/// view differs makes every rank raise `crema::mpi_error` naming both ranks' views, instead of a
/// hang or mixed buffers. Every wait is bounded by `timeout` (twice that for rank 0's verdict on an
/// agreement, which waits for everyone else first): a rank that stops answering makes the others
/// raise `mpi_error` naming it, after which the reducer issues no further operation. (On the
/// `allreduce` path the data then moves in MPI's own blocking call, made by ranks that have all
/// just answered; crema's tree bounds every message by the timeout.)
///
/// MPI must be initialized with at least `MPI_THREAD_SERIALIZED`: operations may be called from
/// several threads (a `p2p_sync` reduces a bucket on the thread that finished it), one at a
/// time (they serialize on a mutex). Ranges are reduced in the order they are called; `p2p_sync`
/// calls them in bucket order for models that say so (`ranges_in_order`).
///
/// Making one sets SIGPIPE to be ignored if it still has its default action (a handler of the
/// program's own is kept): otherwise a peer killed mid-message ends this rank from inside MPI's
/// TCP transport before the rank can name it.
/// @tparam T a `reducible`, trivially copyable element type (messages carry its bytes); the
///           `allreduce` path needs float, double, int32 or int64
template <reducible T>
class mpi_reducer {
  static_assert(std::is_trivially_copyable_v<T>,
                "crema: mpi_reducer moves elements as bytes: T must be trivially copyable");

 public:
  using value_type = T;
  /// Ranks must reduce ranges in one order: `p2p_sync` issues its buckets in index order.
  static constexpr bool ranges_in_order = true;

  /// @param comm         the communicator of the ranks taking part (duplicated here)
  /// @param local_tree   this rank's participants
  /// @param local_buffers one buffer per local participant, all of the same size
  /// @param options      how sums cross ranks, the timeout, the message size
  /// @param backend      the host threads of the local reductions (null: a default team)
  /// @throws crema::mpi_error if MPI is not initialized with MPI_THREAD_SERIALIZED or more, if
  ///         the ranks disagree on participants or sizes (naming the ranks), or on a timeout
  /// @throws crema::collective_error on local buffers that do not fit the local tree
  mpi_reducer(MPI_Comm comm, tree_topology local_tree, std::vector<std::span<T>> local_buffers,
              reducer_options options = {}, std::shared_ptr<host_threads> backend = nullptr)
      : local_(local_tree, std::move(local_buffers), std::move(backend)),
        local_tree_(std::move(local_tree)),
        options_(options),
        link_(checked(comm, options_), options_.timeout),
        comm_(link_.comm()),
        rank_(link_.rank()),
        ranks_(link_.ranks()) {
    std::vector<int> rank_ids(ranks_);
    std::iota(rank_ids.begin(), rank_ids.end(), 0);
    rank_tree_ = std::make_unique<tree_topology>(
        tree_topology::build(rank_ids, [](int, int) { return true; }));
    chunk_.resize(std::min(options_.chunk_elements, std::max<std::size_t>(1, local_.size())));
    incoming_.resize(chunk_.size());
    try {
      agree(operation::construct, 0, local_.size(), 0);
    } catch (...) {
      keep_what_peers_may_reach();
      throw;
    }
  }
  mpi_reducer(const mpi_reducer&) = delete;
  mpi_reducer& operator=(const mpi_reducer&) = delete;
  ~mpi_reducer() { keep_what_peers_may_reach(); }

  /// @return all participants, on every rank
  [[nodiscard]] std::size_t participants() const noexcept { return ranks_ * local_.participants(); }
  /// @return the number of elements in each buffer
  [[nodiscard]] std::size_t size() const noexcept { return local_.size(); }
  /// @return this rank
  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  /// @return the number of ranks
  [[nodiscard]] std::size_t ranks() const noexcept { return ranks_; }
  /// @return the participants of each rank
  [[nodiscard]] std::size_t local_participants() const noexcept { return local_.participants(); }
  /// @return the global number of this rank's local participant `i`
  [[nodiscard]] std::size_t global(std::size_t i) const noexcept {
    return rank_ * local_.participants() + i;
  }
  /// @return the tree whose order the sums follow (over `across_ranks::tree`): every rank's local
  ///         tree, joined by the tree of ranks
  [[nodiscard]] tree_topology topology() const {
    return tree_topology::join(*rank_tree_, std::vector<tree_topology>(ranks_, local_tree_));
  }

  /// @brief Every participant's buffer becomes a copy of participant `root`'s.
  void broadcast(std::size_t root) {
    check_root("broadcast", root);
    std::scoped_lock lock(mutex_);
    agree(operation::broadcast, 0, size(), root);
    const int source = static_cast<int>(root / local_participants());
    const std::size_t mine = root % local_participants();
    for (std::size_t offset = 0; offset < size(); offset += chunk_.size()) {
      const std::size_t count = std::min(chunk_.size(), size() - offset);
      if (rank_ == static_cast<std::size_t>(source)) {
        const auto from = local_.buffer(mine).subspan(offset, count);
        std::copy(from.begin(), from.end(), chunk_.begin());
      }
      MPI_Request request = MPI_REQUEST_NULL;
      detail::check(MPI_Ibcast(chunk_.data(), static_cast<int>(count * sizeof(T)), MPI_BYTE, source,
                               comm_, &request),
                    "MPI_Ibcast");
      // The data may come through any rank (MPI's own algorithm): whoever holds it up is found
      // by asking around.
      wait({&request, 1}, {&anyone, 1}, "broadcast", false);
      for (std::size_t i = 0; i < local_participants(); ++i) {
        if (rank_ == static_cast<std::size_t>(source) && i == mine) continue;
        std::copy(chunk_.begin(), chunk_.begin() + static_cast<std::ptrdiff_t>(count),
                  local_.buffer(i).begin() + static_cast<std::ptrdiff_t>(offset));
      }
    }
  }

  /// @brief Participant `root`'s buffer receives the sum (times 1/N for `average`); the others
  /// are left as they were.
  void reduce(std::size_t root, reduction op = reduction::sum) {
    reduce_range(root, 0, size(), op);
  }

  /// @brief Every participant's buffer receives the sum (times 1/N for `average`).
  void allreduce(reduction op = reduction::sum) {
    std::scoped_lock lock(mutex_);
    agree(operation::allreduce, 0, size(), op == reduction::average ? 1 : 0);
    run_reduction(0, size(), op, std::nullopt);
  }

  /// @brief `reduce` of elements [begin, end) only.
  /// @throws crema::collective_error if `root` is not a participant or the range is not within
  ///         the buffers; crema::mpi_error if the ranks disagree or one times out
  void reduce_range(std::size_t root, std::size_t begin, std::size_t end,
                    reduction op = reduction::sum) {
    check_root("reduce_range", root);
    crema::detail::check_range(name, "reduce_range", begin, end, size());
    std::scoped_lock lock(mutex_);
    agree(op == reduction::average ? operation::reduce_average : operation::reduce_sum, begin, end,
          root);
    run_reduction(begin, end, op, root);
  }

 private:
  static constexpr const char* name = "mpi_reducer";
  using operation = detail::reducer_operation;
  static constexpr int anyone = detail::reducer_link::anyone;

  // Checks the options that depend on T; the link checks MPI and the timeout.
  static MPI_Comm checked(MPI_Comm comm, const reducer_options& options) {
    if (options.chunk_elements == 0 ||
        options.chunk_elements > static_cast<std::size_t>(INT_MAX) / sizeof(T)) {
      crema::detail::fail<config_error>(
          "mpi_reducer: chunk_elements must be between 1 and {} for elements of {} bytes, got {}",
          static_cast<std::size_t>(INT_MAX) / sizeof(T), sizeof(T), options.chunk_elements);
    }
    if (options.across == across_ranks::allreduce && detail::mpi_type<T>() == MPI_DATATYPE_NULL) {
      crema::detail::fail<config_error>(
          "mpi_reducer: across_ranks::allreduce needs float, double, int32 or int64 elements");
    }
    return comm;
  }

  void check_root(const char* call, std::size_t root) const {
    crema::detail::check_participant(name, call, root, participants());
  }

  void agree(operation op, std::size_t begin, std::size_t end, std::size_t root) {
    link_.agree(op, begin, end, root, {local_.size(), local_participants(), sizeof(T)});
  }
  void wait(std::span<MPI_Request> requests, std::span<const int> peers, const char* what,
            bool cancellable = true) {
    link_.wait(requests, peers, what, cancellable);
  }
  void receive(MPI_Request& request, int peer, std::size_t bytes, const char* what) {
    link_.receive(request, peer, bytes, what);
  }

  // A link spent with peers that may still send gave up on requests that may still move data
  // into the chunks: MPI may go on writing them if the peer wakes, so they are kept until the
  // program exits (the link keeps its communicator so).
  void keep_what_peers_may_reach() {
    if (!link_.keep_what_peers_may_reach()) return;
    detail::keep_until_exit(std::make_shared<const std::vector<T>>(std::move(chunk_)));
    detail::keep_until_exit(std::make_shared<const std::vector<T>>(std::move(incoming_)));
  }

  // Sums [begin, end) across all participants; delivers it to every local buffer (root none) or
  // to global participant `root`'s buffer only.
  void run_reduction(std::size_t begin, std::size_t end, reduction op,
                     std::optional<std::size_t> root) {
    if (!root && options_.across == across_ranks::tree && ranks_ > 1) {
      allreduce_pipelined(begin, end, op);
      return;
    }
    const auto scale = scale_for<T>(op, participants());
    const std::size_t target_rank = root ? *root / local_participants() : 0;
    // MPI_Allreduce cuts its messages itself: give it whole ranges (as long as a count fits an
    // int); crema's tree moves chunks.
    const bool whole_ranges = options_.across == across_ranks::allreduce && !root;
    const std::size_t step = whole_ranges ? static_cast<std::size_t>(INT_MAX) : chunk_.size();
    for (std::size_t offset = begin; offset < end; offset += step) {
      const std::size_t count = std::min(step, end - offset);
      // An allreduce overwrites every buffer anyway: the first local one is the working area,
      // so nothing is copied that MPI_Allreduce itself would not copy. A reduce leaves the
      // others as they were: it works in a chunk of its own.
      const std::span<T> sum =
          root ? std::span<T>(chunk_.data(), count) : local_.buffer(0).subspan(offset, count);
      // One local participant's buffer is its own sum: nothing to copy onto itself.
      if (root || local_participants() > 1) local_.sum_into(offset, offset + count, sum);
      std::size_t holder = 0;  // the rank that holds the total after the sum
      if (options_.across == across_ranks::tree) {
        holder = rank_tree_->root();
        sum_up_the_tree(sum);
      } else if (ranks_ > 1) {
        holder = rank_;  // every rank holds it
        // MPI's blocking algorithms are its tuned ones (Open MPI's non-blocking MPI_Iallreduce
        // ran at half their speed here). Every rank has just answered the agreement, so the
        // call is made by all of them; its data movement is MPI's own.
        detail::check(MPI_Allreduce(MPI_IN_PLACE, sum.data(), static_cast<int>(count),
                                    detail::mpi_type<T>(), MPI_SUM, comm_),
                      "MPI_Allreduce");
      }
      const bool everyone_holds = options_.across == across_ranks::allreduce;
      if (everyone_holds || rank_ == holder) {
        if (op == reduction::average)
          crema::detail::scale_into(sum.data(), sum.data(), count, scale);
      }
      if (!root) {
        if (!everyone_holds) broadcast_down_the_tree(sum);
        for (std::size_t i = 1; i < local_participants(); ++i) {
          std::copy(sum.begin(), sum.end(),
                    local_.buffer(i).begin() + static_cast<std::ptrdiff_t>(offset));
        }
        continue;
      }
      if (!everyone_holds && holder != target_rank) {
        const int peer = static_cast<int>(rank_ == holder ? target_rank : holder);
        if (rank_ == holder || rank_ == target_rank) {
          MPI_Request request = MPI_REQUEST_NULL;
          if (rank_ == holder) {
            detail::check(MPI_Isend(sum.data(), static_cast<int>(count * sizeof(T)), MPI_BYTE, peer,
                                    detail::reducer_data_tag, comm_, &request),
                          "MPI_Isend");
            wait({&request, 1}, {&peer, 1}, "delivery");
          } else {
            detail::check(MPI_Irecv(sum.data(), static_cast<int>(count * sizeof(T)), MPI_BYTE, peer,
                                    detail::reducer_data_tag, comm_, &request),
                          "MPI_Irecv");
            receive(request, peer, count * sizeof(T), "delivery");
          }
        }
      }
      if (rank_ == target_rank) {
        std::copy(sum.begin(), sum.end(),
                  local_.buffer(*root % local_participants()).begin() +
                      static_cast<std::ptrdiff_t>(offset));
      }
    }
  }

  // An allreduce over crema's tree of ranks, its chunks in flight at every level at once: on the
  // way up, two receives per child rank are posted ahead and each chunk is sent to the parent
  // without waiting for it; on the way down, every chunk's receive from the parent is posted at
  // once and each chunk goes on to the children as it arrives. The sums are the same as chunk by
  // chunk (each chunk: the local sum, then each child's subtree sum in order). Messages between
  // two ranks keep their order, so the chunks match up without tags of their own. The first local
  // buffer is the working area.
  void allreduce_pipelined(std::size_t begin, std::size_t end, reduction op) {
    const std::size_t chunk = chunk_.size();
    const std::size_t chunks = (end - begin + chunk - 1) / chunk;
    const auto children = rank_tree_->children(rank_);
    const auto parent = rank_tree_->parent(rank_);
    const std::span<T> work = local_.buffer(0);
    const auto region = [&](std::size_t k) {
      const std::size_t offset = begin + k * chunk;
      return work.subspan(offset, std::min(chunk, end - offset));
    };
    const auto bytes_of = [](std::span<T> part) { return static_cast<int>(part.size_bytes()); };
    // Up: receives two chunks ahead from every child, into slots of their own.
    incoming_.resize(std::max<std::size_t>(1, 2 * children.size()) * chunk);
    const auto slot = [&](std::size_t c, std::size_t k) {
      return std::span<T>(incoming_.data() + (2 * c + k % 2) * chunk, region(k).size());
    };
    // Every request of the operation, given up on where it ends early: a receive still posted
    // would otherwise take the next message of a rank that wakes, into memory reused by then.
    std::vector<MPI_Request> receives(2 * children.size(), MPI_REQUEST_NULL);
    std::vector<MPI_Request> sends(chunks, MPI_REQUEST_NULL);
    std::vector<MPI_Request> from_parent(chunks, MPI_REQUEST_NULL);
    std::vector<MPI_Request> down(chunks * children.size(), MPI_REQUEST_NULL);
    const detail::requests_given_up_on_exit outstanding{receives, sends, from_parent, down};
    const auto post_receive = [&](std::size_t c, std::size_t k) {
      const auto into = slot(c, k);
      detail::check(MPI_Irecv(into.data(), bytes_of(into), MPI_BYTE, static_cast<int>(children[c]),
                              detail::reducer_data_tag, comm_, &receives[2 * c + k % 2]),
                    "MPI_Irecv");
    };
    for (std::size_t c = 0; c < children.size(); ++c) {
      for (std::size_t k = 0; k < std::min<std::size_t>(2, chunks); ++k) post_receive(c, k);
    }
    const int parent_rank = parent ? static_cast<int>(*parent) : -1;
    for (std::size_t k = 0; k < chunks; ++k) {
      const auto sum = region(k);
      const std::size_t offset = begin + k * chunk;
      if (local_participants() > 1) local_.sum_into(offset, offset + sum.size(), sum);
      for (std::size_t c = 0; c < children.size(); ++c) {
        const int child = static_cast<int>(children[c]);
        receive(receives[2 * c + k % 2], child, slot(c, k).size_bytes(), "sum");
        crema::detail::add_into(sum.data(), slot(c, k).data(), sum.size());
        if (k + 2 < chunks) post_receive(c, k + 2);
      }
      if (parent) {
        detail::check(MPI_Isend(sum.data(), bytes_of(sum), MPI_BYTE, parent_rank,
                                detail::reducer_data_tag, comm_, &sends[k]),
                      "MPI_Isend");
      }
    }
    if (parent) {
      const std::vector<int> to_parent(chunks, parent_rank);
      wait(sends, to_parent, "sum");
    }
    // Down: the root scales; everyone else receives every chunk from its parent, and all pass
    // each chunk on as it comes.
    if (!parent && op == reduction::average) {
      crema::detail::scale_into(work.data() + begin, work.data() + begin, end - begin,
                                scale_for<T>(op, participants()));
    }
    if (parent) {
      for (std::size_t k = 0; k < chunks; ++k) {
        const auto into = region(k);
        detail::check(MPI_Irecv(into.data(), bytes_of(into), MPI_BYTE, parent_rank,
                                detail::reducer_data_tag, comm_, &from_parent[k]),
                      "MPI_Irecv");
      }
    }
    std::vector<int> down_peers(down.size());
    for (std::size_t k = 0; k < chunks; ++k) {
      if (parent) receive(from_parent[k], parent_rank, region(k).size_bytes(), "result");
      const auto result = region(k);
      for (std::size_t c = 0; c < children.size(); ++c) {
        down_peers[k * children.size() + c] = static_cast<int>(children[c]);
        detail::check(
            MPI_Isend(result.data(), bytes_of(result), MPI_BYTE, static_cast<int>(children[c]),
                      detail::reducer_data_tag, comm_, &down[k * children.size() + c]),
            "MPI_Isend");
      }
    }
    wait(down, down_peers, "result");
    for (std::size_t i = 1; i < local_participants(); ++i) {
      std::copy(work.begin() + static_cast<std::ptrdiff_t>(begin),
                work.begin() + static_cast<std::ptrdiff_t>(end),
                local_.buffer(i).begin() + static_cast<std::ptrdiff_t>(begin));
    }
  }

  // The rank tree's order: this rank's local sum, then each child rank's subtree sum, in order;
  // then up to the parent rank.
  void sum_up_the_tree(std::span<T> sum) {
    const std::size_t count = sum.size();
    const int bytes = static_cast<int>(count * sizeof(T));
    for (const std::size_t child : rank_tree_->children(rank_)) {
      MPI_Request request = MPI_REQUEST_NULL;
      const int peer = static_cast<int>(child);
      detail::check(MPI_Irecv(incoming_.data(), bytes, MPI_BYTE, peer, detail::reducer_data_tag,
                              comm_, &request),
                    "MPI_Irecv");
      receive(request, peer, count * sizeof(T), "sum");
      crema::detail::add_into(sum.data(), incoming_.data(), count);
    }
    if (const auto parent = rank_tree_->parent(rank_)) {
      MPI_Request request = MPI_REQUEST_NULL;
      const int peer = static_cast<int>(*parent);
      detail::check(
          MPI_Isend(sum.data(), bytes, MPI_BYTE, peer, detail::reducer_data_tag, comm_, &request),
          "MPI_Isend");
      wait({&request, 1}, {&peer, 1}, "sum");
    }
  }

  // From the tree's root down: every rank receives the total from its parent, passes it on.
  void broadcast_down_the_tree(std::span<T> sum) {
    const int bytes = static_cast<int>(sum.size() * sizeof(T));
    if (const auto parent = rank_tree_->parent(rank_)) {
      MPI_Request request = MPI_REQUEST_NULL;
      const int peer = static_cast<int>(*parent);
      detail::check(
          MPI_Irecv(sum.data(), bytes, MPI_BYTE, peer, detail::reducer_data_tag, comm_, &request),
          "MPI_Irecv");
      receive(request, peer, sum.size_bytes(), "result");
    }
    const auto children = rank_tree_->children(rank_);
    std::vector<MPI_Request> sends(children.size(), MPI_REQUEST_NULL);
    std::vector<int> peers(children.size());
    for (std::size_t c = 0; c < children.size(); ++c) {
      peers[c] = static_cast<int>(children[c]);
      detail::check(MPI_Isend(sum.data(), bytes, MPI_BYTE, peers[c], detail::reducer_data_tag,
                              comm_, &sends[c]),
                    "MPI_Isend");
    }
    wait(sends, peers, "result");
  }

  device_tree_reducer<T> local_;
  tree_topology local_tree_;
  reducer_options options_;
  detail::reducer_link link_;
  MPI_Comm comm_;  // the link's
  std::size_t rank_;
  std::size_t ranks_;
  std::unique_ptr<tree_topology> rank_tree_;
  std::vector<T> chunk_;     // the sum of one chunk
  std::vector<T> incoming_;  // a child rank's sum of it
  std::mutex mutex_;
};

static_assert(tree_collective<mpi_reducer<float>>);
static_assert(ranges_in_order_v<mpi_reducer<float>>);

}  // namespace crema::mpi
