// expect: crema: download_async\(\) needs head::at_device
#include <crema/memory/typed_buffer.hpp>

int main() {
  crema::emulated_stream stream;
  auto at_host = crema::typed_buffer<float, crema::head::uninitialized>(4).claim_host();
  auto synced = std::move(at_host).download_async(stream);
}
