// crema::cuda::synced_buffer on a GPU: uploads and downloads beside the raw CUDA copies of the
// same bytes between the same kinds of memory (pinned host memory, cudaMalloc), asynchronous
// (cudaMemcpyAsync, then waiting for the copy) and blocking (cudaMemcpy), at 1, 16, 64 and
// 256 MiB. For context, in the same run: the same copies from pageable memory (a heap vector at a
// 16-byte offset, as users' buffers are) and making a fresh 16 MiB pinned buffer.
// Target (docs/performance.md): at least 0.97 of the raw pinned bandwidth from 16 MiB up.
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/synced_buffer.hpp>

#include "gpu/gpu_benchmark.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr std::size_t mebibyte = std::size_t{1} << 20;
constexpr long sizes_mib[] = {1, 16, 64, 256};

std::size_t bytes_of(const benchmark::State& state) {
  return static_cast<std::size_t>(state.range(0)) * mebibyte;
}
void by_size(benchmark::internal::Benchmark* bench) {
  for (const long mib : sizes_mib) bench->Arg(mib);
  bench->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void count_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes_of(state)));
}

using crema::bench::gpu::device_memory;
using crema::bench::gpu::pinned_memory;

// A user's buffer: on the heap, 16 bytes past the allocator's alignment.
struct pageable_memory {
  std::vector<std::byte> storage;
  std::byte* data;
  explicit pageable_memory(std::size_t bytes)
      : storage(bytes + 16, std::byte{1}), data(storage.data() + 16) {}
};

// A buffer with both sides allocated and written, the head `synced`.
crema::cuda::synced_buffer<float> warm_buffer(std::size_t bytes, crema::cuda_stream& stream) {
  crema::cuda::synced_buffer<float> buffer(bytes / sizeof(float));
  std::ranges::fill(buffer.mutable_host(), 1.0f);
  buffer.upload_async(stream);
  buffer.wait();
  return buffer;
}

// crema: the host wrote (the head moves, nothing is copied), the upload starts on the stream,
// the host waits for it.
void crema_upload(benchmark::State& state) {
  crema::cuda_stream stream;
  auto buffer = warm_buffer(bytes_of(state), stream);
  for (auto _ : state) {
    (void)buffer.mutable_host();
    buffer.upload_async(stream);
    buffer.wait();
  }
  count_bytes(state);
}
void crema_download(benchmark::State& state) {
  crema::cuda_stream stream;
  auto buffer = warm_buffer(bytes_of(state), stream);
  for (auto _ : state) {
    (void)buffer.mutable_device();
    buffer.download_async(stream);
    buffer.wait();
  }
  count_bytes(state);
}
// Blocking: reading the other side copies it there and returns when it is there.
void crema_upload_blocking(benchmark::State& state) {
  crema::cuda_stream stream;
  auto buffer = warm_buffer(bytes_of(state), stream);
  for (auto _ : state) {
    (void)buffer.mutable_host();
    benchmark::DoNotOptimize(buffer.device().data());
  }
  count_bytes(state);
}
void crema_download_blocking(benchmark::State& state) {
  crema::cuda_stream stream;
  auto buffer = warm_buffer(bytes_of(state), stream);
  for (auto _ : state) {
    (void)buffer.mutable_device();
    benchmark::DoNotOptimize(buffer.host().data());
  }
  count_bytes(state);
}

// The raw CUDA runtime on the same kinds of memory.
template <cudaMemcpyKind Kind, class Host>
void raw_async(benchmark::State& state) {
  const std::size_t bytes = bytes_of(state);
  Host host(bytes);
  device_memory device(bytes);
  crema::cuda_stream stream;
  void* destination = Kind == cudaMemcpyHostToDevice ? device.data : static_cast<void*>(host.data);
  const void* source = Kind == cudaMemcpyHostToDevice ? static_cast<void*>(host.data) : device.data;
  for (auto _ : state) {
    CREMA_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, Kind, stream.native_handle()));
    CREMA_CUDA_TRY(cudaStreamSynchronize(stream.native_handle()));
  }
  count_bytes(state);
}
template <cudaMemcpyKind Kind>
void raw_blocking(benchmark::State& state) {
  const std::size_t bytes = bytes_of(state);
  pinned_memory host(bytes);
  device_memory device(bytes);
  void* destination = Kind == cudaMemcpyHostToDevice ? device.data : host.data;
  const void* source = Kind == cudaMemcpyHostToDevice ? host.data : device.data;
  for (auto _ : state) CREMA_CUDA_TRY(cudaMemcpy(destination, source, bytes, Kind));
  count_bytes(state);
}

// What making a fresh pinned buffer per batch would cost instead of keeping one.
void fresh_pinned_buffer(benchmark::State& state) {
  const std::size_t bytes = bytes_of(state);
  for (auto _ : state) {
    void* data = nullptr;
    CREMA_CUDA_TRY(cudaHostAlloc(&data, bytes, cudaHostAllocDefault));
    CREMA_CUDA_TRY(cudaFreeHost(data));
  }
  count_bytes(state);
}

BENCHMARK(crema_upload)->Name("crema/upload")->Apply(by_size);
BENCHMARK(raw_async<cudaMemcpyHostToDevice, pinned_memory>)
    ->Name("baseline/upload")
    ->Apply(by_size);
BENCHMARK(crema_download)->Name("crema/download")->Apply(by_size);
BENCHMARK(raw_async<cudaMemcpyDeviceToHost, pinned_memory>)
    ->Name("baseline/download")
    ->Apply(by_size);
BENCHMARK(crema_upload_blocking)->Name("crema/upload_blocking")->Apply(by_size);
BENCHMARK(raw_blocking<cudaMemcpyHostToDevice>)->Name("baseline/upload_blocking")->Apply(by_size);
BENCHMARK(crema_download_blocking)->Name("crema/download_blocking")->Apply(by_size);
BENCHMARK(raw_blocking<cudaMemcpyDeviceToHost>)->Name("baseline/download_blocking")->Apply(by_size);
BENCHMARK(raw_async<cudaMemcpyHostToDevice, pageable_memory>)
    ->Name("reference/upload_pageable")
    ->Apply(by_size);
BENCHMARK(raw_async<cudaMemcpyDeviceToHost, pageable_memory>)
    ->Name("reference/download_pageable")
    ->Apply(by_size);
BENCHMARK(fresh_pinned_buffer)
    ->Name("reference/fresh_pinned_buffer")
    ->Arg(16)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Bandwidth in GB/s of a case run at `mib`, from its time per copy; 0 if it did not run.
double gigabytes_per_second(const crema::bench::ratio_reporter& reporter, const char* name,
                            long mib) {
  const double nanoseconds = reporter.nanoseconds(fmt::format("{}/{}/real_time", name, mib));
  return nanoseconds > 0 ? static_cast<double>(mib) * static_cast<double>(mebibyte) / nanoseconds
                         : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  return crema::bench::gpu::run_on_gpu(
      argc, argv, "synced_buffer on a GPU", [](const crema::bench::ratio_reporter& reporter) {
        fmt::print("\nbandwidth, GB/s (crema / raw pinned; target >= 0.97 from 16 MiB up)\n");
        fmt::print("{:>8} {:>22} {:>22} {:>9} {:>9} {:>9}\n", "MiB", "upload crema/raw",
                   "download crema/raw", "up ratio", "down", "pageable up/down");
        for (const long mib : sizes_mib) {
          const double up = gigabytes_per_second(reporter, "crema/upload", mib);
          const double up_raw = gigabytes_per_second(reporter, "baseline/upload", mib);
          const double down = gigabytes_per_second(reporter, "crema/download", mib);
          const double down_raw = gigabytes_per_second(reporter, "baseline/download", mib);
          fmt::print(
              "{:>8} {:>10.2f} / {:<9.2f} {:>10.2f} / {:<9.2f} {:>9.3f} {:>9.3f} {:>6.2f} / "
              "{:.2f}\n",
              mib, up, up_raw, down, down_raw, up_raw > 0 ? up / up_raw : 0.0,
              down_raw > 0 ? down / down_raw : 0.0,
              gigabytes_per_second(reporter, "reference/upload_pageable", mib),
              gigabytes_per_second(reporter, "reference/download_pageable", mib));
        }
        const double fresh_ns = reporter.nanoseconds("reference/fresh_pinned_buffer/16/real_time");
        fmt::print("a fresh 16 MiB pinned buffer (cudaHostAlloc + cudaFreeHost): {:.2f} ms\n",
                   fresh_ns / 1e6);
      });
}
