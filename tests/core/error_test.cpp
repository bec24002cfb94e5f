#include <crema/core/error.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <type_traits>

TEST_SUITE("error") {
  TEST_CASE("every crema exception is a crema::error and a std::runtime_error") {
    static_assert(std::is_base_of_v<std::runtime_error, crema::error>);
    static_assert(std::is_base_of_v<crema::error, crema::config_error>);
    static_assert(std::is_base_of_v<crema::error, crema::length_error>);
    static_assert(std::is_base_of_v<crema::error, crema::state_error>);
    static_assert(std::is_base_of_v<crema::error, crema::allocation_error>);
    static_assert(std::is_base_of_v<crema::error, crema::format_error>);
    static_assert(std::is_base_of_v<crema::native_error, crema::cuda_error>);
    static_assert(std::is_base_of_v<crema::native_error, crema::lmdb_error>);
    static_assert(std::is_base_of_v<crema::native_error, crema::mpi_error>);
    static_assert(std::is_base_of_v<crema::native_error, crema::io_error>);
    static_assert(std::is_base_of_v<crema::error, crema::pipeline_error>);
    static_assert(std::is_base_of_v<crema::error, crema::collective_error>);
    CHECK_THROWS_AS(throw crema::pipeline_error("stopped"), crema::error);
  }

  TEST_CASE("an allocation_error names the bytes and the side") {
    const crema::allocation_error plain(4096, "device");
    CHECK(std::string(plain.what()) == "cannot allocate 4096 bytes of device memory");
    CHECK(plain.bytes() == 4096);
    CHECK(plain.side() == "device");
    const crema::allocation_error with_cause(8, "pinned host", "out of memory");
    CHECK(std::string(with_cause.what()) ==
          "cannot allocate 8 bytes of pinned host memory: out of memory");
  }

  TEST_CASE("native errors keep the native code") {
    const crema::cuda_error e(2, "cudaMalloc(&p, 64) failed: cudaErrorMemoryAllocation");
    CHECK(e.code() == 2);
    CHECK(std::string(e.what()) == "cudaMalloc(&p, 64) failed: cudaErrorMemoryAllocation");
  }

  TEST_CASE("fail formats the message and throws the requested type") {
    CHECK_THROWS_WITH_AS(
        crema::detail::fail<crema::config_error>("batch size {} at key {}", 0, "train"),
        "batch size 0 at key train", crema::config_error);
    CHECK_THROWS_WITH_AS(crema::detail::fail_with_code<crema::lmdb_error>(-30798, "no key {}", 7),
                         "no key 7", crema::lmdb_error);
  }
}
