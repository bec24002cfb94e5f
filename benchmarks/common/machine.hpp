#pragma once

// What a figure was measured on: the processor's model and its cache sizes, as the kernel gives
// them. Figures from one machine say little about another, so every figure names both.

#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

namespace crema::bench {

// The processor's model name, as the kernel gives it .
inline std::string cpu_model() {
  std::string model = "unknown processor";
  if (std::FILE* info = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, info)) {
      const std::string_view text(line);
      if (text.starts_with("model name")) {
        const auto colon = text.find(':');
        if (colon != std::string_view::npos) {
          model = std::string(text.substr(colon + 2));
          if (!model.empty() && model.back() == '\n') model.pop_back();
        }
        break;
      }
    }
    std::fclose(info);
  }
  return model;
}

// The data caches of CPU 0, "L1d 48K, L2 2048K, L3 107520K", from sysfs ("unknown caches" where
// it says nothing).
inline std::string cache_sizes() {
  std::string caches;
  for (int index = 0; index < 8; ++index) {
    const std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(base + "/level");
    std::ifstream type_file(base + "/type");
    std::ifstream size_file(base + "/size");
    std::string level;
    std::string type;
    std::string size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction") continue;
    if (!caches.empty()) caches += ", ";
    caches += "L" + level + (type == "Data" ? "d " : " ") + size;
  }
  return caches.empty() ? "unknown caches" : caches;
}

// "<model> (<caches>)"
inline std::string machine_description() { return cpu_model() + " (" + cache_sizes() + ")"; }

}  // namespace crema::bench
