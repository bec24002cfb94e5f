#pragma once

// Runs part of a test in a child process where the system refuses new threads after a few, as
// it does at a process or address-space limit: the only way to make thread creation fail for
// real, part-way through a constructor.
//
// The child takes an unused user id (only root may) and sets RLIMIT_NPROC, which the kernel
// enforces per user for processes without CAP_SYS_RESOURCE (run_in_child: a hang is a failure).

#include <crema/core/error.hpp>

#include "common/child_process.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

namespace crema::test {

/// Runs `body()` (which returns a `std::string`) in a child whose user may run at most `threads`
/// threads, itself included, and gives it `limit` to finish.
template <class Body>
child_report run_with_thread_limit(unsigned threads, std::chrono::seconds limit, Body body) {
  if (::geteuid() != 0) {
    return {.skipped = true,
            .text = "a per-user thread limit needs root to take an unused user id"};
  }
  return run_in_child(limit, [&] {
    // A user id no other test uses at the same time: tests may run in parallel.
    const uid_t user = 40000 + static_cast<uid_t>(::getpid() % 20000);
    const rlimit cap{threads, threads};
    if (::setgid(user) != 0 || ::setuid(user) != 0 || ::setrlimit(RLIMIT_NPROC, &cap) != 0) {
      throw child_skip{"cannot take an unprivileged user id with a thread limit here"};
    }
    return body();
  });
}

/// The number of threads of this process now (Linux: the Threads line of /proc/self/status).
/// Call `settle_thread_count()` first: a sanitizer starts a helper thread with the first one.
inline std::size_t thread_count() {
  std::size_t count = 0;
  if (FILE* status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, status)) {
      if (std::sscanf(line, "Threads: %zu", &count) == 1) break;
    }
    std::fclose(status);
  }
  return count;
}

/// Starts and joins one thread, so that helpers a runtime starts with the first thread (TSan's)
/// exist before a test counts threads.
inline void settle_thread_count() {
  std::thread([] {}).join();
}

/// Runs `construct()`, which starts `asked` threads, in a child limited to 8, and checks what a
/// user relies on: a `crema::thread_error` with the system's code, whose message is
/// "<who>: <asked> threads asked for, <made> made: <reason>" with at least `made_at_least` and
/// fewer than `asked` made, and no thread of the ones made left running. Prints the skip line
/// where the limit cannot be set (not root).
template <class Construct>
void check_threads_refused(Construct construct, const std::string& who, unsigned asked,
                           unsigned made_at_least) {
  using namespace std::chrono_literals;
  const child_report report = run_with_thread_limit(8, 20s, [&] {
    settle_thread_count();
    const std::size_t before = thread_count();
    try {
      construct();
      return std::string("constructed");
    } catch (const thread_error& e) {
      // A joined thread can still be counted for a moment: the kernel wakes the joiner as the
      // thread exits, before it takes the thread out of the process. A leaked one stays.
      const auto deadline = std::chrono::steady_clock::now() + 2s;
      while (thread_count() != before && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(1ms);
      }
      return fmt::format("{}|{}|{}", e.code(), thread_count() == before ? "joined" : "leaked",
                         e.what());
    }
  });
  if (report.skipped) {
    std::printf("crema-test-skip: %s\n", report.text.c_str());
    return;
  }
  CAPTURE(report.text);
  CHECK_FALSE(report.hung);
  CHECK(report.exit_code == 0);
  int code = 0;
  char joined[8] = {};
  unsigned asked_seen = 0;
  unsigned made = 0;
  char reason[128] = {};
  const std::string format = "%d|%7[a-z]|" + who + ": %u threads asked for, %u made: %127[^\n]";
  REQUIRE(std::sscanf(report.text.c_str(), format.c_str(), &code, joined, &asked_seen, &made,
                      reason) == 5);
  CHECK(code == EAGAIN);
  CHECK(std::string(joined) == "joined");
  CHECK(asked_seen == asked);
  CHECK(made >= made_at_least);
  CHECK(made < asked);
  CHECK(std::string(reason) == "Resource temporarily unavailable");
}

}  // namespace crema::test
