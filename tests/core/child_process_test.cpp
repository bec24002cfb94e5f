// The test support for hangs: a child (common/child_process.hpp) that hangs is ended at its
// limit and says where it hung, and so does a test program whose watchdog (common/watchdog.hpp)
// expires. The GPU tests rely on these traces.

#include "common/child_process.hpp"
#include "common/scratch_directory.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

namespace crema::test {

// Where the hanging child's main thread waits: named in its stack (the program exports its
// symbols), so not inlined and not of internal linkage.
[[gnu::noinline, noreturn]] void wait_in_child_forever() {
  for (;;) ::pause();
}

}  // namespace crema::test

TEST_SUITE("test support for hangs") {
  TEST_CASE("a child that hangs is ended at its limit, reported hung, and prints where it waits") {
    using namespace std::chrono_literals;
    const crema::test::scratch_directory scratch("child-hang");
    const std::string log = (scratch.path() / "stderr.log").string();
    // The main thread alone; beside another thread, which the alarm may reach first and which
    // hands it on; and with the alarm blocked on the main thread, where the other thread prints
    // its own stack at a second alarm, 5 s later.
    enum class threads { main_only, two, main_blocks_alarm };
    for (const threads run : {threads::main_only, threads::two, threads::main_blocks_alarm}) {
      CAPTURE(static_cast<int>(run));
      const crema::test::child_report report = crema::test::run_in_child(1s, [&]() -> std::string {
        const int to = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (to < 0 || ::dup2(to, STDERR_FILENO) < 0) return "cannot redirect standard error";
        if (run != threads::main_only) {
          std::thread([] { crema::test::wait_in_child_forever(); }).detach();
        }
        if (run == threads::main_blocks_alarm) {
          sigset_t alarm;
          sigemptyset(&alarm);
          sigaddset(&alarm, SIGALRM);
          pthread_sigmask(SIG_BLOCK, &alarm, nullptr);
        }
        crema::test::wait_in_child_forever();
      });
      CHECK(report.hung);
      CHECK(report.exit_code == crema::test::detail::child_hung_code);
      std::ifstream in(log);
      const std::string printed{std::istreambuf_iterator<char>(in), {}};
      CAPTURE(printed);
      CHECK(printed.find(run == threads::main_blocks_alarm
                             ? "a thread's stack"
                             : "its main thread's stack") != std::string::npos);
      CHECK(printed.find("wait_in_child_forever") != std::string::npos);
    }
  }

  TEST_CASE("a watchdog that expires prints every thread's stack and ends the program") {
    using namespace std::chrono_literals;
    const crema::test::scratch_directory scratch("watchdog-hang");
    const std::string log = (scratch.path() / "stderr.log").string();
    const crema::test::child_report report = crema::test::run_in_child(20s, [&]() -> std::string {
      const int to = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (to < 0 || ::dup2(to, STDERR_FILENO) < 0) return "cannot redirect standard error";
      std::thread([] { crema::test::wait_in_child_forever(); }).detach();
      const crema::test::watchdog guard(200ms, "a test that waits forever");
      crema::test::wait_in_child_forever();
    });
    CHECK_FALSE(report.hung);
    CHECK(report.exit_code == 3);  // the watchdog's
    std::ifstream in(log);
    const std::string printed{std::istreambuf_iterator<char>(in), {}};
    CAPTURE(printed);
    CHECK(printed.find("watchdog: 'a test that waits forever' did not finish within 200 ms") !=
          std::string::npos);
    // The main thread's and the other's, each where it waits.
    std::size_t waiting = 0;
    for (std::size_t at = printed.find("wait_in_child_forever"); at != std::string::npos;
         at = printed.find("wait_in_child_forever", at + 1)) {
      ++waiting;
    }
    CHECK(waiting == 2);
  }

  TEST_CASE("a child that finishes in time is not reported hung") {
    using namespace std::chrono_literals;
    const crema::test::child_report report =
        crema::test::run_in_child(5s, [] { return std::string("done"); });
    CHECK_FALSE(report.hung);
    CHECK(report.exit_code == 0);
    CHECK(report.text == "done");
  }
}
