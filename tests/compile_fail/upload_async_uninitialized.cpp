// expect: crema: upload_async\(\) needs head::at_host
#include <crema/memory/typed_buffer.hpp>

int main() {
  crema::emulated_stream stream;
  crema::typed_buffer<float, crema::head::uninitialized> fresh(4);
  auto synced = std::move(fresh).upload_async(stream);  // there is nothing at the host yet
}
