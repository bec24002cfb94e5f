// expect: crema: mutable_device\(\) needs head::at_device
#include <crema/memory/typed_buffer.hpp>

int main() {
  auto at_host = crema::typed_buffer<float, crema::head::uninitialized>(4).claim_host();
  (void)at_host.mutable_device();  // the device copy is stale
}
