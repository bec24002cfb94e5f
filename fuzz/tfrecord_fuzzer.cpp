// libFuzzer target: any bytes read as a TFRecord file either frame records, each of which lies
// inside them and then checks its CRC and decodes as a tf.train.Example or not, or are a
// crema::format_error naming the offset. Anything else (a crash, a sanitizer report, another
// exception, a record past the end) is a finding.

#include <crema/io/shards/tfrecord.hpp>
#include <crema/io/shards/tfrecord_source.hpp>

#include "memory_shard.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const crema::fuzz::memory_shard shard{{reinterpret_cast<const std::byte*>(data), size},
                                        "fuzz.tfrecord"};
  std::vector<std::byte> record;
  try {
    for (const crema::tfrecord_location& place : crema::index_tfrecord(shard)) {
      if (place.offset > size || place.size > size - place.offset) __builtin_trap();
      // The data itself, whatever its CRC, decoded as an Example: it must not crash.
      const auto bytes = shard.bytes.subspan(place.offset, place.size);
      try {
        const crema::tf_example example(bytes, "fuzz");
        for (const auto& feature : example.features()) {
          switch (feature.kind) {
            case crema::tf_feature_kind::bytes:
              (void)example.bytes(feature.name);
              break;
            case crema::tf_feature_kind::floats:
              (void)example.floats(feature.name);
              break;
            case crema::tf_feature_kind::int64s:
              (void)example.int64s(feature.name);
              break;
          }
        }
      } catch (const crema::format_error&) {
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
