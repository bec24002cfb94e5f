#pragma once

// A shard in memory (the fuzzer's input), read as crema::shard_file reads a file; a read outside
// it is a finding.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace crema::fuzz {

struct memory_shard {
  std::span<const std::byte> bytes;
  std::string name;

  [[nodiscard]] std::uint64_t size() const noexcept { return bytes.size(); }
  [[nodiscard]] const std::string& path() const noexcept { return name; }
  void read_at(std::uint64_t offset, std::span<std::byte> into) const {
    if (offset > bytes.size() || into.size() > bytes.size() - offset) __builtin_trap();
    if (!into.empty()) std::memcpy(into.data(), bytes.data() + offset, into.size());
  }
};

}  // namespace crema::fuzz
