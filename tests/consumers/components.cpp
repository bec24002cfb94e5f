// A user's program that uses each component it was built with (CREMA_USES_<COMPONENT>), so that
// building it proves the component's headers compile and its libraries link, through the CMake
// package or through the pkg-config files alike. Prints what each did; exits 0 when all held.
#include <crema/crema.hpp>

#if defined(CREMA_USES_LMDB)
#include <crema/io/lmdb/lmdb_source.hpp>
#endif
#if defined(CREMA_USES_IMAGE)
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_transform.hpp>
#endif
#if defined(CREMA_USES_MPI)
#include <crema/collective/mpi/mpi_reducer.hpp>
#endif
#if defined(CREMA_USES_CUDA)
#include <crema/core/cuda/device.hpp>
#endif
#if defined(CREMA_USES_NCCL)
#include <crema/collective/nccl/nccl_reducer.hpp>
#endif
#if defined(CREMA_USES_NVJPEG)
#include <crema/io/nvjpeg/nvjpeg_try.hpp>
#endif
#if defined(CREMA_USES_HTTP)
#include <crema/io/http/http_storage.hpp>
#endif

#include <fmt/core.h>

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

int main() {
  int failures = 0;
  auto check = [&](bool held, const char* what) {
    fmt::print("components: {} {}\n", what, held ? "ok" : "FAILED");
    failures += held ? 0 : 1;
  };

  crema::synced_buffer<int> buffer(4);
  buffer.mutable_host()[1] = 5;
  check(buffer.device().size() == 4 && buffer.host()[1] == 5, "core synced_buffer");

#if defined(CREMA_USES_LMDB)
  try {
    crema::lmdb_source source("/nonexistent/crema-consumer.lmdb");
    check(false, "lmdb (opened a database that does not exist)");
  } catch (const crema::error& error) {
    check(std::string_view(error.what()).find("crema-consumer.lmdb") != std::string_view::npos,
          "lmdb error names the path");
  }
#endif
#if defined(CREMA_USES_IMAGE)
  {
    std::array<std::uint8_t, 3 * 8 * 8> pixels{};
    pixels.fill(200);
    const auto view = crema::image_view<std::uint8_t>::interleaved(pixels.data(), 3, 8, 8);
    std::vector<std::byte> png;
    crema::encode_png(view, png);
    crema::image_decoder decoder;
    const auto decoded = decoder.decode(png, "consumer.png");
    check(decoded.width == 8 && decoded(0, 3, 3) == 200, "image png round trip");
    // The transform's code is in the crema::image library (unless built header-only).
    crema::image_transform transform(
        {.geometry = crema::resize_center_crop{8, 4, 4}, .decode = {.channels = 3}});
    std::vector<std::uint8_t> sample(transform.shape().elements());
    transform(png, std::span<std::uint8_t>(sample), crema::sample_rng(1, 0, 0), "consumer.png");
    check(sample[0] == 200 && sample.back() == 200, "image transform linked");
  }
#endif
#if defined(CREMA_USES_MPI)
  {
    int initialized = 1;
    check(MPI_Initialized(&initialized) == MPI_SUCCESS && initialized == 0, "mpi linked");
    // The reducer's link to other ranks is in the crema::mpi library (unless built header-only):
    // made before MPI_Init, it refuses, naming why.
    std::vector<float> values(4);
    const std::array<int, 1> participant{0};
    try {
      crema::mpi::mpi_reducer<float> reducer(
          MPI_COMM_WORLD, crema::tree_topology::flat(participant), {std::span<float>(values)});
      check(false, "mpi reducer (made before MPI_Init)");
    } catch (const crema::mpi_error& error) {
      check(std::string_view(error.what()).find("MPI is not initialized") != std::string_view::npos,
            "mpi reducer linked");
    }
  }
#endif
#if defined(CREMA_USES_CUDA)
  check(crema::cuda::device_count() >= 0, "cuda runtime linked");
#endif
#if defined(CREMA_USES_NCCL)
  {
    int version = 0;
    check(ncclGetVersion(&version) == ncclSuccess && version > 0, "nccl linked");
  }
#endif
#if defined(CREMA_USES_NVJPEG)
  {
    int major = 0;
    check(nvjpegGetProperty(MAJOR_VERSION, &major) == NVJPEG_STATUS_SUCCESS && major > 0,
          "nvjpeg linked");
  }
#endif
#if defined(CREMA_USES_HTTP)
  {
    // The storage's code is in the crema::http library (unless built header-only).
    crema::http_options options;
    options.region = "eu-north-1";
    const crema::http_storage storage(options);
    check(storage.resolve("s3://bucket/key.tar") ==
              "https://bucket.s3.eu-north-1.amazonaws.com/key.tar",
          "http storage linked");
  }
#endif
  return failures == 0 ? 0 : 1;
}
