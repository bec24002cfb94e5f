// libFuzzer target: any bytes read as a WebDataset tar shard either index, and then every
// member they say they hold lies inside them, or are a crema::format_error naming the offset.
// Anything else (a crash, a sanitizer report, another exception, a member past the end) is a
// finding.

#include <crema/io/shards/webdataset.hpp>

#include "memory_shard.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const crema::fuzz::memory_shard shard{{reinterpret_cast<const std::byte*>(data), size},
                                        "fuzz.tar"};
  try {
    for (const crema::webdataset_entry& sample : crema::index_webdataset(shard)) {
      if (sample.members.empty()) __builtin_trap();  // a sample is made by its first member
      for (const crema::webdataset_member& member : sample.members) {
        if (member.offset > size || member.size > size - member.offset) __builtin_trap();
      }
    }
  } catch (const crema::format_error&) {
  }
  return 0;
}
