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
//   crema-mpi-fault-job train STEPS CHECKPOINT [KILL_AT]
//     Data-parallel SGD with a pipeline per rank over its shard, checkpointed every 5 steps into
//     CHECKPOINT (rank 0 writes the parameters and every rank's pipeline position, beside, then
//     renamed); started from CHECKPOINT when it exists. With KILL_AT, the last rank kills itself
//     at that step. Rank 0 prints "resumed at step S" and, at the end, "final HASH" of the
//     parameters' bytes: restart.sh compares a killed and resumed run with one never stopped.
//
// Every other rank prints one line: an error naming the victim ("rank R: named rank V: ..."), an
// error naming another rank ("rank R: named another rank: ..."), or, for the parameter server's
// survivors, the run finished without the victim ("rank R: finished ..."); a sum delivered that
// is wrong, an error that came late, a server that gave up, prints "rank R: WRONG: ...". A client
// that gives up on the server when a client was killed prints "rank R: blamed the server: ...":
// right only if the server is wedged inside MPI. Then it waits to be ended.
//
// A rank held inside one MPI call for 5 s prints "rank R: stuck inside MPI_X ..." (Open MPI's TCP
// transport can spin forever in one MPI_Test on a dead peer's connection): the MPI calls crema
// makes go through wrappers here (MPI's profiling interface) that note when each began.
// killed_rank.sh judges.
#include <crema/collective/mpi/mpi_reducer.hpp>
#include <crema/collective/p2p_sync.hpp>
#include <crema/collective/ps/mpi/parameter_server.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/vector_source.hpp>

#include <fmt/core.h>
#include <mpi.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

int rank = 0;
int ranks = 1;

// The MPI call this rank is inside, and since when (steady-clock nanoseconds; 0: none).
std::atomic<std::int64_t> call_began{0};
std::atomic<const char*> call_name{""};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Notes one MPI call for the watch.
class in_mpi {
 public:
  explicit in_mpi(const char* name) {
    call_name.store(name);
    call_began.store(steady_ns());
  }
  in_mpi(const in_mpi&) = delete;
  in_mpi& operator=(const in_mpi&) = delete;
  ~in_mpi() { call_began.store(0); }
};

// Says once when one MPI call has held this rank for 5 s.
void watch_mpi_calls() {
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(100ms);
      const std::int64_t began = call_began.load();
      if (began != 0 && steady_ns() - began > std::int64_t{5'000'000'000}) {
        std::printf("rank %d: stuck inside %s for 5 s (Open MPI wedged it)\n", rank,
                    call_name.load());
        std::fflush(stdout);
        return;
      }
    }
  }).detach();
}

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
  finish(fmt::format("{}: {}", named ? fmt::format("named rank {}", victim) : "named another rank",
                     message));
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
  options.timeout = 4s;       // well past lost_after: a loaded machine (CI's) is slow to answer
  options.max_staleness = 2;  // the bound the server keeps, the dead client or not
  std::vector<float> w(4096, 0.0f);
  const auto started = std::chrono::steady_clock::now();
  if (rank == 0) {
    crema::mpi::parameter_server<float> server(MPI_COMM_WORLD, w, {}, options);
    if (rank == victim) fail_after(300ms, how);
    try {
      const auto& stats = server.serve(1000);
      std::uint64_t lost = 0;
      std::uint64_t stalest = 0;
      for (const auto& client : stats.clients) {
        lost += client.lost ? 1 : 0;
        stalest = std::max(stalest, client.max_applied_staleness);
      }
      const bool right = lost == 1 && stalest <= options.max_staleness;
      finish(
          fmt::format("{}finished 1000 iterations, {} client lost, the stalest diff applied {} "
                      "versions behind (bound {})",
                      right ? "" : "WRONG: ", lost, stalest, options.max_staleness));
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
    if (victim != 0) {
      const bool server_silent =
          std::string_view(e.what()).find("the server, rank 0") != std::string_view::npos;
      // A client killed may wedge the server inside MPI, as any rank that was sending to it.
      if (how == "kill" && server_silent) finish(fmt::format("blamed the server: {}", e.what()));
      finish(fmt::format("WRONG: a client failed: {}", e.what()));
    }
    if (std::chrono::steady_clock::now() - started > 300ms + 3 * options.timeout) {
      finish(fmt::format("WRONG: named only late: {}", e.what()));
    }
    judge(e, 0);
  }
}

// What a checkpoint holds: the step it was taken after, the parameters, and every rank's pipeline
// position (the batches its consumer took, not those read ahead).
struct checkpoint {
  std::uint64_t step = 0;
  std::vector<float> parameters;
  std::vector<crema::pipeline_position> positions;
};

void save(const std::filesystem::path& path, const checkpoint& state) {
  const auto beside = std::filesystem::path(path.string() + ".partial");
  {
    std::ofstream out(beside, std::ios::binary | std::ios::trunc);
    const std::uint64_t counts[2] = {state.parameters.size(), state.positions.size()};
    out.write(reinterpret_cast<const char*>(&state.step), sizeof state.step);
    out.write(reinterpret_cast<const char*>(counts), sizeof counts);
    out.write(reinterpret_cast<const char*>(state.parameters.data()),
              static_cast<std::streamsize>(state.parameters.size() * sizeof(float)));
    out.write(
        reinterpret_cast<const char*>(state.positions.data()),
        static_cast<std::streamsize>(state.positions.size() * sizeof(crema::pipeline_position)));
    if (!out.flush()) throw std::runtime_error("cannot write " + beside.string());
  }
  std::filesystem::rename(beside, path);  // a crash leaves the last whole checkpoint
}

std::optional<checkpoint> load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  checkpoint state;
  std::uint64_t counts[2] = {};
  in.read(reinterpret_cast<char*>(&state.step), sizeof state.step);
  in.read(reinterpret_cast<char*>(counts), sizeof counts);
  state.parameters.resize(counts[0]);
  state.positions.resize(counts[1]);
  in.read(reinterpret_cast<char*>(state.parameters.data()),
          static_cast<std::streamsize>(counts[0] * sizeof(float)));
  in.read(reinterpret_cast<char*>(state.positions.data()),
          static_cast<std::streamsize>(counts[1] * sizeof(crema::pipeline_position)));
  if (!in) throw std::runtime_error("a checkpoint cut short: " + path.string());
  return state;
}

// SGD on 1/2 |w - x|^2 averaged over each batch of records x (an augmented number per weight),
// the gradients averaged across ranks by an mpi_reducer.
[[noreturn]] void train_job(std::uint64_t steps, const std::filesystem::path& file,
                            std::optional<std::uint64_t> kill_at) {
  constexpr std::size_t weights = 16;
  constexpr std::size_t batch = 8;
  std::vector<int> records(4000);
  std::iota(records.begin(), records.end(), 0);
  const auto resumed = load(file);
  if (resumed && (resumed->positions.size() != static_cast<std::size_t>(ranks) ||
                  resumed->parameters.size() != weights)) {
    std::fprintf(stderr, "rank %d: %s is a checkpoint of another job\n", rank, file.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::vector<float> w = resumed ? resumed->parameters : std::vector<float>(weights, 0.0f);
  std::vector<std::vector<float>> gradient(1, std::vector<float>(weights));
  crema::mpi::mpi_reducer<float> reducer(MPI_COMM_WORLD, tree_of(1), {gradient[0]},
                                         {.timeout = 2s});
  crema::vector_source<int> source(records, "train");
  source.shard(static_cast<std::size_t>(rank), static_cast<std::size_t>(ranks));
  source.shuffle(5);
  const auto augment = [](const int& record, const crema::sample_context& context) {
    return static_cast<float>(record % 97) + static_cast<float>(context.rng().below(1000)) * 1e-3f;
  };
  crema::pipeline_options options{
      .batch_size = batch, .producers = 2, .threads = 2, .ordered = true, .seed = 9};
  if (resumed) options.resume_from = resumed->positions[static_cast<std::size_t>(rank)];
  crema::double_buffered_pipeline pipe{std::move(source), augment, options};
  auto consumer = pipe.consumer();
  const std::uint64_t first = resumed ? resumed->step : 0;
  if (rank == 0 && resumed) {
    std::printf("resumed at step %llu\n", static_cast<unsigned long long>(first));
  }
  for (std::uint64_t step = first; step < steps; ++step) {
    if (kill_at && step == *kill_at && rank == ranks - 1) std::raise(SIGKILL);
    {
      const auto taken = consumer.pull();
      for (std::size_t j = 0; j < weights; ++j) {
        float sum = 0;
        for (const float x : taken->items()) sum += w[j] - x * static_cast<float>(j + 1) * 0.01f;
        gradient[0][j] = sum / static_cast<float>(taken->items().size());
      }
    }
    reducer.allreduce(crema::reduction::average);
    for (std::size_t j = 0; j < weights; ++j) w[j] -= 0.1f * gradient[0][j];
    if ((step + 1) % 5 == 0) {
      const auto at = pipe.position();  // between steps: no pull in flight
      std::vector<crema::pipeline_position> positions(static_cast<std::size_t>(ranks));
      MPI_Gather(&at, sizeof at, MPI_BYTE, positions.data(), sizeof at, MPI_BYTE, 0,
                 MPI_COMM_WORLD);
      if (rank == 0) save(file, {step + 1, w, positions});
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  if (rank == 0) {
    std::uint64_t hash = 1469598103934665603ULL;
    const auto* bytes = reinterpret_cast<const unsigned char*>(w.data());
    for (std::size_t i = 0; i < w.size() * sizeof(float); ++i)
      hash = (hash ^ bytes[i]) * 1099511628211ULL;
    std::printf("final %016llx\n", static_cast<unsigned long long>(hash));
    std::fflush(stdout);
  }
  pipe.stop();
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  std::exit(0);
}

}  // namespace

// MPI's profiling interface: each wrapper calls its PMPI_ twin, watched.
extern "C" {
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  const in_mpi call("MPI_Test");
  return PMPI_Test(request, flag, status);
}
int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  const in_mpi call("MPI_Testall");
  return PMPI_Testall(count, requests, flag, statuses);
}
int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                MPI_Status* status) {
  const in_mpi call("MPI_Improbe");
  return PMPI_Improbe(source, tag, comm, flag, message, status);
}
int MPI_Isend(const void* buffer, int count, MPI_Datatype type, int destination, int tag,
              MPI_Comm comm, MPI_Request* request) {
  const in_mpi call("MPI_Isend");
  return PMPI_Isend(buffer, count, type, destination, tag, comm, request);
}
int MPI_Irecv(void* buffer, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  const in_mpi call("MPI_Irecv");
  return PMPI_Irecv(buffer, count, type, source, tag, comm, request);
}
int MPI_Imrecv(void* buffer, int count, MPI_Datatype type, MPI_Message* message,
               MPI_Request* request) {
  const in_mpi call("MPI_Imrecv");
  return PMPI_Imrecv(buffer, count, type, message, request);
}
int MPI_Mrecv(void* buffer, int count, MPI_Datatype type, MPI_Message* message,
              MPI_Status* status) {
  const in_mpi call("MPI_Mrecv");
  return PMPI_Mrecv(buffer, count, type, message, status);
}
int MPI_Cancel(MPI_Request* request) {
  const in_mpi call("MPI_Cancel");
  return PMPI_Cancel(request);
}
int MPI_Request_free(MPI_Request* request) {
  const in_mpi call("MPI_Request_free");
  return PMPI_Request_free(request);
}
int MPI_Ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request* request) {
  const in_mpi call("MPI_Ibcast");
  return PMPI_Ibcast(buffer, count, type, root, comm, request);
}
int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  const in_mpi call("MPI_Bcast");
  return PMPI_Bcast(buffer, count, type, root, comm);
}
int MPI_Allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  const in_mpi call("MPI_Allreduce");
  return PMPI_Allreduce(in, out, count, type, op, comm);
}
int MPI_Comm_free(MPI_Comm* comm) {
  const in_mpi call("MPI_Comm_free");
  return PMPI_Comm_free(comm);
}
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc >= 4 && std::string_view(argv[1]) == "train") {
    train_job(std::strtoull(argv[2], nullptr, 10), argv[3],
              argc > 4 ? std::optional(std::strtoull(argv[4], nullptr, 10)) : std::nullopt);
  }
  if (argc != 4) {
    std::fprintf(stderr, "usage: crema-mpi-fault-job OPERATION VICTIM kill|stop\n");
    return 2;
  }
  const std::string_view operation = argv[1];
  const int victim = std::atoi(argv[2]);
  const std::string_view how = argv[3];
  watch_mpi_calls();
  if (operation.starts_with("ps_")) ps_job(operation, victim, how);
  reducer_job(operation, victim, how);
}
