// libFuzzer target: any bytes given to decode_blob_proto either decode to a blob whose values
// match its shape, or are a crema::format_error. Anything else is a finding.

#include <crema/io/caffe/blob_proto.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const crema::blob blob = crema::decode_blob_proto(bytes, "fuzz");
    if (blob.data.size() != blob.count()) __builtin_trap();  // the decoder checks this
  } catch (const crema::format_error&) {
  }
  return 0;
}
