// expect: crema: upload_async\(\) needs head::at_host
#include <crema/memory/typed_buffer.hpp>

int main() {
  crema::emulated_stream stream;
  auto at_device = crema::typed_buffer<float, crema::head::uninitialized>(4).claim_device();
  auto synced = std::move(at_device).upload_async(stream);  // the newest data is on the device
}
