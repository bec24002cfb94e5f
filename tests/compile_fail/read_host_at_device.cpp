// expect: crema: host\(\) needs head::at_host or head::synced
#include <crema/memory/typed_buffer.hpp>

int main() {
  auto at_device = crema::typed_buffer<float, crema::head::uninitialized>(4).claim_device();
  (void)at_device.host();  // the host copy is stale
}
