// crema-gpu-info [--json=FILE]: the GPU the bundle's tests and benchmarks run on, as one line
// ("gpu: ..."), and as JSON with --json. Exit status 3 where there is no CUDA device, so that
// run.sh can tell "no GPU" from a failure.
#include "gpu/gpu_machine.hpp"

#include <fmt/core.h>
#include <fmt/os.h>

#include <exception>
#include <string>
#include <string_view>

namespace {

std::string json_string(std::string_view text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + '"';
}

}  // namespace

int main(int argc, char** argv) try {
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (argument.starts_with("--json=")) {
      json_path = argument.substr(7);
    } else {
      fmt::print(stderr,
                 "crema-gpu-info: unknown argument '{}' (usage: crema-gpu-info "
                 "[--json=FILE])\n",
                 argument);
      return 2;
    }
  }
  const auto gpu = crema::bench::describe_gpu();
  if (!gpu) {
    fmt::print("gpu: none (no CUDA device: cudaGetDeviceCount failed or found none)\n");
    if (!json_path.empty()) fmt::output_file(json_path).print("{{\"device\": false}}\n");
    return 3;
  }
  fmt::print("gpu: {}\npci bus: {}\n", crema::bench::describe(*gpu), gpu->pci_bus_id);
  if (!json_path.empty()) {
    fmt::output_file(json_path).print(
        "{{\"device\": true, \"name\": {}, \"compute_capability\": {}, \"memory_bytes\": {}, "
        "\"multiprocessors\": {}, \"pci_bus_id\": {}, \"driver\": {}, \"cuda_driver_api\": {}, "
        "\"cuda_runtime\": {}, \"pcie\": {}, \"description\": {}}}\n",
        json_string(gpu->name), json_string(gpu->compute_capability), gpu->memory_bytes,
        gpu->multiprocessors, json_string(gpu->pci_bus_id), json_string(gpu->driver),
        json_string(gpu->cuda_driver_api), json_string(gpu->cuda_runtime), json_string(gpu->pcie),
        json_string(crema::bench::describe(*gpu)));
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "crema-gpu-info: {}\n", e.what());
  return 1;
}
