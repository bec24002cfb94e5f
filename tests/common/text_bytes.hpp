#pragma once

// Text as bytes and bytes as text, for tests that write and read small records.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace crema::test {

inline std::vector<std::byte> bytes_of(std::string_view text) {
  const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  return {bytes.begin(), bytes.end()};
}

inline std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace crema::test
