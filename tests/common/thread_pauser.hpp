#pragma once

// Holds one thread still wherever it is, until released: a signal whose handler waits on a
// semaphore. A test uses it to make a woken thread run late (a low-priority thread on a busy
// machine), so the interleaving a race needs happens every time instead of by luck.

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

#include <cerrno>

namespace crema::test {

class thread_pauser {
 public:
  thread_pauser() {
    ::sem_init(&entered(), 0, 0);
    ::sem_init(&released(), 0, 0);
    struct sigaction action {};
    action.sa_handler = &hold;
    ::sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &action, &previous_);
  }
  thread_pauser(const thread_pauser&) = delete;
  thread_pauser& operator=(const thread_pauser&) = delete;
  ~thread_pauser() { ::sigaction(SIGUSR1, &previous_, nullptr); }

  /// Stops `thread` in the signal handler; returns once it is there.
  void pause(pthread_t thread) {
    ::pthread_kill(thread, SIGUSR1);
    while (::sem_wait(&entered()) != 0 && errno == EINTR) {
    }
  }
  /// Lets the paused thread go on from where it was.
  void resume() { ::sem_post(&released()); }

 private:
  static sem_t& entered() {
    static sem_t semaphore;
    return semaphore;
  }
  static sem_t& released() {
    static sem_t semaphore;
    return semaphore;
  }
  static void hold(int) {
    const int saved = errno;
    ::sem_post(&entered());
    while (::sem_wait(&released()) != 0 && errno == EINTR) {
    }
    errno = saved;
  }

  struct sigaction previous_ {};
};

}  // namespace crema::test
