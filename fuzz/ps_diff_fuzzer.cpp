// libFuzzer target: the parameter server's diff decoder, which reads what clients send. The first
// two bytes choose the element count the server expects (1 to 4096), the third float or double;
// the rest is the message. Every message either is added whole (`add_encoded_diff` returns the
// bytes `encoded_diff_bytes` said, within the message) or is a crema::format_error that leaves
// the parameters as they were. Anything else (a crash, a sanitizer report, another exception, a
// partial update, which traps) is a finding.

#include <crema/collective/ps/compression.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace {

template <class T>
void decode(std::span<const std::byte> message, std::size_t count) {
  std::vector<T> into(count);
  for (std::size_t i = 0; i < count; ++i) into[i] = static_cast<T>(i % 7) - T(3);
  const std::vector<T> before = into;
  try {
    const std::size_t bytes = crema::encoded_diff_bytes<T>(message, count);
    const std::size_t read = crema::add_encoded_diff<T>(message, std::span<T>(into));
    if (read != bytes || read > message.size()) __builtin_trap();
  } catch (const crema::format_error&) {
    if (std::memcmp(into.data(), before.data(), count * sizeof(T)) != 0) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::size_t count = 1 + ((std::size_t{data[0]} << 8 | data[1]) % 4096);
  const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(data + 3), size - 3);
  if (data[2] % 2 == 0) {
    decode<float>(message, count);
  } else {
    decode<double>(message, count);
  }
  return 0;
}
