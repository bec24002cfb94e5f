#include <crema/crema.hpp>

#include <fmt/core.h>

int main() {
  crema::synced_buffer<float> buffer(8);
  buffer.mutable_host()[0] = 1.5f;
  (void)buffer.device();
  fmt::print("crema {}.{}.{} from conan: head {}\n", crema::version.major, crema::version.minor,
             crema::version.patch, crema::to_string(buffer.head()));
  return buffer.host()[0] == 1.5f ? 0 : 1;
}
