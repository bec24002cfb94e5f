#pragma once

// Runs part of a test in a child process: for what must not touch the test program's own state,
// a thread limit that cannot be lifted or a GPU context that a fault leaves failing every call.
// The child reports through a pipe and ends at its alarm if it hangs, so a hang is a failure, not
// a stalled test; before it ends, it prints its main thread's stack to standard error, to say
// where it hung (on a GPU machine without a debugger, the one trace there is).

#include "common/stack_trace.hpp"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>

namespace crema::test {

struct child_report {
  bool skipped = false;  ///< the child could not run what the test needs: `text` says why
  bool hung = false;     ///< the child was ended by its alarm
  int exit_code = -1;
  std::string text;  ///< what the body returned (or the exception it let out)
};

/// Thrown by a child's body that cannot run here (no root, no GPU): the report is `skipped`.
struct child_skip {
  std::string why;
};

namespace detail {

// The exit code of a child ended by its alarm, the thread its alarm is for, and whether the
// alarm was handed to that thread already.
inline constexpr int child_hung_code = 124;
inline pid_t child_main_thread = 0;
inline std::atomic<bool> child_alarm_handed_on{false};

// The child's SIGALRM: on its main thread, prints that thread's stack and ends the child; on any
// other, hands the signal to the main thread and sets a second alarm, at which, if the main
// thread never took it (blocked it, say), the thread that gets it prints its own stack and ends
// the child. Only async-signal-safe calls (`prime_stacks` ran in the child first).
inline void print_stack_and_end(int /*signal*/) {
  const bool main_thread = ::gettid() == child_main_thread;
  if (!main_thread && !child_alarm_handed_on.exchange(true)) {
    (void)::tgkill(::getpid(), child_main_thread, SIGALRM);
    ::alarm(5);
    return;
  }
  if (main_thread) {
    write_stack("child: still running at its time limit; its main thread's stack:\n");
  } else {
    write_stack("child: still running at its time limit; a thread's stack:\n");
  }
  ::_exit(child_hung_code);
}

}  // namespace detail

/// Runs `body()` (which returns a `std::string`) in a child given `limit` to finish. The child
/// ends with `_exit`, without the parent's exit handlers: what the body made is destroyed inside
/// it, where a hang is caught.
template <class Body>
child_report run_in_child(std::chrono::seconds limit, Body body) {
  child_report report;
  int channel[2];
  if (::pipe(channel) != 0) {
    report.text = "pipe failed";
    return report;
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(channel[0]);
    ::close(channel[1]);
    report.text = "fork failed";
    return report;
  }
  if (pid == 0) {
    ::close(channel[0]);
    detail::child_main_thread = ::gettid();
    prime_stacks();
    struct sigaction at_limit {};
    at_limit.sa_handler = detail::print_stack_and_end;
    (void)::sigaction(SIGALRM, &at_limit, nullptr);
    ::alarm(static_cast<unsigned>(limit.count()));
    std::string text;
    int code = 0;
    try {
      text = body();
    } catch (const child_skip& skip) {
      text = skip.why;
      code = 77;
    } catch (const std::exception& e) {
      text = std::string("uncaught: ") + e.what();
      code = 1;
    }
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t wrote = ::write(channel[1], text.data() + done, text.size() - done);
      if (wrote <= 0) break;
      done += static_cast<std::size_t>(wrote);
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  ::close(channel[1]);
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(channel[0], buffer, sizeof buffer);
    if (got > 0) {
      report.text.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(channel[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    report.hung = WTERMSIG(status) == SIGALRM;
    report.text += " (killed by signal " + std::to_string(WTERMSIG(status)) + ")";
  } else if (WIFEXITED(status)) {
    report.exit_code = WEXITSTATUS(status);
    report.skipped = report.exit_code == 77;
    report.hung = report.exit_code == detail::child_hung_code;
  }
  return report;
}

}  // namespace crema::test
