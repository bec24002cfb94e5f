#pragma once

// Counts the program's malloc calls by replacing malloc (glibc's own does the work): include it
// in one translation unit of a test program of its own. Under a sanitizer, whose allocator cannot
// be replaced, nothing is replaced and CREMA_TEST_SANITIZED is defined: the tests say they skip.

#include "common/sanitized.hpp"

#include <atomic>
#include <cstddef>

#ifndef CREMA_TEST_SANITIZED
namespace crema::test {
inline std::atomic<std::size_t> mallocs{0};                  // every thread's
inline thread_local std::size_t mallocs_on_this_thread = 0;  // the calling thread's
}  // namespace crema::test

extern "C" void* __libc_malloc(std::size_t);  // glibc's own
extern "C" void* malloc(std::size_t bytes) {
  crema::test::mallocs.fetch_add(1, std::memory_order_relaxed);
  ++crema::test::mallocs_on_this_thread;
  return __libc_malloc(bytes);
}
#endif
