// crema._crema: the loader behind crema.Loader, its batches handed to Python through DLPack
// without a copy, and crema's errors as Python exceptions that keep their whole chain. The
// package's Python side (python/src/crema) checks the arguments and speaks the iteration
// protocol; every byte of a batch is made here, by crema's headers.
#include "loader_core.hpp"

#include <crema/core/error.hpp>
#include <crema/io/shards/shard_list.hpp>
#include <crema/version.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#if CREMA_PYTHON_COUNTING_CUDA
#include "cuda/counting_runtime.hpp"
#endif

#include <Python.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

namespace nb = nanobind;

namespace crema::python {
namespace {

// crema's exception types as Python classes (made once, in the module's init).
struct python_errors {
  PyObject* error = nullptr;     // crema.Error(RuntimeError): every crema error
  PyObject* config = nullptr;    // crema.ConfigError(Error, ValueError)
  PyObject* format = nullptr;    // crema.FormatError(Error, ValueError)
  PyObject* pipeline = nullptr;  // crema.PipelineError(Error)
  PyObject* io = nullptr;        // crema.IOError(Error, OSError)
  PyObject* lmdb = nullptr;      // crema.LMDBError(Error)
};
python_errors errors;

PyObject* python_type_of(const std::exception& error) {
  if (dynamic_cast<const config_error*>(&error) != nullptr) return errors.config;
  if (dynamic_cast<const format_error*>(&error) != nullptr) return errors.format;
  if (dynamic_cast<const pipeline_error*>(&error) != nullptr) return errors.pipeline;
  if (dynamic_cast<const io_error*>(&error) != nullptr) return errors.io;
  if (dynamic_cast<const lmdb_error*>(&error) != nullptr) return errors.lmdb;
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return PyExc_MemoryError;
  return errors.error;
}

// The Python exception for `error` and the causes nested in it: each one's message holds the
// messages of its causes after its own (what a log shows), and its __cause__ is the next one
// (what `raise ... from` gives), so both the text and the chain say what failed where.
nb::object python_exception_of(const std::exception& error, std::string* chain) {
  nb::object cause;
  std::string cause_text;
  try {
    std::rethrow_if_nested(error);
  } catch (const std::exception& inner) {
    cause = python_exception_of(inner, &cause_text);
  } catch (...) {
    cause_text = "an exception that is not a std::exception";
  }
  std::string text = error.what();
  if (!cause_text.empty()) text += "\n  because: " + cause_text;
  if (chain != nullptr) *chain = text;
  PyObject* type = python_type_of(error);
  nb::object exception = nb::steal(PyObject_CallFunction(type, "s", text.c_str()));
  if (!exception.is_valid()) throw nb::python_error();
  if (cause.is_valid()) PyException_SetCause(exception.ptr(), cause.release().ptr());
  return exception;
}

void translate(const std::exception_ptr& thrown, void*) {
  try {
    std::rethrow_exception(thrown);
  } catch (const crema::error& error) {
    const nb::object exception = python_exception_of(error, nullptr);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  }
}

PyObject* make_error(nb::module_& module, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("crema.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw nb::python_error();
  module.attr(name) = nb::handle(type);
  return type;
}

// What a batch's arrays keep alive: the batch (its lease) and the count of batches held.
struct batch_owner {
  std::unique_ptr<held_batch> batch;
  std::shared_ptr<std::atomic<std::size_t>> held;
  ~batch_owner() { held->fetch_sub(1, std::memory_order_relaxed); }
};

enum class output_kind { torch, numpy, dlpack };

// Where an array's bytes are, as DLPack says it: host memory, or a CUDA device.
struct array_place {
  int device_type = nb::device::cpu::value;
  int device_id = 0;

  static array_place of(const held_batch& batch) {
    if (batch.device < 0) return {};
    return {nb::device::cuda::value, batch.device};
  }
};

template <class Framework>
nb::object export_array(void* data, std::size_t ndim, const std::size_t* shape,
                        nb::dlpack::dtype dtype, nb::handle owner, array_place place) {
  nb::ndarray<Framework> array(data, ndim, shape, owner, nullptr, dtype, place.device_type,
                               place.device_id);
  return nb::cast(std::move(array));
}

nb::object as_array(output_kind output, void* data, std::size_t ndim, const std::size_t* shape,
                    nb::dlpack::dtype dtype, nb::handle owner, array_place place) {
  switch (output) {
    case output_kind::torch:
      return export_array<nb::pytorch>(data, ndim, shape, dtype, owner, place);
    case output_kind::numpy:
      return export_array<nb::numpy>(data, ndim, shape, dtype, owner, place);
    case output_kind::dlpack:
      break;
  }
  return export_array<nb::array_api>(data, ndim, shape, dtype, owner, place);
}

// One array of a device batch, for output="dlpack": the consumer names its stream in
// `__dlpack__(stream=...)`, which waits there for the upload (without blocking the host) and has
// the slot refilled only after that stream's work on it. The DLPack protocol's streams for CUDA:
// None is the legacy default stream (1), -1 asks for no synchronisation (the host waits for the
// upload here, and the consumer orders its own work), 0 is refused as ambiguous.
class device_array {
 public:
  device_array(nb::capsule owner, held_batch* batch, bool labels, std::vector<std::size_t> shape,
               nb::dlpack::dtype dtype)
      : owner_(std::move(owner)),
        batch_(batch),
        labels_(labels),
        shape_(std::move(shape)),
        dtype_(dtype) {}

  nb::object dlpack(const nb::args& positional, nb::kwargs rest) {
    if (positional.size() != 0) throw nb::type_error("__dlpack__ takes keyword arguments only");
    nb::object stream = nb::none();
    if (rest.contains("stream")) {
      stream = rest["stream"];
      PyDict_DelItemString(rest.ptr(), "stream");
    }
    std::intptr_t handle = 1;  // DLPack: None is CUDA's legacy default stream
    if (!stream.is_none()) {
      if (!nb::isinstance<nb::int_>(stream)) {
        throw nb::type_error("__dlpack__: stream must be an integer (a cudaStream_t) or None");
      }
      handle = nb::cast<std::intptr_t>(stream);
      if (handle == 0) {
        throw nb::value_error(
            "__dlpack__: stream 0 is ambiguous for CUDA (DLPack); pass 1 for the legacy default "
            "stream, 2 for the per-thread one, or the stream's handle");
      }
      if (handle < held_batch::no_sync) {
        throw nb::value_error("__dlpack__: stream must be -1, 1, 2 or a stream's handle");
      }
    }
    // Under the GIL: the batch's two arrays may be taken by two threads at once, and a batch is
    // used by one thread at a time. A stream's wait is queued, not waited for; only -1 waits (for
    // an upload already started).
    batch_->use_on(handle);
    void* data = labels_ ? static_cast<void*>(batch_->labels) : batch_->data;
    nb::object array = export_array<nb::array_api>(data, shape_.size(), shape_.data(), dtype_,
                                                   owner_, array_place::of(*batch_));
    return array.attr("__dlpack__")(**rest);
  }

  nb::tuple dlpack_device() const {
    const array_place place = array_place::of(*batch_);
    return nb::make_tuple(place.device_type, place.device_id);
  }
  nb::tuple shape() const {
    nb::list dims;
    for (const std::size_t dim : shape_) dims.append(dim);
    return nb::tuple(dims);
  }

 private:
  nb::capsule owner_;  // keeps the batch (its slot) alive
  held_batch* batch_;
  bool labels_;
  std::vector<std::size_t> shape_;
  nb::dlpack::dtype dtype_;
};

// The loader as the Python class crema._crema.Loader sees it.
class python_loader {
 public:
  python_loader(std::unique_ptr<loader_core> core, bool bytes, bool hwc)
      : core_(std::move(core)), bytes_(bytes), hwc_(hwc) {}
  python_loader(const python_loader&) = delete;
  python_loader& operator=(const python_loader&) = delete;
  ~python_loader() { close(); }

  std::uint64_t batches_per_epoch() const { return live().batches_per_epoch(); }
  std::uint64_t records_per_epoch() const { return live().records_per_epoch(); }
  std::size_t slots() const { return live().slots(); }
  std::size_t held() const { return held_->load(std::memory_order_relaxed); }
  std::string key() const { return live().key(); }
  std::vector<std::string> classes() const { return live().classes(); }
  bool running() const { return core_ != nullptr && core_->running(); }
  std::pair<std::uint64_t, std::uint64_t> position() const {
    const loader_position at = live().position();
    return {at.epoch, at.batch};
  }
  void seek(std::uint64_t epoch, std::uint64_t batch) { live().seek({epoch, batch}); }
  std::string stats() const { return live().stats(); }

  // The next batch of the epoch as (images, labels), or None at its end. Waits with the GIL
  // released, looking for signals (Ctrl-C) every `poll` so that a wait ends promptly. A device
  // batch as torch tensors is used on `stream` (PyTorch's current stream, a cudaStream_t as an
  // integer); as DLPack objects, on the stream their consumer names.
  nb::object next(output_kind output, std::intptr_t stream) {
    loader_core& core = live();
    const std::size_t slots = core.slots();
    if (held_->load(std::memory_order_relaxed) >= slots) {
      nb::object exception = nb::steal(PyObject_CallFunction(
          errors.pipeline, "s",
          fmt::format("crema.Loader: all {} batch slots are held by batches still in use, so no "
                      "batch can be made; keep copies of the batches you keep (.clone() or "
                      "copy=True) or raise prefetch",
                      slots)
              .c_str()));
      PyErr_SetObject(errors.pipeline, exception.ptr());
      throw nb::python_error();
    }
    std::unique_ptr<held_batch> batch;
    for (;;) {
      pull_status status = pull_status::timeout;
      {
        nb::gil_scoped_release unlocked;
        status = core.next_for(poll, batch);
      }
      if (status == pull_status::ready) break;
      if (status == pull_status::end) return nb::none();
      if (status == pull_status::stopped) {
        detail::fail<state_error>("crema.Loader: closed; make a new loader");
      }
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    }
    if (batch->device >= 0 && output != output_kind::dlpack) {
      nb::gil_scoped_release unlocked;
      batch->use_on(stream);
    }
    return arrays_of(std::move(batch), output);
  }

  // Stops and joins the producers (batches handed out stay valid). Idempotent.
  void close() {
    if (core_ == nullptr) return;
    nb::gil_scoped_release unlocked;  // producers never take it; joining them needs no lock
    core_->close();
  }

  // After fork(), in the child: the producers' threads do not exist there, so the loader is let
  // go without joining them (its memory is the child's to lose, not to free).
  void abandon() noexcept { (void)core_.release(); }

 private:
  static constexpr std::chrono::milliseconds poll{50};

  loader_core& live() const {
    if (core_ == nullptr) {
      detail::fail<state_error>(
          "crema.Loader: this loader's threads were started in another process (before a "
          "fork); make a new loader in this one");
    }
    return *core_;
  }

  nb::object arrays_of(std::unique_ptr<held_batch> batch, output_kind output) {
    const record_shape shape = core_->sample_shape();
    const std::size_t records = batch->size;
    void* data = batch->data;
    std::int64_t* labels = batch->labels;
    held_->fetch_add(1, std::memory_order_relaxed);
    auto* owner = new batch_owner{std::move(batch), held_};
    nb::capsule keeper(owner, [](void* kept) noexcept { delete static_cast<batch_owner*>(kept); });
    const std::size_t image_shape[4] = {records, hwc_ ? shape.height : shape.channels,
                                        hwc_ ? shape.width : shape.height,
                                        hwc_ ? shape.channels : shape.width};
    const std::size_t label_shape[1] = {records};
    const nb::dlpack::dtype image_type = bytes_ ? nb::dtype<std::uint8_t>() : nb::dtype<float>();
    const array_place place = array_place::of(*owner->batch);
    if (place.device_type != nb::device::cpu::value && output == output_kind::dlpack) {
      held_batch* held = owner->batch.get();
      return nb::make_tuple(
          device_array(keeper, held, false, {image_shape, image_shape + 4}, image_type),
          device_array(keeper, held, true, {records}, nb::dtype<std::int64_t>()));
    }
    nb::object images = as_array(output, data, 4, image_shape, image_type, keeper, place);
    nb::object targets =
        as_array(output, labels, 1, label_shape, nb::dtype<std::int64_t>(), keeper, place);
    return nb::make_tuple(images, targets);
  }

  std::unique_ptr<loader_core> core_;
  bool bytes_;
  bool hwc_;
  std::shared_ptr<std::atomic<std::size_t>> held_ = std::make_shared<std::atomic<std::size_t>>(0);
};

template <class Make, class Spec>
std::unique_ptr<python_loader> make_loader(Make make, const source_spec& source,
                                           const Spec& transform, const loader_spec& loader,
                                           bool hwc) {
  std::unique_ptr<loader_core> core;
  {
    nb::gil_scoped_release unlocked;  // a large folder takes a while to scan
    core = make(source, transform, loader);
  }
  return std::make_unique<python_loader>(std::move(core), transform.bytes, hwc);
}

}  // namespace
}  // namespace crema::python

NB_MODULE(_crema, module) {
  using namespace crema::python;
  namespace c = crema;
  module.doc() = "crema's C++ data pipeline, behind crema.Loader";
  module.attr("__version__") =
      fmt::format("{}.{}.{}", CREMA_VERSION_MAJOR, CREMA_VERSION_MINOR, CREMA_VERSION_PATCH);

  errors.error = make_error(module, "Error", PyExc_RuntimeError,
                            "Every error crema reports; its message names what is at fault.");
  const auto bases = [](PyObject* first, PyObject* second) {
    return nb::make_tuple(nb::handle(first), nb::handle(second));
  };
  errors.config = make_error(module, "ConfigError", bases(errors.error, PyExc_ValueError).ptr(),
                             "An option or a data set that cannot work, named.");
  errors.format = make_error(module, "FormatError", bases(errors.error, PyExc_ValueError).ptr(),
                             "A record or file that does not decode, named by its key or path.");
  errors.pipeline = make_error(module, "PipelineError", errors.error,
                               "A failure in the pipeline: a record, a stall, a held slot.");
  errors.io = make_error(module, "IOError", bases(errors.error, PyExc_OSError).ptr(),
                         "A file or folder that cannot be read, named.");
  errors.lmdb = make_error(module, "LMDBError", errors.error, "LMDB failed, on the path named.");
  nb::register_exception_translator(&translate);

  nb::dict info;
  info["version"] = module.attr("__version__");
  info["image"] = true;
  info["lmdb"] = CREMA_PYTHON_LMDB != 0;
  info["cuda"] = CREMA_PYTHON_CUDA != 0;
  // Tests only: the CUDA runtime is tests/cuda/counting_runtime.cpp, no GPU behind it.
  info["counting_cuda"] = CREMA_PYTHON_COUNTING_CUDA != 0;
  info["nvjpeg"] = CREMA_PYTHON_NVJPEG != 0;
  info["mpi"] = CREMA_PYTHON_MPI != 0;
  info["http"] = CREMA_PYTHON_HTTP != 0;
  module.attr("_build_info") = info;

  // The shards a pattern names (brace groups, then globs), as crema::shard_paths finds them.
  module.def("shard_paths", [](const std::string& pattern) { return c::shard_paths(pattern); });

  nb::enum_<c::shard_balance>(module, "ShardBalance")
      .value("none", c::shard_balance::none)
      .value("pad", c::shard_balance::pad)
      .value("drop", c::shard_balance::drop);
  nb::enum_<c::partial_batch>(module, "PartialBatch")
      .value("keep", c::partial_batch::keep)
      .value("drop", c::partial_batch::drop)
      .value("pad", c::partial_batch::pad);
  nb::enum_<output_kind>(module, "Output")
      .value("torch", output_kind::torch)
      .value("numpy", output_kind::numpy)
      .value("dlpack", output_kind::dlpack);

  nb::class_<http_spec>(module, "HTTPSpec")
      .def(nb::init<>())
      .def_rw("retries", &http_spec::retries)
      .def_rw("backoff_s", &http_spec::backoff_s)
      .def_rw("most_backoff_s", &http_spec::most_backoff_s)
      .def_rw("connect_timeout_s", &http_spec::connect_timeout_s)
      .def_rw("request_timeout_s", &http_spec::request_timeout_s)
      .def_rw("stall_timeout_s", &http_spec::stall_timeout_s)
      .def_rw("aws_sigv4", &http_spec::aws_sigv4)
      .def_rw("s3_endpoint", &http_spec::s3_endpoint)
      .def_rw("region", &http_spec::region)
      .def_rw("headers", &http_spec::headers)
      .def_rw("cache_bytes", &http_spec::cache_bytes)
      .def_rw("chunk_bytes", &http_spec::chunk_bytes)
      .def_rw("ca_file", &http_spec::ca_file);

  nb::class_<source_spec>(module, "SourceSpec")
      .def(nb::init<>())
      .def_rw("kind", &source_spec::kind)
      .def_rw("path", &source_spec::path)
      .def_rw("root", &source_spec::root)
      .def_rw("extensions", &source_spec::extensions)
      .def_rw("shards", &source_spec::shards)
      .def_rw("indexes", &source_spec::indexes)
      .def_rw("http", &source_spec::http)
      .def_rw("shard_blocks", &source_spec::shard_blocks)
      .def_rw("stream", &source_spec::stream)
      .def_rw("shuffle_buffer", &source_spec::shuffle_buffer)
      .def_rw("epoch_samples", &source_spec::epoch_samples)
      .def_rw("image_feature", &source_spec::image_feature)
      .def_rw("label_feature", &source_spec::label_feature)
      .def_rw("shuffle", &source_spec::shuffle)
      .def_rw("rank", &source_spec::rank)
      .def_rw("world", &source_spec::world)
      .def_rw("balance", &source_spec::balance);
  nb::class_<image_spec>(module, "ImageSpec")
      .def(nb::init<>())
      .def_rw("random_crop", &image_spec::random_crop)
      .def_rw("height", &image_spec::height)
      .def_rw("width", &image_spec::width)
      .def_rw("scale_low", &image_spec::scale_low)
      .def_rw("scale_high", &image_spec::scale_high)
      .def_rw("ratio_low", &image_spec::ratio_low)
      .def_rw("ratio_high", &image_spec::ratio_high)
      .def_rw("resize", &image_spec::resize)
      .def_rw("flip", &image_spec::flip)
      .def_rw("jitter", &image_spec::jitter)
      .def_rw("mean", &image_spec::mean)
      .def_rw("std", &image_spec::std)
      .def_rw("bytes", &image_spec::bytes)
      .def_rw("hwc", &image_spec::hwc)
      .def_rw("reduced_detail", &image_spec::reduced_detail)
      .def_rw("nvjpeg", &image_spec::nvjpeg);
  nb::class_<caffe_spec>(module, "CaffeSpec")
      .def(nb::init<>())
      .def_rw("crop", &caffe_spec::crop)
      .def_rw("mirror", &caffe_spec::mirror)
      .def_rw("training", &caffe_spec::training)
      .def_rw("mean_file", &caffe_spec::mean_file)
      .def_rw("mean_values", &caffe_spec::mean_values)
      .def_rw("scale", &caffe_spec::scale)
      .def_rw("bytes", &caffe_spec::bytes);
  nb::class_<loader_spec>(module, "LoaderSpec")
      .def(nb::init<>())
      .def_prop_rw(
          "batch_size", [](const loader_spec& s) { return s.options.batch_size; },
          [](loader_spec& s, std::size_t value) { s.options.batch_size = value; })
      .def_prop_rw(
          "threads", [](const loader_spec& s) { return s.options.threads; },
          [](loader_spec& s, std::size_t value) { s.options.threads = value; })
      .def_prop_rw(
          "prefetch", [](const loader_spec& s) { return s.options.prefetch; },
          [](loader_spec& s, std::size_t value) { s.options.prefetch = value; })
      .def_prop_rw(
          "seed", [](const loader_spec& s) { return s.options.seed; },
          [](loader_spec& s, std::uint64_t value) { s.options.seed = value; })
      .def_prop_rw(
          "last_batch", [](const loader_spec& s) { return s.options.last_batch; },
          [](loader_spec& s, c::partial_batch value) { s.options.last_batch = value; })
      .def_prop_rw(
          "stall_timeout_ms", [](const loader_spec& s) { return s.options.stall_timeout.count(); },
          [](loader_spec& s, std::int64_t value) {
            s.options.stall_timeout = std::chrono::milliseconds(value);
          })
      .def_prop_rw(
          "hang_timeout_ms", [](const loader_spec& s) { return s.options.hang_timeout.count(); },
          [](loader_spec& s, std::int64_t value) {
            s.options.hang_timeout = std::chrono::milliseconds(value);
          })
      .def_rw("device", &loader_spec::device);

  nb::class_<device_array>(module, "DeviceArray",
                           "One array of a batch on a CUDA device, for from_dlpack: "
                           "__dlpack__(stream=...) makes that stream wait for the batch's upload")
      .def("__dlpack__", &device_array::dlpack)
      .def("__dlpack_device__", &device_array::dlpack_device)
      .def_prop_ro("shape", &device_array::shape);

#if CREMA_PYTHON_COUNTING_CUDA
  // This build runs on the counting CUDA runtime (tests/cuda/counting_runtime.hpp), for the tests
  // of device batches without a GPU: what it counts, and streams to consume on.
  namespace counting = c::test::counting_cuda;
  module.def(
      "_counting_cuda_calls",
      [](bool this_thread) {
        nb::dict calls;
        const counting::counts now =
            this_thread ? counting::this_thread() : counting::all_threads();
        for (std::size_t i = 0; i < static_cast<std::size_t>(counting::call::count_); ++i) {
          const auto which = static_cast<counting::call>(i);
          calls[std::string(counting::name_of(which)).c_str()] = now[which];
        }
        return calls;
      },
      nb::arg("this_thread") = false);
  module.def("_counting_cuda_held", [] {
    const counting::held_objects held = counting::held();
    return nb::make_tuple(held.allocations, held.streams, held.events);
  });
  module.def("_counting_cuda_stream", [] {
    cudaStream_t stream = nullptr;
    if (cudaStreamCreate(&stream) != cudaSuccess) throw std::runtime_error("cudaStreamCreate");
    return reinterpret_cast<std::intptr_t>(stream);
  });
  module.def("_counting_cuda_fail", [](const std::string& call, std::uint64_t after) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(counting::call::count_); ++i) {
      const auto which = static_cast<counting::call>(i);
      if (counting::name_of(which) == call) {
        counting::fail_call(which, after, cudaErrorLaunchFailure);
        return;
      }
    }
    throw nb::value_error(("no counted call " + call).c_str());
  });
  module.def("_counting_cuda_heal", [] { counting::heal(); });
#endif

  nb::class_<python_loader>(module, "Loader")
      .def_static(
          "images",
          [](const source_spec& source, const image_spec& transform, const loader_spec& loader) {
            if (transform.nvjpeg) {
#if CREMA_PYTHON_NVJPEG
              return make_loader(&make_nvjpeg_loader, source, transform, loader, transform.hwc);
#else
              c::detail::fail<c::config_error>(
                  "crema.ImageTransform(decoder='nvjpeg') asked for, but this crema was built "
                  "without nvJPEG (pip install . --config-settings "
                  "cmake.define.CREMA_ENABLE_NVJPEG=ON, with CUDA, where nvJPEG is)");
#endif
            }
            if (source.kind == "lmdb") {
#if CREMA_PYTHON_LMDB
              return make_loader(&make_lmdb_image_loader, source, transform, loader, transform.hwc);
#else
              c::detail::fail<c::config_error>("crema was built without LMDB");
#endif
            }
            return make_loader(&make_image_file_loader, source, transform, loader, transform.hwc);
          })
      .def_static(
          "caffe",
          [](const source_spec& source, const caffe_spec& transform, const loader_spec& loader) {
#if CREMA_PYTHON_LMDB
            return make_loader(&make_lmdb_caffe_loader, source, transform, loader, false);
#else
            (void)source;
            (void)transform;
            (void)loader;
            c::detail::fail<c::config_error>("crema was built without LMDB");
            return std::unique_ptr<python_loader>{};
#endif
          })
      .def("__len__", &python_loader::batches_per_epoch)
      .def_prop_ro("records_per_epoch", &python_loader::records_per_epoch)
      .def_prop_ro("slots", &python_loader::slots)
      .def_prop_ro("held", &python_loader::held)
      .def_prop_ro("key", &python_loader::key)
      .def_prop_ro("classes", &python_loader::classes)
      .def_prop_ro("running", &python_loader::running)
      .def("position", &python_loader::position)
      .def("seek", &python_loader::seek)
      .def("next", &python_loader::next)
      .def("close", &python_loader::close)
      .def("abandon", &python_loader::abandon)
      .def("stats", &python_loader::stats);
}
