// A user's program: links crema::crema (and whatever components were asked for) and uses it.
#include <crema/crema.hpp>

#include <fmt/core.h>

int main() {
  crema::synced_buffer<int> buffer(16);
  buffer.mutable_host()[3] = 7;
  (void)buffer.device();
  const int value = buffer.host()[3];
  fmt::print("consumer: crema {} head {} value {}\n", CREMA_VERSION,
             crema::to_string(buffer.head()), value);
  return value == 7 && buffer.head() == crema::head::synced ? 0 : 1;
}
