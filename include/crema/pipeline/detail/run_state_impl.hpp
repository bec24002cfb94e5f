#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/pipeline/detail/run_state.hpp>

#include <exception>
#include <mutex>
#include <string>
#include <utility>

// A run's failure: compiled once in libcrema (src/core/), or included by run_state.hpp, inline,
// where the core is headers alone.

namespace crema::detail {

CREMA_CORE_INLINE void run_state::fail(std::exception_ptr cause, std::string message) noexcept {
  std::exception_ptr wrapped;
  try {
    try {
      std::rethrow_exception(cause);
    } catch (...) {
      std::throw_with_nested(pipeline_error(message));
    }
  } catch (...) {
    wrapped = std::current_exception();  // the pipeline_error, or what stopped its making
  }
  {
    std::scoped_lock lock(error_mutex_);
    if (!error_) error_ = wrapped;
    failed_.store(true, std::memory_order_release);
  }
  request_stop();
}

}  // namespace crema::detail
