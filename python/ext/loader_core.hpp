#pragma once

// What the module's translation units share: the loader behind a virtual interface (so that one
// Python class drives every source and transform), the batch a Python array keeps alive, and the
// plain descriptions of sources and transforms that the Python side has checked.

#include <crema/pipeline/epoch_loader.hpp>
#include <crema/pipeline/host_batch.hpp>
#include <crema/pipeline/shard_cursor.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crema {
struct image_transform_options;
}  // namespace crema

namespace crema::python {

/// One delivered batch: its lease, and where its arrays' bytes are. Destroyed (the slot given
/// back) when the last Python object that refers to it is.
struct held_batch {
  /// For `use_on`: the consumer synchronises itself (DLPack's stream -1).
  static constexpr std::intptr_t no_sync = -1;

  virtual ~held_batch() = default;
  /// A device batch: makes `stream` (a `cudaStream_t` as an integer) wait for the upload, sets
  /// `data` and `labels` to the device's copy, and has the slot refilled only after the work
  /// queued on `stream` before the batch is let go. Host batches are ready as they come.
  virtual void use_on(std::intptr_t stream) { (void)stream; }

  void* data = nullptr;
  std::int64_t* labels = nullptr;
  std::size_t size = 0;     ///< records in the batch
  std::size_t padding = 0;  ///< records at its end that repeat its first ones
  std::uint64_t epoch = 0;
  int device = -1;  ///< the CUDA device the batch is on; -1: host memory
};

/// The loader, whatever its source and transform.
class loader_core {
 public:
  virtual ~loader_core() = default;
  [[nodiscard]] virtual std::uint64_t batches_per_epoch() const = 0;
  [[nodiscard]] virtual std::uint64_t records_per_epoch() const = 0;
  [[nodiscard]] virtual std::size_t slots() const = 0;
  [[nodiscard]] virtual std::string key() const = 0;
  /// The class names by label where the source has them (a folder's), else none.
  [[nodiscard]] virtual std::vector<std::string> classes() const = 0;
  [[nodiscard]] virtual loader_position position() const = 0;
  virtual void seek(loader_position position) = 0;
  [[nodiscard]] virtual bool running() const = 0;
  /// The next batch of the epoch into `out` (ready), or end, stopped or timeout.
  [[nodiscard]] virtual pull_status next_for(std::chrono::milliseconds timeout,
                                             std::unique_ptr<held_batch>& out) = 0;
  virtual void close() = 0;
  [[nodiscard]] virtual std::string stats() const = 0;
  /// One sample's dimensions in a batch: channels, height, width.
  [[nodiscard]] virtual record_shape sample_shape() const = 0;
};

/// Where the records come from.
/// What `crema.HTTP` asks of the storage that reads shards named by URL (crema::http_options).
struct http_spec {
  int retries = 5;
  double backoff_s = 0.2;
  double most_backoff_s = 10;
  double connect_timeout_s = 10;
  double request_timeout_s = 0;  ///< 0: no limit
  std::int64_t stall_timeout_s = 30;
  std::string aws_sigv4;
  std::string s3_endpoint;
  std::string region;
  std::vector<std::string> headers;
  std::size_t cache_bytes = 0;
  std::size_t chunk_bytes = std::size_t{8} << 20;
  std::string ca_file;
};

struct source_spec {
  std::string kind;  ///< "folder", "list", "lmdb", "webdataset" or "tfrecord"
  std::string path;  ///< the folder, the list file or the database
  std::string root;  ///< a list's folder
  std::vector<std::string> extensions;
  std::vector<std::string> shards;   ///< a shard source's files
  std::vector<std::string> indexes;  ///< their index files (DALI's formats), or none
  http_spec http;                    ///< how shards and index files named by URL are read
  std::size_t shard_blocks = 0;      ///< shuffled shard by shard, this many at a time; 0: not
  bool stream = false;               ///< shards read without an index, as a stream
  std::size_t shuffle_buffer = 0;    ///< a stream's shuffle buffer
  std::uint64_t epoch_samples = 0;   ///< a stream's samples an epoch, across the ranks
  std::string image_feature;         ///< a TFRecord's image and class features
  std::string label_feature;
  bool shuffle = true;
  std::size_t rank = 0;
  std::size_t world = 1;
  shard_balance balance = shard_balance::none;
};

/// What `crema.ImageTransform` asks for.
struct image_spec {
  bool random_crop = true;
  std::size_t height = 224;
  std::size_t width = 224;
  double scale_low = 0.08;
  double scale_high = 1.0;
  double ratio_low = 3.0 / 4.0;
  double ratio_high = 4.0 / 3.0;
  std::size_t resize = 256;
  bool flip = false;
  std::array<float, 3> jitter{};  ///< brightness, contrast, saturation
  std::array<float, 3> mean{};
  std::array<float, 3> std{1.0F, 1.0F, 1.0F};
  bool bytes = false;           ///< uint8 samples instead of float32
  bool hwc = false;             ///< NHWC instead of NCHW
  bool reduced_detail = false;  ///< `decode_detail::reduced`
  bool nvjpeg = false;          ///< decoded on the loader's device by nvJPEG
};

/// What `crema.CaffeTransform` asks for.
struct caffe_spec {
  std::size_t crop = 0;
  bool mirror = false;
  bool training = true;
  std::string mean_file;
  std::vector<float> mean_values;
  float scale = 1.0F;
  bool bytes = false;
};

/// The loader's own options.
struct loader_spec {
  epoch_loader_options options;
  int device = -1;  ///< the CUDA device the batches go to; -1: host memory
};

template <class Lease>
struct lease_batch final : held_batch {
  explicit lease_batch(Lease held) : lease(std::move(held)) {
    auto& batch = *lease;
    data = batch.data.data();
    labels = batch.labels.data();
    size = lease.size();
    padding = lease.padding();
    epoch = lease.epoch();
  }
  Lease lease;
};

/// The loader over one source type and one batch transform; `Held` is what a delivered lease
/// becomes (`lease_batch` for host batches, `device_lease_batch` for device ones).
template <class Source, class Transform, template <class> class Held = lease_batch>
class loader_model final : public loader_core {
 public:
  loader_model(std::function<Source()> make_source, Transform transform,
               const epoch_loader_options& options, std::vector<std::string> classes = {})
      : shape_(transform.shape()),
        classes_(std::move(classes)),
        loader_(std::move(make_source), std::move(transform), options) {}

  std::uint64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
  std::uint64_t records_per_epoch() const override { return loader_.records_per_epoch(); }
  std::size_t slots() const override { return loader_.slots(); }
  std::string key() const override { return loader_.key(); }
  std::vector<std::string> classes() const override { return classes_; }
  loader_position position() const override { return loader_.position(); }
  void seek(loader_position position) override { loader_.seek(position); }
  bool running() const override { return loader_.running(); }
  pull_status next_for(std::chrono::milliseconds timeout,
                       std::unique_ptr<held_batch>& out) override {
    auto result = loader_.next_for(timeout);
    if (result.status == pull_status::ready) {
      out = std::make_unique<Held<decltype(result.batch)>>(std::move(result.batch));
    }
    return result.status;
  }
  void close() override { loader_.close(); }
  std::string stats() const override { return fmt::format("{}", loader_.stats()); }
  record_shape sample_shape() const override { return shape_; }

 private:
  record_shape shape_;
  std::vector<std::string> classes_;
  epoch_loader<Source, Transform> loader_;
};

/// The batches of the module's loaders: int64 labels, as PyTorch's losses take them.
template <class T>
using python_batch = make_host_batch<T, std::int64_t>;

/// Loaders over image folders and list files (image_loaders.cpp).
[[nodiscard]] std::unique_ptr<loader_core> make_image_file_loader(const source_spec& source,
                                                                  const image_spec& transform,
                                                                  const loader_spec& loader);
/// Loaders over Caffe LMDBs (lmdb_loaders.cpp), with either transform.
[[nodiscard]] std::unique_ptr<loader_core> make_lmdb_image_loader(const source_spec& source,
                                                                  const image_spec& transform,
                                                                  const loader_spec& loader);
[[nodiscard]] std::unique_ptr<loader_core> make_lmdb_caffe_loader(const source_spec& source,
                                                                  const caffe_spec& transform,
                                                                  const loader_spec& loader);

/// Loaders over image files, shards and LMDBs decoded by nvJPEG on the loader's device
/// (nvjpeg_loaders.cpp, in builds with nvJPEG).
[[nodiscard]] std::unique_ptr<loader_core> make_nvjpeg_loader(const source_spec& source,
                                                              const image_spec& transform,
                                                              const loader_spec& loader);

/// The image transform's options from its description (image_loaders.cpp).
[[nodiscard]] image_transform_options image_options(const image_spec& spec);

}  // namespace crema::python
