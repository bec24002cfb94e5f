#pragma once

// An nvJPEG that decodes on the host: the calls nvjpeg_batch_decoder makes, implemented with
// libjpeg-turbo (the CPU path's decoder, so the pixels are the CPU path's), for tests linked
// with it and the counting CUDA runtime instead of libnvjpeg and libcudart: the decoder's whole
// flow (planning, the hardware batch and the GPU-assisted path, the CPU fallback, errors) runs
// without a GPU. Its knobs say what the "GPU" has and does. fake_nvjpeg.cpp defines it.

#include <cstddef>

namespace crema::test::fake_nvjpeg {

/// What the fake GPU does; the defaults: a hardware engine that takes every baseline JPEG (and, as
/// nvjpeg.h says of the hardware backend, no progressive one).
struct behaviour {
  bool hardware_engine = true;      ///< nvjpegCreateEx with the hardware backend succeeds
  bool engine_takes_images = true;  ///< nvjpegDecodeBatchedSupportedEx takes baseline JPEGs
  bool batch_fails = false;         ///< nvjpegDecodeBatchedEx answers NVJPEG_STATUS_BAD_JPEG
  /// nvjpegDecodeBatchedPreAllocate answers NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED
  bool pool_refused = false;
  /// nvjpegDecodeJpegHost answers NVJPEG_STATUS_BAD_JPEG (from when it is set, for every handle)
  bool hybrid_fails = false;
};

/// Sets the behaviour (for the handles created after; `hybrid_fails` at once).
void set(const behaviour& how) noexcept;

/// Sets a behaviour for a test and the defaults again when the test ends, also when a failed
/// REQUIRE throws out of it: every test starts on the default fake GPU.
class scoped_behaviour {
 public:
  explicit scoped_behaviour(const behaviour& how = {}) noexcept { set(how); }
  scoped_behaviour(const scoped_behaviour&) = delete;
  scoped_behaviour& operator=(const scoped_behaviour&) = delete;
  ~scoped_behaviour() { set({}); }
};

/// Images decoded so far, by path, and streams parsed.
struct decoded {
  std::size_t batched = 0;  ///< by nvjpegDecodeBatchedEx
  std::size_t hybrid = 0;   ///< by nvjpegDecodeJpegDevice
  /// host phases (nvjpegDecodeJpegHost) of a decoder whose Huffman decoding is the host's
  /// (NVJPEG_BACKEND_HYBRID)
  std::size_t host_huffman = 0;
  /// host phases of a decoder whose Huffman decoding is the GPU's (NVJPEG_BACKEND_GPU_HYBRID)
  std::size_t gpu_huffman = 0;
  std::size_t parsed = 0;         ///< streams parsed by nvjpegJpegStreamParse
  std::size_t initialized = 0;    ///< batched states set up by nvjpegDecodeBatchedInitialize
  std::size_t pooled = 0;         ///< engine pools set up by nvjpegDecodeBatchedPreAllocate
  std::size_t pool_refusals = 0;  ///< nvjpegDecodeBatchedPreAllocate calls refused
  /// images nvjpegDecodeBatchedEx read from pageable memory, which a GPU's engine copies through
  /// the driver's staging (cudaPointerGetAttributes: not pinned)
  std::size_t pageable_inputs = 0;
};
decoded counts() noexcept;

/// nvJPEG objects alive now (handles, states, streams, parameters, buffers, decoders).
std::size_t live_objects() noexcept;
/// For `live_device_objects`: the objects of every device.
inline constexpr int any_device = -1;

/// Of those, the ones that stand for memory or work on `device` (the one current when they were
/// made): all but parsed streams and parameters. What is left undestroyed stays reachable, so that
/// LeakSanitizer passes it over.
std::size_t live_device_objects(int device = any_device) noexcept;

/// @brief Destroys every nvJPEG object alive, as the end of a process frees what a fault for good
/// left undestroyed: for a test that heals its runtime after such a fault (counting_cuda::heal)
/// and goes on. None may be in use. @return how many there were
std::size_t reclaim_objects() noexcept;

}  // namespace crema::test::fake_nvjpeg
