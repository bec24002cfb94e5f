#pragma once

// What a GPU figure was measured on: the GPU and its memory, the driver, the CUDA runtime, and
// the PCIe link between host and GPU. The CUDA runtime gives the first; the driver's version and
// the link come from nvidia-smi, which ships with the driver ("unknown" where it cannot be run).

#include <crema/core/cuda/cuda_try.hpp>

#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crema::bench {

struct gpu_description {
  int device = 0;
  std::string name;
  std::string compute_capability;  // "9.0"
  std::size_t memory_bytes = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;          // "0000:3B:00.0"
  std::string cuda_driver_api;     // the CUDA version the driver supports, "13.0"
  std::string cuda_runtime;        // the runtime linked in, "13.0"
  std::string driver = "unknown";  // "580.159.04"
  std::string pcie = "unknown";    // "gen 5 x16 (at most gen 5 x16)"
};

// "13.0" from 13000.
inline std::string cuda_version_text(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

// The fields nvidia-smi prints for `query` (comma-separated field names) on the GPU `id`; empty
// where nvidia-smi cannot be run or does not know the GPU.
inline std::vector<std::string> nvidia_smi_fields(const std::string& id, std::string_view query) {
  const std::string command = fmt::format(
      "nvidia-smi --id={} --query-gpu={} --format=csv,noheader,nounits 2>/dev/null", id, query);
  std::string line;
  if (std::FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[512];
    if (std::fgets(buffer, sizeof buffer, pipe) != nullptr) line = buffer;
    (void)::pclose(pipe);
  }
  std::vector<std::string> fields;
  if (line.empty()) return fields;
  for (std::size_t start = 0;;) {
    const std::size_t comma = line.find(',', start);
    const std::string field = line.substr(start, comma - start);  // to the end past the last
    const auto first = field.find_first_not_of(" \t\r\n");
    const auto last = field.find_last_not_of(" \t\r\n");
    fields.push_back(first == std::string::npos ? "" : field.substr(first, last - first + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return fields;
}

// The GPU `device` as the CUDA runtime and nvidia-smi see it; nullopt where there is none.
inline std::optional<gpu_description> describe_gpu(int device = 0) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device >= count) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  cudaDeviceProp properties{};
  CREMA_CUDA_TRY(cudaGetDeviceProperties(&properties, device));
  gpu_description gpu;
  gpu.device = device;
  gpu.name = properties.name;
  gpu.compute_capability = fmt::format("{}.{}", properties.major, properties.minor);
  gpu.memory_bytes = properties.totalGlobalMem;
  gpu.multiprocessors = properties.multiProcessorCount;
  char bus_id[32] = {};
  CREMA_CUDA_TRY(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device));
  gpu.pci_bus_id = bus_id;
  int version = 0;
  if (cudaDriverGetVersion(&version) == cudaSuccess)
    gpu.cuda_driver_api = cuda_version_text(version);
  if (cudaRuntimeGetVersion(&version) == cudaSuccess) gpu.cuda_runtime = cuda_version_text(version);

  constexpr std::string_view query =
      "driver_version,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,"
      "pcie.link.width.max";
  auto fields = nvidia_smi_fields(gpu.pci_bus_id, query);
  if (fields.size() != 5) fields = nvidia_smi_fields(std::to_string(device), query);
  if (fields.size() == 5) {
    gpu.driver = fields[0];
    gpu.pcie =
        fmt::format("gen {} x{} (at most gen {} x{})", fields[1], fields[2], fields[3], fields[4]);
  }
  return gpu;
}

// One line: "NVIDIA H100 80GB HBM3 (compute 9.0, 79.2 GiB, 132 SMs), driver 580.159.04 (CUDA
// 13.0), runtime 13.0, PCIe gen 5 x16 (at most gen 5 x16)".
inline std::string describe(const gpu_description& gpu) {
  return fmt::format(
      "{} (compute {}, {:.1f} GiB, {} SMs), driver {} (CUDA {}), runtime {}, PCIe {}", gpu.name,
      gpu.compute_capability, static_cast<double>(gpu.memory_bytes) / (1024.0 * 1024 * 1024),
      gpu.multiprocessors, gpu.driver, gpu.cuda_driver_api, gpu.cuda_runtime, gpu.pcie);
}

}  // namespace crema::bench
