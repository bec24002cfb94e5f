#pragma once

// What the GPU benchmarks share: raw CUDA memory for their baselines, and a main that runs them
// where there is a GPU and names it beside the figures.

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>

#include "common/ratio_report.hpp"
#include "gpu/gpu_machine.hpp"
#include "gpu/kernels.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>
#include <sys/resource.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace crema::bench::gpu {

// cudaMalloc'd memory, zeroed once so that no first touch is timed.
struct device_memory {
  void* data = nullptr;
  explicit device_memory(std::size_t bytes) {
    CREMA_CUDA_TRY(cudaMalloc(&data, bytes));
    CREMA_CUDA_TRY(cudaMemset(data, 0, bytes));
  }
  ~device_memory() { (void)cudaFree(data); }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  [[nodiscard]] float* floats() const { return static_cast<float*>(data); }
};

// cudaHostAlloc'd (pinned) memory, written once.
struct pinned_memory {
  void* data = nullptr;
  explicit pinned_memory(std::size_t bytes) {
    CREMA_CUDA_TRY(cudaHostAlloc(&data, bytes, cudaHostAllocDefault));
    std::memset(data, 1, bytes);
  }
  ~pinned_memory() { (void)cudaFreeHost(data); }
  pinned_memory(const pinned_memory&) = delete;
  pinned_memory& operator=(const pinned_memory&) = delete;
};

// The consumer's step that costs nothing, on a lease of a CUDA device_batch: `compute` waits for
// the batch's upload (the host does not), a kernel reads each record's first value into `sink`,
// and the slot goes back once that kernel is done. Returns the records the batch held.
template <class Lease>
std::size_t touch_and_release(Lease& batch, crema::cuda_stream& compute, float* sink) {
  const auto data = batch->device(compute).data;
  const std::size_t records = batch->size();
  touch_records(data.data(), batch->shape().elements(), records, sink, compute.native_handle());
  batch.release_after(compute.record());
  return records;
}

// What the whole process spent on the host over a benchmark's timed runs, per sample: the profile
// a feed that stops scaling asks for first. Where more producers give fewer samples a second,
// either each sample costs the host more (CPU and system time up: contention in the runtime or
// a library; voluntary switches up: threads sleeping on each other) or the host waits for the
// device (the same CPU a sample). Make it after the untimed warm-up, count after the loop.
class host_cost {
 public:
  host_cost() noexcept : start_(now()) {}

  // Counters: host_cpu_us (user and system, every thread, per sample), host_system_share,
  // sleeps and preemptions (voluntary and involuntary context switches, per 1,000 samples).
  void count(benchmark::State& state, double samples) const {
    const usage end = now();
    if (samples <= 0) return;
    const double cpu = end.user_s + end.system_s - start_.user_s - start_.system_s;
    state.counters["host_cpu_us"] = cpu / samples * 1e6;
    state.counters["host_system_share"] = cpu > 0 ? (end.system_s - start_.system_s) / cpu : 0.0;
    state.counters["sleeps_per_1k"] = (end.sleeps - start_.sleeps) / samples * 1e3;
    state.counters["preemptions_per_1k"] = (end.preemptions - start_.preemptions) / samples * 1e3;
  }

 private:
  struct usage {
    double user_s = 0;
    double system_s = 0;
    double sleeps = 0;
    double preemptions = 0;
  };
  static usage now() noexcept {
    rusage r{};
    (void)getrusage(RUSAGE_SELF, &r);
    const auto seconds = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
    };
    return {seconds(r.ru_utime), seconds(r.ru_stime), static_cast<double>(r.ru_nvcsw),
            static_cast<double>(r.ru_nivcsw)};
  }

  usage start_;
};

// The benchmarks' main: exits 3 (after the line CTest reads as "skipped") where there is no GPU;
// else runs the registered benchmarks with their ratios, then `epilogue(reporter)`, then names
// the GPU as it is after the runs (a PCIe link idles at a lower speed until used).
// CREMA_BENCH_DEVICE_SCHEDULE (spin, yield or blocking) sets how the runtime's host threads wait
// for the device (cudaSetDeviceFlags) before anything is run, to see what its waits cost the
// host; unset, the runtime's default (it spins while the host has a core for every context).
template <class Epilogue>
int run_on_gpu(int argc, char** argv, std::string_view title, Epilogue epilogue) {
  const auto gpu = describe_gpu();
  if (!gpu) {
    fmt::print("crema-test-skip: no CUDA device; GPU benchmarks need one\n");
    return 3;
  }
  benchmark::AddCustomContext("gpu", describe(*gpu));
  if (const char* schedule = std::getenv("CREMA_BENCH_DEVICE_SCHEDULE"); schedule != nullptr) {
    const std::string_view chosen(schedule);
    const unsigned flags = chosen == "spin"    ? cudaDeviceScheduleSpin
                           : chosen == "yield" ? cudaDeviceScheduleYield
                                               : cudaDeviceScheduleBlockingSync;
    CREMA_CUDA_TRY(cudaSetDeviceFlags(flags));
    benchmark::AddCustomContext("device_schedule", std::string(chosen));
  }
  return run_with_ratios(argc, argv, title, [&](const ratio_reporter& reporter) {
    epilogue(reporter);
    const auto after = describe_gpu();
    fmt::print("gpu: {}\n", describe(after ? *after : *gpu));
  });
}

}  // namespace crema::bench::gpu
