// The fake NCCL (fake_nccl.hpp): nccl.h's own declarations, so that a change of signature fails
// to compile. A communicator knows its clique, its rank and its device; a collective checks that
// its stream is on that device (the counting runtime's streams know theirs) and is queued in the
// calling thread's group, and the outermost `ncclGroupEnd` runs the group's collectives: the k-th
// call of every member of a clique together, which must agree on kind, count, type, operation
// and root.

#include "fake_nccl.hpp"

#include "counting_runtime.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace crema::test::fake_nccl {
namespace {

std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(call::count_)> counted{};

// What fail_call set: the kind to refuse (count_: none), the calls still to let through, the
// result.
std::atomic<std::size_t> refused_kind{static_cast<std::size_t>(call::count_)};
std::atomic<std::int64_t> refused_after{-1};
std::atomic<int> refused_result{ncclSuccess};

std::atomic<std::size_t> communicators{0};

// Counts call `c` and returns the result it is refused with (ncclSuccess where it is not).
ncclResult_t enter(call c) noexcept {
  counted[static_cast<std::size_t>(c)].fetch_add(1, std::memory_order_relaxed);
  if (refused_kind.load(std::memory_order_acquire) != static_cast<std::size_t>(c) ||
      refused_after.fetch_sub(1, std::memory_order_acq_rel) != 0) {
    return ncclSuccess;
  }
  return static_cast<ncclResult_t>(refused_result.load(std::memory_order_relaxed));
}

struct clique {
  int ranks = 0;
};

enum class kind { all_reduce, reduce, broadcast };

// One collective as a communicator called it.
struct collective {
  kind what;
  const void* send;
  void* receive;
  std::size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;  // reduce and broadcast
  ncclComm_t comm;
};

// The calling thread's group: its depth, the collectives queued, and the first refusal in it.
struct group {
  int depth = 0;
  std::vector<collective> queued;
  ncclResult_t failed = ncclSuccess;
};
thread_local group this_group;

}  // namespace
}  // namespace crema::test::fake_nccl

struct ncclComm {
  std::shared_ptr<crema::test::fake_nccl::clique> clique;
  int rank = 0;
  int device = 0;
};

namespace crema::test::fake_nccl {
namespace {

template <class T>
void run_typed(const std::vector<const collective*>& by_rank) {
  const collective& first = *by_rank.front();
  const std::size_t n = first.count;
  std::vector<T> result(n);
  if (first.what == kind::broadcast) {
    std::memcpy(result.data(), by_rank[static_cast<std::size_t>(first.root)]->send, n * sizeof(T));
  } else {
    for (const collective* c : by_rank) {  // in rank order, as the tests expect of one machine
      const T* values = static_cast<const T*>(c->send);
      for (std::size_t e = 0; e < n; ++e) result[e] += values[e];
    }
    if (first.op == ncclAvg) {
      for (T& value : result) value /= static_cast<T>(by_rank.size());
    }
  }
  for (const collective* c : by_rank) {
    if (first.what == kind::reduce && c->comm->rank != first.root) continue;
    std::memcpy(c->receive, result.data(), n * sizeof(T));
  }
}

ncclResult_t run(const std::vector<const collective*>& by_rank) {
  const collective& first = *by_rank.front();
  for (const collective* c : by_rank) {
    if (c->what != first.what || c->count != first.count || c->type != first.type ||
        c->op != first.op || c->root != first.root) {
      return ncclInvalidUsage;  // a real NCCL would hang, or corrupt
    }
  }
  switch (first.type) {
    case ncclFloat32:
      run_typed<float>(by_rank);
      return ncclSuccess;
    case ncclFloat64:
      run_typed<double>(by_rank);
      return ncclSuccess;
    case ncclInt32:
      run_typed<std::int32_t>(by_rank);
      return ncclSuccess;
    default:
      return ncclInvalidArgument;
  }
}

// Runs the group's collectives: per clique, the k-th collective of each rank together.
ncclResult_t run_group(const std::vector<collective>& queued) {
  std::map<const clique*, std::vector<std::vector<const collective*>>> by_clique;  // [rank][k]
  for (const collective& c : queued) {
    auto& ranks = by_clique[c.comm->clique.get()];
    ranks.resize(static_cast<std::size_t>(c.comm->clique->ranks));
    ranks[static_cast<std::size_t>(c.comm->rank)].push_back(&c);
  }
  for (const auto& [members, ranks] : by_clique) {
    const std::size_t calls = ranks.front().size();
    for (const auto& made : ranks) {
      if (made.size() != calls) return ncclInvalidUsage;  // a rank left out: NCCL would hang
    }
    for (std::size_t k = 0; k < calls; ++k) {
      std::vector<const collective*> by_rank;
      for (const auto& made : ranks) by_rank.push_back(made[k]);
      if (const ncclResult_t result = run(by_rank); result != ncclSuccess) return result;
    }
  }
  return ncclSuccess;
}

// Why NCCL would refuse collective `c` on `stream` at once (ncclSuccess: it would not).
ncclResult_t refusal_of(const collective& c, cudaStream_t stream) {
  if (const ncclResult_t refused = enter(call::collective); refused != ncclSuccess) return refused;
  if (c.comm == nullptr || c.count == 0 || c.send == nullptr || c.receive == nullptr) {
    return ncclInvalidArgument;
  }
  // NCCL launches on the stream given, which must be of the communicator's device.
  if (crema::test::counting_cuda::device_of(stream) != c.comm->device) return ncclInvalidArgument;
  if (this_group.depth == 0 && c.comm->clique->ranks != 1) {
    return ncclInvalidUsage;  // alone, it would wait for the clique's other members for ever
  }
  return ncclSuccess;
}

// Queues `c` in the calling thread's group, or runs it where there is none. A refusal inside a
// group fails the group too.
ncclResult_t queue(const collective& c, cudaStream_t stream) {
  if (const ncclResult_t refused = refusal_of(c, stream); refused != ncclSuccess) {
    if (this_group.depth > 0 && this_group.failed == ncclSuccess) this_group.failed = refused;
    return refused;
  }
  if (this_group.depth == 0) return run_group({c});
  this_group.queued.push_back(c);
  return ncclSuccess;
}

}  // namespace

void fail_call(call c, std::uint64_t after, ncclResult_t result) noexcept {
  heal();
  refused_result.store(result, std::memory_order_relaxed);
  refused_after.store(static_cast<std::int64_t>(after), std::memory_order_relaxed);
  refused_kind.store(static_cast<std::size_t>(c), std::memory_order_release);
}

void heal() noexcept {
  refused_kind.store(static_cast<std::size_t>(call::count_), std::memory_order_release);
  refused_after.store(-1, std::memory_order_relaxed);
}

std::uint64_t calls(call c) noexcept {
  return counted[static_cast<std::size_t>(c)].load(std::memory_order_relaxed);
}

std::size_t live_communicators() noexcept { return communicators.load(std::memory_order_relaxed); }

int group_depth() noexcept { return this_group.depth; }

}  // namespace crema::test::fake_nccl

using crema::test::fake_nccl::call;
using crema::test::fake_nccl::collective;
using crema::test::fake_nccl::communicators;
using crema::test::fake_nccl::enter;
using crema::test::fake_nccl::kind;
using crema::test::fake_nccl::queue;
using crema::test::fake_nccl::this_group;

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (fake NCCL)";
    case ncclSystemError:
      return "unhandled system error (fake NCCL)";
    case ncclInternalError:
      return "internal error (fake NCCL)";
    case ncclInvalidArgument:
      return "invalid argument (fake NCCL)";
    case ncclInvalidUsage:
      return "invalid usage (fake NCCL)";
    default:
      return "NCCL error (fake NCCL)";
  }
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devices) {
  if (const ncclResult_t refused = enter(call::comm_init_all); refused != ncclSuccess) {
    return refused;
  }
  int present = 0;
  (void)cudaGetDeviceCount(&present);
  if (comms == nullptr || ndev < 1) return ncclInvalidArgument;
  for (int r = 0; r < ndev; ++r) {
    const int device = devices != nullptr ? devices[r] : r;
    if (device < 0 || device >= present) return ncclInvalidArgument;
  }
  const auto members = std::make_shared<crema::test::fake_nccl::clique>();
  members->ranks = ndev;
  for (int r = 0; r < ndev; ++r) {
    comms[r] = new ncclComm{members, r, devices != nullptr ? devices[r] : r};
    communicators.fetch_add(1, std::memory_order_relaxed);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const ncclResult_t refused = enter(call::comm_destroy);  // destroyed all the same
  if (comm == nullptr) return ncclInvalidArgument;
  delete comm;
  communicators.fetch_sub(1, std::memory_order_relaxed);
  return refused;
}

ncclResult_t ncclGroupStart() {
  if (const ncclResult_t refused = enter(call::group_start); refused != ncclSuccess) {
    return refused;
  }
  ++this_group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  const ncclResult_t refused = enter(call::group_end);
  if (this_group.depth == 0) return ncclInvalidUsage;
  if (--this_group.depth > 0) return refused;
  // The outermost end: the group runs, unless it was refused or one of its calls was.
  const ncclResult_t failed =
      refused != ncclSuccess ? refused : std::exchange(this_group.failed, ncclSuccess);
  this_group.failed = ncclSuccess;
  std::vector<collective> queued = std::exchange(this_group.queued, {});
  if (failed != ncclSuccess) return failed;
  return crema::test::fake_nccl::run_group(queued);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return queue({kind::all_reduce, sendbuff, recvbuff, count, datatype, op, 0, comm}, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return queue({kind::reduce, sendbuff, recvbuff, count, datatype, op, root, comm}, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return queue({kind::broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm}, stream);
}

}  // extern "C"
