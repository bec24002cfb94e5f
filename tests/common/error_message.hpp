#pragma once

// The message of the error of type `Error` that `call` throws, or "no error": for checks that an
// error names what it should, compared whole.

#include <string>

namespace crema::test {

template <class Error, class Call>
std::string message_of(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace crema::test
