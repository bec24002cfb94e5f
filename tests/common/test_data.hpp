#pragma once

// The files of tests/data (CREMA_TEST_DATA_DIR, set by the build for the suites that use them;
// the environment variable of that name overrides it, as the GPU bundle's run.sh sets it).

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace crema::test {

/// @return the path of tests/data/`name`
inline std::filesystem::path test_data(const char* name) {
  if (const char* moved = std::getenv("CREMA_TEST_DATA_DIR"); moved != nullptr && *moved != 0) {
    return std::filesystem::path(moved) / name;
  }
  return std::filesystem::path(CREMA_TEST_DATA_DIR) / name;
}

/// @return the bytes of a file (a test fails if it cannot be read)
inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), path.string());
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

/// @brief Writes `bytes` as the file at `path`, its folders made (a test fails if it cannot).
inline void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE_MESSAGE(out.good(), path.string());
}

}  // namespace crema::test
