// The docs' short snippets, compiled and run by the tests (docs.snippets): each function holds the
// lines a page quotes, with what they need around them, and checks that they do what the page
// says. docs/check_doc_blocks.cmake checks that every C++ block of the docs stands in the file it
// names.
#include <crema/crema.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

// Stand-ins for an engine's own code.
void fill_from_dataset(std::span<float> data) { std::iota(data.begin(), data.end(), 0.0f); }
void fill(std::span<float> data) { std::ranges::fill(data, 1.0f); }
void launch_forward(const float* data, std::size_t size) { (void)data, (void)size; }
void launch_backward(float* data, std::size_t size) { std::fill(data, data + size, 0.5f); }
bool can_access_peer(int, int) { return true; }  // every pair: an NVLink box

void expect(bool holds, const char* what) {
  if (!holds) throw std::runtime_error(std::string("docs snippet: ") + what);
}

// docs/getting-started.md
void a_buffer_on_both_sides() {
  const std::size_t batch = 2, channels = 3, height = 4, width = 4;
  crema::synced_buffer<float> blob(batch * channels * height * width);
  auto data = blob.mutable_host();  // first touch: host allocated, zero-filled, the head
  fill_from_dataset(data);
  launch_forward(blob.device().data(), blob.size());  // one upload; the buffer is now synced
  launch_backward(blob.mutable_device().data(), blob.size());  // the device becomes the head
  float loss = blob.host()[0];                                 // one download, then synced again
  expect(loss == 0.5f && blob.head() == crema::head::synced, "a buffer on both sides");
}

void the_head_in_the_type() {
  const std::size_t count = 64;
  crema::emulated_stream stream;
  crema::typed_buffer<float, crema::head::uninitialized> fresh(count);
  auto at_host = std::move(fresh).claim_host();
  fill(at_host.mutable_host());
  auto synced = std::move(at_host).upload_async(stream);  // compiles: the head is at_host
  // std::move(synced).upload_async(stream);  // does not: "upload_async() needs head::at_host"
  expect(synced.device().size() == count, "the head in the type");
}

// docs/reducer.md
void topology() {
  std::vector<int> gpus{0, 1, 2, 3};
  auto tree = crema::tree_topology::build(gpus, [](int a, int b) { return can_access_peer(a, b); });
  auto flat = crema::tree_topology::flat(gpus);  // the root is everyone's parent: shared memory
  auto shape = tree.describe();                  // "0(1 2(3))"
  expect(shape == "0(1 2(3))" && flat.root() == 0, "topology");
}

void collectives() {
  std::vector<int> gpus{0, 1, 2, 3};
  const auto tree = crema::tree_topology::build(gpus, [](int, int) { return true; });
  const std::size_t root = tree.root();
  std::vector<std::vector<float>> buffers{{1, 1}, {2, 2}, {3, 3}, {6, 6}};
  std::vector<std::span<float>> spans(buffers.begin(), buffers.end());
  crema::device_tree_reducer<float> reducer(tree, spans);  // one std::span<float> per participant
  reducer.broadcast(root);
  reducer.reduce(root, crema::reduction::average);  // the result at root, others untouched
  reducer.allreduce(crema::reduction::average);     // the result everywhere
  expect(buffers[3][1] == 1.0f, "collectives");
}

void solver_hooks() {
  const std::size_t count = 1 << 20;
  std::vector<int> ids{0, 1};
  const auto tree = crema::tree_topology::flat(ids);
  std::vector<std::vector<float>> parameters(2, std::vector<float>(count, 1.0f));
  std::vector<std::vector<float>> gradients(2, std::vector<float>(count, 1.0f));
  std::vector<std::span<float>> parameter_spans(parameters.begin(), parameters.end());
  std::vector<std::span<float>> gradient_spans(gradients.begin(), gradients.end());
  crema::host_p2p_sync<float> sync(tree, parameter_spans, gradient_spans,
                                   {.gradients = crema::reduction::average,
                                    .bucket_sizes = crema::buckets_of<float>(count, 4 << 20)});
  expect(sync.buckets() == 1, "solver hooks");
}

// docs/resources.md
void the_emulated_device() {
  const std::size_t n = 256;
  crema::emulated_device gpu0(0);  // counters live here
  crema::synced_buffer<float> b(n, {}, crema::emulated_device_resource{gpu0});
  b.mutable_host()[0] = 1.0f;
  (void)b.device();           // one upload
  auto stats = gpu0.stats();  // allocations, deallocations, zero_fills, uploads, downloads,
                              // bytes_uploaded, bytes_downloaded, live_bytes
  expect(stats.uploads == 1 && stats.bytes_uploaded == n * sizeof(float), "the emulated device");
}

// docs/pipeline.md
auto make_source() { return crema::vector_source<int>(std::vector<int>(1000, 3)).shuffle(5); }

void checkpoint_and_resume() {
  const auto transform = [](int record, const crema::sample_context& context) {
    return record + static_cast<int>(context.rng().below(100));
  };
  crema::double_buffered_pipeline pipe{
      make_source(), transform, {.batch_size = 256, .ordered = true, .seed = 7}};
  for (int step = 0; step < 5; ++step) (void)pipe.consumer().pull();
  // at a checkpoint, between steps (no consumer pulling):
  const crema::pipeline_position at = pipe.position();  // {batch, epoch, position}: save them
  // on restart, with the source built as before (same shard, shuffle and seed):
  crema::double_buffered_pipeline resumed{
      make_source(), transform, {.batch_size = 256, .ordered = true, .seed = 7, .resume_from = at}};
  const auto next = pipe.consumer().pull();
  const auto again = resumed.consumer().pull();
  expect(at.batch == 5 && at.epoch == 1 && at.position == 280, "the position counts 5 batches");
  expect(std::ranges::equal(next->items(), again->items()) && next.sequence() == again.sequence(),
         "the resumed pipeline delivers the next batch, augmentations included");
}

}  // namespace

int main() {
  a_buffer_on_both_sides();
  the_head_in_the_type();
  topology();
  collectives();
  solver_hooks();
  the_emulated_device();
  checkpoint_and_resume();
  fmt::print("every snippet ran\n");
}
