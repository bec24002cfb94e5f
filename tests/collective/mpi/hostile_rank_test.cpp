// A rank that speaks the MPI reducer's wire wrongly (run by CTest with 2 and 4 ranks): it takes
// part in the reducer's communicator as the others' duplicate of MPI_COMM_WORLD (the same
// collective call, so the same context), then sends what it likes where the reducers expect
// views, verdicts and data. Whatever it sends, every other rank raises mpi_error, the rank that
// received the message naming the sender, within the timeout: never an overflow, a sum with its
// bytes in it, or a hang.
#include <crema/collective/mpi/detail/reducer_wire.hpp>
#include <crema/collective/mpi/mpi_reducer.hpp>

#include "collective/mpi/mpi_world.hpp"
#include "collective/reference.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace wire = crema::mpi::detail;
using world = crema::test::mpi_world;

constexpr std::size_t elements = 100;
constexpr auto timeout = 500ms;

crema::tree_topology tree_of(std::size_t count) {
  std::vector<int> ids(count);
  std::iota(ids.begin(), ids.end(), 0);
  return crema::tree_topology::build(ids, [](int, int) { return true; });
}

// The hostile rank's end of the reducers' communicator.
class hostile {
 public:
  explicit hostile(MPI_Comm parent = MPI_COMM_WORLD) {
    MPI_Comm_dup(parent, &comm_);  // matches the reducers' own MPI_Comm_dup
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
  }
  hostile(const hostile&) = delete;
  hostile& operator=(const hostile&) = delete;
  ~hostile() { MPI_Comm_free(&comm_); }

  // The view an honest rank of one participant with `count` floats sends at `step`.
  static wire::reducer_view honest(wire::reducer_operation op, std::uint64_t step,
                                   std::size_t count = elements) {
    return {static_cast<std::uint64_t>(op), 0, count, 0, step, count, 1, sizeof(float)};
  }

  // Sends `bytes` to `rank` with `tag` and waits (boundedly) until it has gone.
  void send(const void* bytes, std::size_t size, int rank, int tag) {
    MPI_Request request = MPI_REQUEST_NULL;
    start_send(bytes, size, rank, tag, request);
    finish(request);
  }
  // Starts that send and returns.
  void start_send(const void* bytes, std::size_t size, int rank, int tag, MPI_Request& request) {
    MPI_Isend(bytes, static_cast<int>(size), MPI_BYTE, rank, tag, comm_, &request);
  }
  // Receives rank 0's verdict, whatever its size; empty if none came within two timeouts.
  std::vector<std::byte> hear_verdict() {
    std::vector<std::byte> bytes(4 * sizeof(wire::reducer_verdict));
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Irecv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, wire::reducer_verdict_tag,
              comm_, &request);
    MPI_Status status{};
    if (!finish(request, &status)) return {};
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    bytes.resize(static_cast<std::size_t>(count));
    return bytes;
  }
  // Goes through an agreement as an honest rank would.
  void agree(const wire::reducer_view& view) {
    send(&view, sizeof view, 0, wire::reducer_view_tag);
    const auto verdict = wire::decode_verdict(hear_verdict(), ranks());
    REQUIRE(std::holds_alternative<wire::reducer_verdict>(verdict));
    REQUIRE(std::get<wire::reducer_verdict>(verdict).kind == wire::verdict_kind::agreed);
  }
  // Rank 0's side of an agreement with honest ranks: takes their views, whatever they say.
  void take_views() {
    for (int r = 1; r < ranks(); ++r) {
      std::vector<std::byte> bytes(sizeof(wire::reducer_view));
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_Irecv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, r, wire::reducer_view_tag,
                comm_, &request);
      REQUIRE(finish(request));
    }
  }

  int ranks() const {
    int count = 1;
    MPI_Comm_size(comm_, &count);
    return count;
  }

 private:
  // Waits up to two timeouts for `request`; cancels it if it did not complete.
  bool finish(MPI_Request& request, MPI_Status* status = MPI_STATUS_IGNORE) {
    const auto deadline = std::chrono::steady_clock::now() + 2 * timeout + 500ms;
    while (std::chrono::steady_clock::now() < deadline) {
      int done = 0;
      MPI_Test(&request, &done, status);
      if (done) return true;
      std::this_thread::sleep_for(100us);
    }
    MPI_Cancel(&request);
    MPI_Request_free(&request);
    return false;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
};

// Runs `honest_work` on every rank but `hostile_rank`, which runs `attack` (its communicator a
// duplicate of `parent`, as the reducers'); checks that every honest rank raised an mpi_error,
// soon, and returns its message ("" on the hostile rank).
template <class Honest, class Attack>
std::string run_against(int hostile_rank, Honest honest_work, Attack attack,
                        MPI_Comm parent = MPI_COMM_WORLD) {
  const world job;
  std::string message;
  if (job.rank == hostile_rank) {
    hostile rank(parent);
    attack(rank);
  } else {
    std::vector<std::vector<float>> buffers(1, std::vector<float>(elements, 1.0f));
    const auto started = std::chrono::steady_clock::now();
    try {
      honest_work(buffers);
      FAIL("expected an mpi_error on rank " << job.rank);
    } catch (const crema::mpi_error& e) {
      message = e.what();
    }
    CHECK(std::chrono::steady_clock::now() - started < 4 * timeout + 1s);  // no hang
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return message;
}

std::unique_ptr<crema::mpi::mpi_reducer<float>> make_reducer(
    std::vector<std::vector<float>>& buffers,
    std::size_t chunk_elements = crema::mpi::reducer_options{}.chunk_elements) {
  return std::make_unique<crema::mpi::mpi_reducer<float>>(
      MPI_COMM_WORLD, tree_of(1), crema::test::spans_of(buffers),
      crema::mpi::reducer_options{.timeout = timeout, .chunk_elements = chunk_elements});
}

// An honest rank's allreduce of `count` ones in chunks of `chunk`, which must fail (its peer is
// silent); its reducer is freed. Returns the buffer, which must keep its ones.
std::vector<std::vector<float>> fail_an_allreduce(std::size_t count, std::size_t chunk) {
  std::vector<std::vector<float>> buffers(1, std::vector<float>(count, 1.0f));
  const auto reducer = make_reducer(buffers, chunk);
  CHECK_THROWS_AS(reducer->allreduce(), crema::mpi_error);
  return buffers;
}

}  // namespace

TEST_SUITE("mpi_reducer, hostile ranks") {
  TEST_CASE("a view that is not one makes every rank refuse it, naming its sender") {
    const world job;
    if (job.ranks < 2) return;
    const int sender = job.ranks - 1;
    for (const std::size_t size : {std::size_t{5}, sizeof(wire::reducer_view) + 8}) {
      CAPTURE(size);
      const auto message = run_against(
          sender, [](auto& buffers) { (void)make_reducer(buffers); },
          [&](hostile& rank) {
            const std::vector<std::byte> junk(size, std::byte{0x5a});
            rank.send(junk.data(), junk.size(), 0, wire::reducer_view_tag);
            // Rank 0 tells the sender too: that its message was refused, naming it.
            const auto verdict = wire::decode_verdict(rank.hear_verdict(), rank.ranks());
            REQUIRE(std::holds_alternative<wire::reducer_verdict>(verdict));
            CHECK(std::get<wire::reducer_verdict>(verdict).kind == wire::verdict_kind::malformed);
            CHECK(std::get<wire::reducer_verdict>(verdict).rank ==
                  static_cast<std::uint64_t>(sender));
          });
      if (job.rank != sender) {
        CAPTURE(message);
        CHECK(message.find(fmt::format("rank {} sent rank 0 ", sender)) != std::string::npos);
        CHECK(message.find("refused") != std::string::npos);
      }
    }
  }

  TEST_CASE("a verdict that is not one makes every rank refuse it, naming rank 0") {
    const world job;
    if (job.ranks < 2) return;
    struct forged {
      std::string what;
      std::vector<std::byte> bytes;
    };
    std::vector<forged> forgeries;
    wire::reducer_verdict unknown_kind{};
    unknown_kind.kind = static_cast<wire::verdict_kind>(9);
    wire::reducer_verdict rank_outside{};
    rank_outside.kind = wire::verdict_kind::disagrees;
    rank_outside.rank = 1000;
    for (const auto& verdict : {unknown_kind, rank_outside}) {
      const auto* first = reinterpret_cast<const std::byte*>(&verdict);
      forgeries.push_back({"", {first, first + sizeof verdict}});
    }
    forgeries[0].what = "a verdict of unknown kind 9";
    forgeries[1].what = "a verdict naming rank 1000";
    forgeries.push_back({"10 bytes where", std::vector<std::byte>(10)});
    for (const auto& forgery : forgeries) {
      CAPTURE(forgery.what);
      const auto message = run_against(
          0, [](auto& buffers) { (void)make_reducer(buffers); },
          [&](hostile& rank) {
            rank.take_views();
            for (int r = 1; r < rank.ranks(); ++r) {
              rank.send(forgery.bytes.data(), forgery.bytes.size(), r, wire::reducer_verdict_tag);
            }
          });
      if (job.rank != 0) {
        CAPTURE(message);
        CHECK(message.find(fmt::format("rank 0 sent rank {} {}", job.rank, forgery.what)) !=
              std::string::npos);
      }
    }
  }

  TEST_CASE(
      "data of the wrong size is refused by the rank it reaches, naming the sender, and "
      "nobody hangs") {
    const world job;
    if (job.ranks < 2) return;
    const int sender = job.ranks - 1;
    const auto parent =
        tree_of(static_cast<std::size_t>(job.ranks)).parent(static_cast<std::size_t>(sender));
    REQUIRE(parent);
    for (const std::size_t size :
         {elements * sizeof(float) - 4, elements * sizeof(float) + 64, std::size_t{0}}) {
      CAPTURE(size);
      const auto message = run_against(
          sender,
          [](auto& buffers) {
            auto reducer = make_reducer(buffers);
            reducer->allreduce();
          },
          [&](hostile& rank) {
            rank.agree(hostile::honest(wire::reducer_operation::construct, 0));
            rank.agree(hostile::honest(wire::reducer_operation::allreduce, 1));
            const std::vector<std::byte> data(size, std::byte{0x7f});
            rank.send(data.data(), data.size(), static_cast<int>(*parent), wire::reducer_data_tag);
          });
      if (job.rank == static_cast<int>(*parent)) {
        CAPTURE(message);
        CHECK(message.find(fmt::format("rank {} sent rank {} ", sender, *parent)) !=
              std::string::npos);
        CHECK(message.find("in the sum of step 1; refused") != std::string::npos);
      }
    }
  }

  TEST_CASE("a rank silent at construction leaves the others' communicators with MPI") {
    // The hostile rank makes its duplicate, as a reducer would, and sends no view: the others'
    // constructors give up on it, and, no destructor run, must still keep their communicator,
    // where its view could come late.
    const world job;
    if (job.ranks < 2) return;
    const crema::test::traced_comm comm;
    const int silent = job.ranks - 1;
    (void)run_against(
        silent,
        [&](auto& buffers) {
          (void)crema::mpi::mpi_reducer<float>(
              comm.get(), tree_of(1), crema::test::spans_of(buffers), {.timeout = timeout});
        },
        [&](hostile&) {}, comm.get());
    if (job.rank != silent) {
      CHECK(comm.duplicates() == 1);
      CHECK(comm.duplicates_freed() == 0);
    }
  }

  TEST_CASE("a failed allreduce leaves no receive posted into the buffers or the next reducer") {
    // Rank 0 agrees, then is silent on the way down: rank 1 gives up on it with its receives of
    // every chunk posted. Awake, rank 0 sends the chunks, which would land in rank 1's buffer.
    // They stay on the spent reducer's communicator, which rank 1 keeps: freed, MPI would give
    // its id to the next communicator of the two ranks, and the chunks to that one's reducer. The
    // mpi.reducer_woken_parent test runs this case alone in its job.
    const world job;
    if (job.ranks != 2 || std::getenv("CREMA_TEST_ALONE") == nullptr) return;
    constexpr std::size_t count = 300;
    constexpr std::size_t chunk = 100;
    if (job.rank == 0) {
      hostile rank;
      for (const auto& [op, step] : {std::pair{wire::reducer_operation::construct, 0U},
                                     std::pair{wire::reducer_operation::allreduce, 1U}}) {
        rank.take_views();
        const wire::reducer_verdict agreed{.zero = hostile::honest(op, step, count)};
        rank.send(&agreed, sizeof agreed, 1, wire::reducer_verdict_tag);
      }
      MPI_Barrier(MPI_COMM_WORLD);  // silent until rank 1 has given up
      const std::vector<float> result(chunk, 7.0f);
      for (std::size_t k = 0; k < count / chunk; ++k) {
        rank.send(result.data(), sizeof(float) * chunk, 1, wire::reducer_data_tag);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    } else {
      const auto buffers = fail_an_allreduce(count, chunk);
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      // The chunks went out before the barrier, on another communicator: let them arrive.
      const auto until = std::chrono::steady_clock::now() + 300ms;
      while (std::chrono::steady_clock::now() < until) {
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      }
      CHECK(buffers[0] == std::vector<float>(count, 1.0f));
    }
    // The next reducer of the two ranks sums what they hold, the chunks of the spent one aside.
    std::vector<std::vector<float>> next(1, std::vector<float>(count, job.rank == 0 ? 1.0f : 2.0f));
    make_reducer(next, chunk)->allreduce();
    CHECK(next[0] == std::vector<float>(count, 3.0f));
  }

  TEST_CASE("a chunk a rank stopped sending half-way lands in memory its receiver kept") {
    // Over TCP, a message past the eager size goes out in pieces only while its sender is inside
    // MPI. Rank 1 starts its first chunk and sleeps: rank 0 gives up on the chunk under way (MPI
    // cannot cancel it) and frees its reducer. Awake, rank 1 sends the rest, which MPI writes
    // where rank 0's reducer received the chunk. The mpi.reducer_woken_child test runs this case
    // alone, over TCP.
    const world job;
    if (job.ranks != 2 || std::getenv("CREMA_TEST_ALONE") == nullptr) return;
    constexpr std::size_t chunk = std::size_t{1} << 16;  // 256 KiB: mapped, and unmapped when freed
    constexpr std::size_t count = 2 * chunk;
    if (job.rank == 1) {
      hostile rank;
      rank.agree(hostile::honest(wire::reducer_operation::construct, 0, count));
      rank.agree(hostile::honest(wire::reducer_operation::allreduce, 1, count));
      const std::vector<float> sum(chunk, 7.0f);
      MPI_Request request = MPI_REQUEST_NULL;
      rank.start_send(sum.data(), sizeof(float) * chunk, 0, wire::reducer_data_tag, request);
      std::this_thread::sleep_for(1500ms);    // outside MPI: the rest of the chunk waits
      MPI_Wait(&request, MPI_STATUS_IGNORE);  // goes out now, rank 0 in the barrier
      MPI_Barrier(MPI_COMM_WORLD);
    } else {
      const auto buffers = fail_an_allreduce(count, chunk);
      MPI_Barrier(MPI_COMM_WORLD);
      CHECK(buffers[0] == std::vector<float>(count, 1.0f));
    }
  }
}
