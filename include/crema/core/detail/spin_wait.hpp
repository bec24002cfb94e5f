#pragma once

#include <crema/core/detail/chrono.hpp>

namespace crema::detail {

// Tells the processor this is a spin-wait (x86 `pause`), so the other hyper-thread runs on.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long crema spins on a queue before it sleeps or suspends. A wake-up through the kernel
// costs a few microseconds on both sides, so spinning about as long pays when the thing waited for
// is that close, and costs little when it is not. Bounded by time, not by a count of `pause`
// instructions, whose length differs tenfold between processors.
inline constexpr std::chrono::nanoseconds spin_time{6000};

// Spins until `done()` or `spin_time` has passed; returns `done()`.
template <class Done>
bool spin_until(Done&& done) noexcept(noexcept(done())) {
  const auto until = std::chrono::steady_clock::now() + spin_time;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

}  // namespace crema::detail
