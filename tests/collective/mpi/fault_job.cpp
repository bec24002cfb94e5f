// One MPI job in which one rank fails while the others work with it: the program that
// killed_rank.sh runs, once per operation and way of failing.
//
//   crema-mpi-fault-job OPERATION VICTIM HOW
//     OPERATION  broadcast | reduce | allreduce | p2p_sync  (an mpi_reducer, timeout 1 s)
//                ps_push | ps_pull                          (a parameter-server client fails)
//                ps_server                                  (the server fails)
//     VICTIM     the rank that fails
//     HOW        kill    SIGKILL, in the middle of the operation (a timer of its own)
//                stop    SIGSTOP likewise: alive, silent; killed_rank.sh resumes it later
//
// Every other rank prints one line when it ends as it should: an error naming the victim within
// the timeout ("rank R: named rank V: ..."), or, for the parameter server's survivors, the run
// finished without the victim ("rank R: finished ..."). Anything else, a sum delivered that is
// wrong or an error naming another rank, prints "rank R: WRONG: ...". Then it waits to be ended.
#include <crema/collective/mpi/mpi_reducer.hpp>
#include <crema/collective/p2p_sync.hpp>
#include <crema/collective/ps/mpi/parameter_server.hpp>

#include <fmt/core.h>
#include <mpi.h>

#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

int rank = 0;
int ranks = 1;

// Prints this rank's outcome and waits to be ended by killed_rank.sh: MPI_Finalize would wait
// for the victim, and a rank that exits without it makes mpirun end the others, maybe before
// they have printed theirs.
[[noreturn]] void finish(const std::string& line) {
  std::printf("rank %d: %s\n", rank, line.c_str());
  std::fflush(stdout);
  for (;;) ::pause();
}

// The victim fails `after` from now, from a thread of its own, whatever its main thread is in.
void fail_after(std::chrono::milliseconds after, std::string_view how) {
  const int signal = how == "kill" ? SIGKILL : SIGSTOP;
  std::printf("rank %d: pid %d fails by %s\n", rank, static_cast<int>(::getpid()),
              std::string(how).c_str());
  std::fflush(stdout);
  std::thread([after, signal] {
    std::this_thread::sleep_for(after);
    std::raise(signal);
  }).detach();
}

// The survivor's verdict on an error: it must name the victim as the rank at fault, in one of
// the forms crema's messages take, not merely mention it.
[[noreturn]] void judge(const std::exception& e, int victim) {
  const std::string message = e.what();
  const std::vector<std::string> blames{
      fmt::format("ms for rank {} in the", victim),           // waited for it
      fmt::format("rank {}, which does not answer", victim),  // found along the waits
      fmt::format("and rank {} does not answer", victim),     // found among the others
      fmt::format("rank {} did not answer", victim),          // rank 0's verdict
      fmt::format("gave up on rank {} ", victim),             // another rank's notice
      fmt::format("with rank {}: ", victim),                  // MPI's own error with it
      fmt::format("sent rank {} ", rank),                     // sent this rank nonsense
      victim == 0 ? "did not hear from rank 0" : "-",
      victim == 0 ? "the server, rank 0" : "-",
  };
  bool named = false;
  for (const auto& blame : blames) named = named || message.find(blame) != std::string::npos;
  finish(fmt::format("{}: {}", named ? fmt::format("named rank {}", victim) : "WRONG", message));
}

crema::tree_topology tree_of(std::size_t count) {
  std::vector<int> ids(count);
  std::iota(ids.begin(), ids.end(), 0);
  return crema::tree_topology::build(ids, [](int, int) { return true; });
}

// Reducer operations on 2^22 floats in chunks of 2^12, over and over for up to 20 s, each
// checked; the victim fails 300 ms in.
[[noreturn]] void reducer_job(std::string_view operation, int victim, std::string_view how) {
  constexpr std::size_t elements = std::size_t{1} << 22;
  std::vector<std::vector<float>> buffers(1, std::vector<float>(elements));
  crema::mpi::mpi_reducer<float> reducer(MPI_COMM_WORLD, tree_of(1), {buffers[0]},
                                         {.timeout = 1s, .chunk_elements = 4096});
  std::vector<std::vector<float>> gradients(1, std::vector<float>(elements));
  crema::mpi::mpi_reducer<float> gradient_reducer(MPI_COMM_WORLD, tree_of(1), {gradients[0]},
                                                  {.timeout = 1s, .chunk_elements = 4096});
  if (rank == victim) fail_after(300ms, how);
  const float mine = static_cast<float>(rank + 1);
  const float total = static_cast<float>(ranks * (ranks + 1) / 2);
  const float mean = total / static_cast<float>(ranks);  // p2p_sync averages the gradients
  const auto started = std::chrono::steady_clock::now();
  try {
    if (operation == "p2p_sync") {
      crema::p2p_sync<crema::mpi::mpi_reducer<float>> sync(
          // p2p_sync's own timeout (its participants on this rank) longer than the reducers'
          // (the ranks), so that the reducers' errors, which name the rank, come first.
          reducer, gradient_reducer, 0,
          {.bucket_sizes = {elements / 2, elements / 2}, .timeout = 10s});
      const std::size_t me = reducer.global(0);
      for (int step = 0; std::chrono::steady_clock::now() - started < 20s; ++step) {
        sync.on_start(me);
        std::fill(gradients[0].begin(), gradients[0].end(), mine);
        sync.on_gradients_ready(me);
        if (rank == 0 && gradients[0].front() != mean) {
          finish(fmt::format("WRONG: step {} averaged {} where {} was due", step,
                             gradients[0].front(), mean));
        }
      }
    } else {
      for (int step = 0; std::chrono::steady_clock::now() - started < 20s; ++step) {
        std::fill(buffers[0].begin(), buffers[0].end(), mine);
        if (operation == "broadcast") {
          reducer.broadcast(0);
          if (buffers[0].back() != 1.0f) finish("WRONG: broadcast delivered another value");
        } else if (operation == "reduce") {
          reducer.reduce(0);
          if (rank == 0 && buffers[0].back() != total) finish("WRONG: reduce summed wrong");
        } else {
          reducer.allreduce();
          if (buffers[0].back() != total) finish("WRONG: allreduce summed wrong");
        }
      }
    }
  } catch (const std::exception& e) {
    if (std::chrono::steady_clock::now() - started > 300ms + 5s) {
      finish(fmt::format("WRONG: named only after {} ms: {}",
                         std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - started)
                             .count(),
                         e.what()));
    }
    judge(e, victim);
  }
  finish("WRONG: 20 s of operations and no error, with the victim gone");
}

// A parameter server (rank 0) and its clients; the victim fails 300 ms into the run.
[[noreturn]] void ps_job(std::string_view operation, int victim, std::string_view how) {
  crema::mpi::ps_options options;
  options.wait = 100ms;
  options.lost_after = 1s;
  options.timeout = 2s;
  std::vector<float> w(4096, 0.0f);
  const auto started = std::chrono::steady_clock::now();
  if (rank == 0) {
    crema::mpi::parameter_server<float> server(MPI_COMM_WORLD, w, {}, options);
    if (rank == victim) fail_after(300ms, how);
    try {
      const auto& stats = server.serve(3000);
      std::uint64_t lost = 0;
      for (const auto& client : stats.clients) lost += client.lost ? 1 : 0;
      finish(fmt::format("{}finished 3000 iterations, {} client lost",
                         lost == 1 ? "" : "WRONG: ", lost));
    } catch (const std::exception& e) {
      finish(fmt::format("WRONG: the server failed: {}", e.what()));
    }
  }
  crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
  if (rank == victim) {
    // Killed between its pull and its push, or while it waits in a pull.
    fail_after(operation == "ps_pull" ? 300ms : 320ms, how);
  }
  std::vector<float> gradient(w.size(), 0.0f);
  try {
    std::uint64_t answered = 0;
    for (auto iteration = client.pull(); iteration; iteration = client.exchange(gradient)) {
      std::fill(gradient.begin(), gradient.end(), 1e-3f);
      std::this_thread::sleep_for(2ms);
      ++answered;
    }
    if (victim == 0) finish("WRONG: the run ended with the server gone");
    finish(fmt::format("finished, {} iterations answered", answered));
  } catch (const std::exception& e) {
    if (victim != 0) finish(fmt::format("WRONG: a client failed: {}", e.what()));
    if (std::chrono::steady_clock::now() - started > 300ms + 3 * options.timeout) {
      finish(fmt::format("WRONG: named only late: {}", e.what()));
    }
    judge(e, 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc != 4) {
    std::fprintf(stderr, "usage: crema-mpi-fault-job OPERATION VICTIM kill|stop\n");
    return 2;
  }
  const std::string_view operation = argv[1];
  const int victim = std::atoi(argv[2]);
  const std::string_view how = argv[3];
  if (operation.starts_with("ps_")) ps_job(operation, victim, how);
  reducer_job(operation, victim, how);
}
