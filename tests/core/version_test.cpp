#include <crema/version.hpp>

#include <doctest/doctest.h>

TEST_SUITE("version") {
  TEST_CASE("the version constant and the macros agree") {
    CHECK(crema::version.major == CREMA_VERSION_MAJOR);
    CHECK(crema::version.minor == CREMA_VERSION_MINOR);
    CHECK(crema::version.patch == CREMA_VERSION_PATCH);
    CHECK(CREMA_VERSION ==
          CREMA_VERSION_MAJOR * 10000 + CREMA_VERSION_MINOR * 100 + CREMA_VERSION_PATCH);
  }
}
