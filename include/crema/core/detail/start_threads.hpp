#pragma once

#include <crema/core/error.hpp>

#include <cerrno>
#include <cstddef>
#include <new>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

namespace crema::detail {

// Starts threads into `threads` until it holds `count` of them, each made by `make()`. When the
// system refuses one (a process or address-space limit), the threads already running are told to
// finish by `wake_all()` and joined, and a `thread_error` names how many were asked for and
// made: a constructor that fails part-way neither hangs on its own threads nor leaks them.
// `already` counts threads the caller has besides these (a team that works on the caller's
// thread too), so that the message speaks of the count the user asked for.
template <class Make, class WakeAll>
void start_threads(const char* who, std::size_t count, std::vector<std::jthread>& threads,
                   Make&& make, WakeAll&& wake_all, std::size_t already = 0) {
  int code = 0;
  std::string why;
  try {
    threads.reserve(count);
    while (threads.size() < count) threads.push_back(make());
    return;
  } catch (const std::system_error& e) {
    code = e.code().value();
    why = e.code().message();
  } catch (const std::bad_alloc&) {
    code = ENOMEM;
    why = "out of memory";
  } catch (const std::length_error&) {
    code = ENOMEM;
    why = "too many to hold";
  }
  const std::size_t made = threads.size();
  wake_all();
  threads.clear();  // joins the ones that started
  fail_with_code<thread_error>(code, "{}: {} threads asked for, {} made: {}", who, count + already,
                               made + already, why);
}

}  // namespace crema::detail
