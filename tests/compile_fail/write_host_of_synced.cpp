// expect: crema: mutable_host\(\) needs head::at_host
#include <crema/memory/typed_buffer.hpp>

int main() {
  auto synced = crema::typed_buffer<float, crema::head::uninitialized>(4).claim_host().to_device();
  synced.mutable_host()[0] = 1.0f;  // writing through a read-only (synced) host copy
}
