#pragma once

#include <crema/core/error.hpp>

#include <doctest/doctest.h>

#include <exception>
#include <string>

namespace crema::test {

/// The message of the exception `error` nests (a `pipeline_error` nests what the source or the
/// transform threw, which names the record at fault), or "(nothing nested)".
inline std::string nested_message(const std::exception& error) {
  try {
    std::rethrow_if_nested(error);
  } catch (const std::exception& inner) {
    return inner.what();
  }
  return "(nothing nested)";
}

/// "<what> / <the message of what it nests>", for a check that the error names its cause.
inline std::string what_with_cause(const std::exception& error) {
  return std::string(error.what()) + " / " + nested_message(error);
}

/// Runs `pass`, a pass through a pipeline that must fail, and returns the message of the `Cause`
/// its `pipeline_error` nests; the test fails where the pass throws no `pipeline_error`, or one
/// that nests another kind of error.
template <class Cause = crema::format_error, class Pass>
std::string failure_cause(Pass pass) {
  try {
    pass();
  } catch (const crema::pipeline_error& error) {
    try {
      std::rethrow_if_nested(error);
    } catch (const Cause& cause) {
      return cause.what();
    } catch (const std::exception& other) {
      FAIL("the pipeline_error nests another kind of error: " << other.what());
    }
    FAIL("the pipeline_error nests nothing: " << error.what());
  }
  FAIL("the pass ended without a pipeline_error");
  return {};
}

}  // namespace crema::test
