// Loaders whose JPEGs nvJPEG decodes on the loader's device and crema's kernels resample there
// (crema::cuda::nvjpeg_batcher): image folders, list files, shards and LMDBs of encoded Datums.
// Compiled by nvcc (the kernels); in the tests' build on the counting CUDA runtime, by the C++
// compiler against the fake nvJPEG, with the kernels' functions run on the host.
#include "image_sources.hpp"
#include "loader_models.hpp"

#if CREMA_PYTHON_COUNTING_CUDA
#include <crema/io/nvjpeg/nvjpeg_batcher.hpp>

#include "cuda/host_nvjpeg_decoder.hpp"
#else
#include <crema/io/nvjpeg/nvjpeg_batcher.cuh>
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crema::python {
namespace {

#if CREMA_PYTHON_COUNTING_CUDA
using gpu_decoder = test::host_nvjpeg_decoder;
#else
using gpu_decoder = cuda::nvjpeg_batch_decoder;
#endif

template <class T>
std::unique_ptr<loader_core> nvjpeg_loader(const source_spec& source, const image_spec& spec,
                                           const loader_spec& loader) {
  const cuda::basic_nvjpeg_batcher<T, gpu_decoder, std::int64_t> batcher(
      image_options(spec), {.devices = {loader.device}});
#if CREMA_PYTHON_LMDB
  if (source.kind == "lmdb") {
    return device_loader_of(prepared_lmdb(source, loader.options.seed), batcher, loader);
  }
#endif
  // Streamed shards are decoded on the CPU: their pipelines compiled once more by nvcc would
  // cost every CUDA build minutes for a combination no one has asked for yet.
  return with_file_source<false>(
      source, loader.options.seed, [&](auto make, std::vector<std::string> classes) {
        return device_loader_of(std::move(make), batcher, loader, std::move(classes));
      });
}

}  // namespace

std::unique_ptr<loader_core> make_nvjpeg_loader(const source_spec& source,
                                                const image_spec& transform,
                                                const loader_spec& loader) {
  return transform.bytes ? nvjpeg_loader<std::uint8_t>(source, transform, loader)
                         : nvjpeg_loader<float>(source, transform, loader);
}

}  // namespace crema::python
