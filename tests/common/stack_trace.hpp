#pragma once

// Stacks printed to standard error from a test that hangs: the calling thread's
// (`write_stack`, async-signal-safe once `prime_stacks` has run) and every thread's of the
// process (`write_every_stack`, each thread printing its own from a signal). Frames are named
// where their symbols are exported (shared libraries' functions; a program's own where it is
// linked with ENABLE_EXPORTS), else given as offsets into their file.

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <thread>

namespace crema::test {

/// Loads what `backtrace` needs (libgcc's unwinder) now, so that a signal handler's later call
/// loads nothing.
inline void prime_stacks() {
  void* first[1];
  (void)::backtrace(first, 1);
}

/// Writes `header` and the calling thread's stack to standard error. Async-signal-safe once
/// `prime_stacks` has run.
template <std::size_t N>
void write_stack(const char (&header)[N]) {
  (void)!::write(STDERR_FILENO, header, N - 1);
  void* frames[64];
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), STDERR_FILENO);
}

namespace detail {

// Threads that have printed their stack, for `write_every_stack`'s signal.
inline std::atomic<int> stacks_written{0};

inline void write_own_stack(int /*signal*/) {
  write_stack("--- a thread's stack:\n");
  stacks_written.fetch_add(1, std::memory_order_release);
}

}  // namespace detail

/// Writes the stack of every other thread of the process to standard error, one after the
/// other: each is sent SIGUSR2 and prints its own from the handler, given up to 200 ms (a thread
/// that blocks the signal, or sleeps in the kernel where no signal wakes it, prints nothing).
/// For a test that is about to end the process because something hangs: the handler it installs
/// stays.
inline void write_every_stack() {
  prime_stacks();
  struct sigaction print {};
  print.sa_handler = detail::write_own_stack;
  (void)::sigaction(SIGUSR2, &print, nullptr);
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return;
  const pid_t self = ::gettid();
  while (const dirent* task = ::readdir(tasks)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(task->d_name));
    if (tid <= 0 || tid == self) continue;
    const int before = detail::stacks_written.load(std::memory_order_acquire);
    if (::tgkill(::getpid(), tid, SIGUSR2) != 0) continue;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (detail::stacks_written.load(std::memory_order_acquire) == before &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ::closedir(tasks);
}

}  // namespace crema::test
