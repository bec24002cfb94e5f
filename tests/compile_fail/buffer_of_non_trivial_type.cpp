// expect: crema: synced_buffer elements must be trivially copyable
#include <crema/memory/synced_buffer.hpp>

#include <string>

int main() {
  crema::synced_buffer<std::string> strings(4);  // a std::string cannot be copied bytewise
}
