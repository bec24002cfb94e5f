// A fixed amount of pipeline work for `valgrind --tool=callgrind`, whose instruction counts do not
// vary from run to run as timings do: one producer on one thread fills batches of 64 records of
// 64 bytes (each copied into its item, with the sample context's generator drawn from), one
// consumer takes them in order. benchmarks/pipeline/count_instructions.sh runs it and counts the
// instructions spent in crema's headers per batch, spinning left out.
//   crema-bench-pipeline-instructions [BATCHES]
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using record = std::array<std::byte, 64>;

struct copy_and_draw {
  struct item_type {
    record bytes{};
    std::uint64_t drawn = 0;
  };
  void operator()(const record& from, item_type& to, const crema::sample_context& context) const {
    std::memcpy(to.bytes.data(), from.data(), from.size());
    to.drawn = context.rng()();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::size_t batches = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20'000;
  std::vector<record> records(4096);
  for (std::size_t i = 0; i < records.size(); ++i) records[i].fill(std::byte(i));
  crema::double_buffered_pipeline pipe{
      crema::vector_source<record>(std::move(records)),
      copy_and_draw{},
      {.batch_size = 64, .prefetch = 4, .producers = 1, .threads = 1, .ordered = true, .seed = 7}};
  auto consumer = pipe.consumer(0);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < batches; ++i) {
    auto batch = consumer.pull();
    sum += batch->items().front().drawn;
  }
  return sum == 0 ? 1 : 0;  // keeps the work; a zero sum of 20,000 draws does not happen
}
