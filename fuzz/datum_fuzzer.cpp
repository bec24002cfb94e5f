// libFuzzer target: any bytes given to decode_datum either decode, and then every value they say
// they hold can be read, or are a crema::format_error. Anything else (a crash, a sanitizer
// report, another exception) is a finding.

#include <crema/io/caffe/datum.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const crema::datum_view datum = crema::decode_datum(bytes, "fuzz");
    std::vector<float> floats(datum.float_count);  // at most size / 4: the decoder counted them
    datum.copy_floats(floats);
    if (!datum.encoded && !datum.data.empty() && datum.data.size() != datum.elements()) {
      __builtin_trap();  // the decoder promised data of channels x height x width bytes
    }
    volatile std::byte sink{};
    for (const std::byte pixel : datum.data) sink = pixel;  // the view stays inside the input
    (void)sink;
  } catch (const crema::format_error&) {
  }
  return 0;
}
