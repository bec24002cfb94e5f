#pragma once

// A fake NCCL: the calls of nccl.h that crema's nccl_reducer makes, implemented on the host over
// the counting CUDA runtime's devices (counting_runtime.hpp), whose device memory is host memory,
// so that a test linked against it instead of libnccl runs the reducer without a GPU. The
// collectives compute what NCCL's do (sums in rank order, averages, a root's reduce, a
// broadcast), once every communicator of a clique has made its call in one group, as NCCL
// launches a single process's group at `ncclGroupEnd`. What would hang a real NCCL (a
// collective of a clique of several made outside a group, a group whose communicators did not
// all make the same calls) fails with `ncclInvalidUsage` instead. `fail_call` makes NCCL refuse.
// fake_nccl.cpp defines it.

#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace crema::test::fake_nccl {

/// The calls counted and made to fail.
enum class call : std::size_t {
  comm_init_all,  // ncclCommInitAll
  comm_destroy,   // ncclCommDestroy
  group_start,    // ncclGroupStart
  group_end,      // ncclGroupEnd
  collective,     // ncclAllReduce, ncclReduce, ncclBroadcast
  count_          // not a call: the number of them
};

/// @brief Makes the call of kind `c` that comes after `after` more such calls return `result`.
/// A refused collective is not queued, and its group fails at `ncclGroupEnd` with the same
/// result, every collective of the group dropped, as NCCL aborts a group with an error. A refused
/// `ncclGroupEnd` ends the group all the same, its collectives dropped. A refused
/// `ncclCommDestroy` still destroys the communicator.
void fail_call(call c, std::uint64_t after, ncclResult_t result) noexcept;
/// Ends what `fail_call` set.
void heal() noexcept;

/// @return the calls of kind `c` made so far, by every thread
std::uint64_t calls(call c) noexcept;
/// @return the communicators made and not yet destroyed
std::size_t live_communicators() noexcept;
/// @return how many groups the calling thread has started and not ended
int group_depth() noexcept;

}  // namespace crema::test::fake_nccl
