#pragma once

// The loader of one source over one batch transform, with its batches in host memory or, where
// the loader asks for a device (crema.Loader(device="cuda:N")), on that CUDA device.

#include "loader_core.hpp"

#if CREMA_PYTHON_CUDA
#include "device_batches.hpp"
#endif

#include <crema/core/error.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crema::python {

#if CREMA_PYTHON_CUDA
/// The loader over the source `make_source` makes and `transform`, whose batches are on a CUDA
/// device (`device_batch`, `nvjpeg_batch`).
template <class Source, class Transform>
[[nodiscard]] std::unique_ptr<loader_core> device_loader_of(std::function<Source()> make_source,
                                                            Transform transform,
                                                            const loader_spec& loader,
                                                            std::vector<std::string> classes = {}) {
  return std::make_unique<loader_model<Source, Transform, device_lease_batch>>(
      std::move(make_source), std::move(transform), loader.options, std::move(classes));
}
#endif

/// The loader over the source `make_source` makes and the batch transform
/// `make_transform(make_batch)` makes, where `make_batch` makes the slots' batches of element
/// type T: `python_batch<T>` on the host, `python_device_batch<T>` on `loader.device`.
/// @throws crema::config_error for a device in a build without CUDA
template <class T, class Source, class MakeTransform>
[[nodiscard]] std::unique_ptr<loader_core> loader_of(std::function<Source()> make_source,
                                                     MakeTransform make_transform,
                                                     const loader_spec& loader,
                                                     std::vector<std::string> classes = {}) {
  if (loader.device >= 0) {
#if CREMA_PYTHON_CUDA
    return device_loader_of(std::move(make_source),
                            make_transform(python_device_batch<T>{loader.device}), loader,
                            std::move(classes));
#else
    detail::fail<config_error>(
        "crema.Loader: device cuda:{} asked for, but this crema was built without CUDA (pip "
        "install . --config-settings cmake.define.CREMA_ENABLE_CUDA=ON where the CUDA toolkit is)",
        loader.device);
#endif
  }
  auto transform = make_transform(python_batch<T>{});
  return std::make_unique<loader_model<Source, decltype(transform)>>(
      std::move(make_source), std::move(transform), loader.options, std::move(classes));
}

}  // namespace crema::python
