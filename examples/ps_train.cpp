// A classifier trained through crema's parameter server, as caffe-parallel trained Caffe's nets:
// rank 0 serves the parameters and hands out iterations; every other rank reads the records of
// its iteration from a Caffe LMDB (position = iteration x batch, as caffe-parallel's data layer
// skipped to them), computes the gradient of a softmax classifier on them, and sends it,
// compressed or not. Rank 0 makes the datasets (ten classes of 3 x 16 x 16 patterns under
// noise), then trains once per compression and prints the bytes the clients sent and the test
// accuracy.
//   mpirun -np 4 crema-ps-train [--iterations=N] [--check]
// --check exits 1 unless top-k at 1% ends within 2 points of the uncompressed accuracy, on at
// most 5% of its bytes.
#include <crema/collective/ps/mpi/parameter_server.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>

#include <fmt/core.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int classes = 10;
constexpr int channels = 3;
constexpr int side = 16;
constexpr std::size_t pixels = channels * side * side;
constexpr std::size_t parameter_count = classes * pixels + classes;  // weights, then biases
constexpr std::size_t batch = 32;

// Ten smooth patterns, one per class; a record is its class's pattern, shifted by up to a pixel,
// under heavy noise.
void write_dataset(const std::filesystem::path& path, int records, std::uint32_t seed) {
  std::mt19937 prototypes_rng(7);
  std::uniform_real_distribution<float> frequency(0.2f, 1.2f);
  std::uniform_real_distribution<float> phase(0.0f, 6.3f);
  std::vector<float> prototypes(classes * pixels);
  for (int c = 0; c < classes; ++c) {
    for (int k = 0; k < channels; ++k) {
      const float fx = frequency(prototypes_rng), fy = frequency(prototypes_rng);
      const float px = phase(prototypes_rng), py = phase(prototypes_rng);
      for (int y = 0; y < side; ++y) {
        for (int x = 0; x < side; ++x) {
          prototypes[(c * channels + k) * side * side + y * side + x] =
              std::sin(fx * static_cast<float>(x) + px) * std::cos(fy * static_cast<float>(y) + py);
        }
      }
    }
  }
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 60.0f);
  std::uniform_int_distribution<int> shift(-1, 1);
  crema::lmdb_writer writer(path);
  std::vector<std::byte> image(pixels);
  std::vector<std::byte> value;
  for (int r = 0; r < records; ++r) {
    const int label = static_cast<int>(rng() % classes);
    const int dx = shift(rng), dy = shift(rng);
    for (int k = 0; k < channels; ++k) {
      for (int y = 0; y < side; ++y) {
        for (int x = 0; x < side; ++x) {
          const int sx = std::clamp(x + dx, 0, side - 1), sy = std::clamp(y + dy, 0, side - 1);
          const float level =
              128.0f + 28.0f * prototypes[(label * channels + k) * side * side + sy * side + sx] +
              noise(rng);
          image[(k * side + y) * side + x] = std::byte(std::clamp(std::lround(level), 0L, 255L));
        }
      }
    }
    value.clear();
    crema::encode_datum(
        {.channels = channels, .height = side, .width = side, .label = label, .data = image},
        value);
    writer.put(fmt::format("{:08}", r), value);
  }
}

// The softmax classifier's loss gradient over `count` records from `source`, from `position`
// on (past the end: the next pass, in its own order), added into `gradient`.
struct classifier {
  std::vector<float> features = std::vector<float>(pixels);
  std::vector<float> scores = std::vector<float>(classes);

  void read(const crema::datum_view& datum) {
    for (std::size_t i = 0; i < pixels; ++i) {
      features[i] = (static_cast<float>(datum.data[i]) - 128.0f) / 64.0f;
    }
  }
  // Scores into probabilities; returns the predicted class.
  int predict(std::span<const float> w) {
    for (int c = 0; c < classes; ++c) {
      float sum = w[classes * pixels + static_cast<std::size_t>(c)];
      const float* row = w.data() + static_cast<std::size_t>(c) * pixels;
      for (std::size_t i = 0; i < pixels; ++i) sum += row[i] * features[i];
      scores[static_cast<std::size_t>(c)] = sum;
    }
    const float top = *std::max_element(scores.begin(), scores.end());
    float total = 0.0f;
    for (auto& s : scores) total += (s = std::exp(s - top));
    for (auto& s : scores) s /= total;
    return static_cast<int>(std::max_element(scores.begin(), scores.end()) - scores.begin());
  }
  void add_gradient(std::span<const float> w, int label, float weight, std::span<float> gradient) {
    predict(w);
    for (int c = 0; c < classes; ++c) {
      const float error =
          weight * (scores[static_cast<std::size_t>(c)] - (c == label ? 1.0f : 0.0f));
      float* row = gradient.data() + static_cast<std::size_t>(c) * pixels;
      for (std::size_t i = 0; i < pixels; ++i) row[i] += error * features[i];
      gradient[classes * pixels + static_cast<std::size_t>(c)] += error;
    }
  }
};

// The records of iteration `iteration`: batch records from position iteration x batch, read in
// each pass's own shuffled order.
void iteration_gradient(crema::lmdb_source& source, std::uint64_t iteration,
                        std::span<const float> w, classifier& model, std::span<float> gradient) {
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  std::uint64_t position = iteration * batch;
  for (std::size_t n = 0; n < batch; ++n, ++position) {
    if (n == 0 || position % source.size() == 0) {
      source.set_epoch(position / source.size());
      source.seek(position % source.size());
    }
    const auto* record = source.next();
    const auto datum = crema::decode_datum(record->value, record->key_text());
    model.read(datum);
    model.add_gradient(w, datum.label, 1.0f / batch, gradient);
  }
}

double test_accuracy(const std::filesystem::path& path, std::span<const float> w) {
  crema::lmdb_source source(path);
  classifier model;
  std::size_t right = 0;
  while (const auto* record = source.next()) {
    const auto datum = crema::decode_datum(record->value, record->key_text());
    model.read(datum);
    right += model.predict(w) == datum.label ? 1 : 0;
  }
  return static_cast<double>(right) / static_cast<double>(source.size());
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::uint64_t iterations = 900;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--iterations=")) iterations = std::stoull(std::string(arg.substr(13)));
    if (arg == "--check") check = true;
  }
  if (ranks < 2) {
    if (rank == 0) fmt::print(stderr, "crema-ps-train: run it under mpirun -np 4\n");
    MPI_Finalize();
    return 2;
  }
  // One folder for the job, named by rank 0.
  std::string folder(256, '\0');
  if (rank == 0) {
    const auto made = std::filesystem::temp_directory_path() /
                      fmt::format("crema-ps-train-{}", std::random_device{}());
    std::filesystem::remove_all(made);
    write_dataset(made / "train", 6000, 1);
    write_dataset(made / "test", 1000, 2);
    made.string().copy(folder.data(), folder.size() - 1);
  }
  MPI_Bcast(folder.data(), static_cast<int>(folder.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  const std::filesystem::path data(folder.c_str());

  struct run {
    const char* name;
    crema::compression how;
  };
  const run runs[] = {{"uncompressed", {}},
                      {"fp16", crema::compression{}.with_fp16()},
                      {"top-k 1%", crema::compression::top_k(0.01)},
                      {"threshold 0.05", crema::compression::above(0.05)}};
  double accuracy[std::size(runs)] = {};
  double bytes[std::size(runs)] = {};
  if (rank == 0) {
    fmt::print("{} iterations of {} records, 1 server and {} clients, {} parameters\n", iterations,
               batch, ranks - 1, parameter_count);
  }
  for (std::size_t r = 0; r < std::size(runs); ++r) {
    crema::mpi::ps_options options;
    options.diffs = runs[r].how;
    std::vector<float> w(parameter_count, 0.0f);
    double sent = 0.0;
    if (rank == 0) {
      crema::mpi::parameter_server<float> server(
          MPI_COMM_WORLD, w, crema::mpi::sgd_momentum<float>(0.05f, 0.9f, 1e-4f), options);
      server.serve(iterations);
      accuracy[r] = test_accuracy(data / "test", w);
    } else {
      crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
      crema::lmdb_source source(data / "train", {.permute = true});
      classifier model;
      std::vector<float> gradient(parameter_count);
      for (auto iteration = client.pull(); iteration; iteration = client.exchange(gradient)) {
        iteration_gradient(source, *iteration, w, model, gradient);
      }
      sent = static_cast<double>(client.stats().bytes_sent);
    }
    MPI_Reduce(&sent, &bytes[r], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      fmt::print(
          "{:<16} clients sent {:8.2f} MiB ({:5.1f}% of uncompressed)  test accuracy: {:.3f}\n",
          runs[r].name, bytes[r] / (1 << 20), 100.0 * bytes[r] / bytes[0], accuracy[r]);
    }
  }
  int status = 0;
  if (rank == 0) {
    std::filesystem::remove_all(data);
    const bool close = accuracy[2] >= accuracy[0] - 0.02;
    const bool small = bytes[2] <= 0.05 * bytes[0];
    fmt::print("top-k 1%: accuracy {} 2 points of uncompressed, bytes {} 5% of it\n",
               close ? "within" : "NOT within", small ? "at most" : "MORE than");
    if (check && !(close && small)) status = 1;
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
