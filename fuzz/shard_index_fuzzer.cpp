// libFuzzer target: any bytes read as a shard's index file, in DALI's WebDataset format and in its
// TFRecord format, either place every member and record inside the shard, in the shard's order,
// or are a crema::format_error naming the line; a TFRecord record so placed is then read, its
// header checked. Anything else (a crash, a sanitizer report, another exception, a place past the
// shard's end or out of order) is a finding.

#include <crema/io/shards/shard_index.hpp>

#include "memory_shard.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::array<std::byte, 1 << 16> contents{};
  const crema::fuzz::memory_shard shard{contents, "fuzz.shard"};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    std::uint64_t end = 0;
    for (const crema::webdataset_entry& sample :
         crema::read_webdataset_index(text, "fuzz.idx", shard)) {
      if (sample.members.empty()) __builtin_trap();
      for (const crema::webdataset_member& member : sample.members) {
        if (member.offset < end || member.offset > shard.size() ||
            member.size > shard.size() - member.offset) {
          __builtin_trap();
        }
        end = member.offset + member.size;
      }
    }
  } catch (const crema::format_error&) {
  }
  try {
    std::vector<std::byte> record;
    for (const crema::tfrecord_location& place :
         crema::read_tfrecord_index(text, "fuzz.idx", shard)) {
      if (place.offset < 12 || place.offset > shard.size() ||
          place.size + 4 > shard.size() - place.offset) {
        __builtin_trap();
      }
      try {
        crema::read_tfrecord(shard, place, record);
      } catch (const crema::format_error&) {
      }
    }
  } catch (const crema::format_error&) {
  }
  return 0;
}
