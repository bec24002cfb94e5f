// Device-ready batches: a batch transform fills device_batches that the producers upload, so the
// consumer gets batches already on (or on their way to) its device, on the emulated device.

#include <crema/memory/limiting_resource_adaptor.hpp>
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/recording_device_resource.hpp"
#include "common/watchdog.hpp"
#include "pipeline/numbers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace std::chrono_literals;
using crema::pipeline_mode;
using crema::test::numbers;

constexpr crema::record_shape shape{3, 4, 4};
using batch_type =
    crema::device_batch<float, crema::host_malloc_resource, crema::test::recording_device_resource>;

using uploader_type = crema::batch_uploader<crema::emulated_stream>;

// Where a batch's upload is started, and on which stream.
enum class uploads_on {
  consumer_stream,  // by the producer, on a stream the consumer's batches share
  own_stream,       // by the producer, on a stream of the batch's own
  uploader,         // by the consumer's uploader, on its stream
};

// Each consumer has its own emulated device, upload stream and uploader; record r fills its
// pixels and its label with r.
struct fill_batch {
  using batch_type = ::batch_type;
  std::vector<std::shared_ptr<crema::emulated_stream>> streams;
  std::vector<std::shared_ptr<uploader_type>> uploaders;
  std::vector<crema::test::recording_device_resource> devices;

  uploads_on uploads = uploads_on::consumer_stream;

  batch_type make_batch(const crema::batch_context& where) const {
    const auto& device = devices.at(where.consumer);
    switch (uploads) {
      case uploads_on::consumer_stream:
        return batch_type(where.batch_size, shape, streams.at(where.consumer), {}, device);
      case uploads_on::own_stream:
        return batch_type(where.batch_size, shape, {}, device);
      case uploads_on::uploader:
        return batch_type(where.batch_size, shape, uploaders.at(where.consumer), {}, device);
    }
    return batch_type(where.batch_size, shape, {}, device);
  }
  void operator()(const int& record, batch_type& batch, const crema::sample_context& sample) const {
    const auto pixels = batch.record(sample.index);
    std::fill(pixels.begin(), pixels.end(), static_cast<float>(record));
    batch.set_label(sample.index, static_cast<float>(record));
  }
};

// The emulated devices and streams of `consumers` consumers, and the transform that uses them.
struct rig {
  explicit rig(std::size_t consumers) : devices(consumers) {
    for (std::size_t c = 0; c < consumers; ++c) {
      transform.streams.push_back(std::make_shared<crema::emulated_stream>());
      transform.uploaders.push_back(std::make_shared<uploader_type>());
      transform.devices.emplace_back(devices[c]);
    }
  }
  std::deque<crema::emulated_device> devices;
  fill_batch transform;
};

// The records a batch holds, read back from (emulated) device memory; `on_device` points at it.
std::vector<float> labels_of(const float* on_device, std::size_t size) {
  return {on_device, on_device + size};
}

// Host memory one byte past malloc's: a resource that ignores the alignment asked of it.
struct misaligned_host {
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t /*alignment*/) const {
    return static_cast<std::byte*>(crema::host_malloc_resource{}.allocate(bytes + 1)) + 1;
  }
  void deallocate(void* pointer, std::size_t bytes, std::size_t /*alignment*/) const noexcept {
    crema::host_malloc_resource{}.deallocate(static_cast<std::byte*>(pointer) - 1, bytes + 1);
  }
};

}  // namespace

TEST_SUITE("device_batch") {
  TEST_CASE(
      "each batch is uploaded in one copy by its producer, never on the consumer's thread, and "
      "arrives whole on the consumer's device") {
    crema::test::watchdog guard(60s, "device batches");
    rig setup(2);
    SUBCASE("the producers start the uploads") {}
    SUBCASE("an uploader per consumer starts them") {
      setup.transform.uploads = uploads_on::uploader;
    }
    std::mutex mutex;
    std::set<std::thread::id> consumer_threads;
    std::vector<int> seen;
    std::atomic<int> wrong{0};
    std::vector<std::size_t> delivered(2);
    {
      crema::double_buffered_pipeline pipe{numbers(403),
                                           setup.transform,
                                           {.batch_size = 8,
                                            .prefetch = 3,
                                            .producers = 3,
                                            .threads = 2,
                                            .consumers = 2,
                                            .mode = pipeline_mode::single_pass}};
      std::vector<std::thread> consumers;
      for (std::size_t c = 0; c < 2; ++c) {
        consumers.emplace_back([&, c] {
          {
            std::scoped_lock lock(mutex);
            consumer_threads.insert(std::this_thread::get_id());
          }
          for (auto batch : pipe.consumer(c)) {
            ++delivered[c];
            // device() waits for the upload on the host; the emulated device's memory can be read
            // here, as a kernel would read a real one.
            const auto on_device = batch->device();
            const float* pixels = on_device.data.data();
            const auto labels = labels_of(on_device.labels.data(), batch->size());
            for (std::size_t i = 0; i < batch->size(); ++i) {
              const float* record = pixels + i * shape.elements();
              if (!std::all_of(record, record + shape.elements(),
                               [&](float v) { return v == labels[i]; })) {
                ++wrong;
              }
            }
            std::scoped_lock lock(mutex);
            for (float label : labels) seen.push_back(static_cast<int>(label));
          }
        });
      }
      for (auto& consumer : consumers) consumer.join();
    }
    CHECK(wrong.load() == 0);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == crema::test::first_numbers(403));
    std::set<std::thread::id> uploading;
    for (std::size_t c = 0; c < 2; ++c) {
      const auto uploads = setup.transform.devices[c].uploads();
      CHECK(uploads.size() == delivered[c]);  // data and labels together, once per batch
      std::set<std::thread::id> uploaders_of_c;
      for (const auto& upload : uploads) {
        CHECK(upload.asynchronous);
        CHECK(consumer_threads.count(upload.thread) == 0);
        uploaders_of_c.insert(upload.thread);
        uploading.insert(upload.thread);
      }
      // An uploader's thread starts every upload of its consumer's batches.
      if (setup.transform.uploads == uploads_on::uploader) CHECK(uploaders_of_c.size() == 1);
    }
    if (setup.transform.uploads == uploads_on::uploader) CHECK(uploading.size() == 2);
  }

  TEST_CASE(
      "a slot released after the consumer's device work is not rewritten while that work "
      "runs") {
    crema::test::watchdog guard(60s, "release_after");
    rig setup(1);
    SUBCASE("the batches upload on their consumer's stream") {}
    SUBCASE("each batch uploads on a stream of its own") {
      setup.transform.uploads = uploads_on::own_stream;
    }
    SUBCASE("an uploader starts the uploads") { setup.transform.uploads = uploads_on::uploader; }
    crema::emulated_stream compute;  // the consumer's stream: its "kernels" run late
    std::atomic<int> wrong{0};
    std::atomic<int> checked{0};
    {
      crema::double_buffered_pipeline pipe{
          numbers(1000),
          setup.transform,
          {.batch_size = 4, .prefetch = 2, .producers = 2, .threads = 2}};
      auto consumer = pipe.consumer(0);
      for (int step = 0; step < 150; ++step) {
        auto batch = consumer.pull();
        REQUIRE(batch);
        const std::size_t size = batch->size();
        // The batch's records, as the pipeline dealt them: batch g holds records 4g .. 4g + 3.
        const float first = static_cast<float>((batch.sequence() * 4) % 1000);
        const float* pixels = batch->device(compute).data.data();  // compute waits for the copy
        compute.launch([&, pixels, size, first, step] {
          std::this_thread::sleep_for(step % 10 == 0 ? 3ms : 200us);  // a slow kernel
          for (std::size_t i = 0; i < size; ++i) {
            const float* record = pixels + i * shape.elements();
            const float value = first + static_cast<float>(i);
            if (!std::all_of(record, record + shape.elements(),
                             [&](float v) { return v == value; })) {
              ++wrong;
            }
          }
          ++checked;
        });
        batch.release_after(compute.record());  // refilled only once that kernel is done
      }
      compute.synchronize();
    }
    CHECK(checked.load() == 150);
    CHECK(wrong.load() == 0);
  }

  TEST_CASE(
      "device batches are refilled oldest first: a slot comes back to the producer only "
      "after every other slot has been filled since") {
    // The fill of a slot waits for its last upload and for the consumer's device work on it;
    // the slot released longest ago has had the longest to finish both. (Host batches are
    // refilled newest first instead, while their memory is in the cache: slot_pool's tests.)
    crema::test::watchdog guard(60s, "device batch reuse order");
    rig setup(1);
    constexpr std::size_t slots = 4;
    std::vector<const batch_type*> order;
    {
      crema::double_buffered_pipeline pipe{
          numbers(1000),
          setup.transform,
          {.batch_size = 4, .prefetch = slots, .producers = 1, .threads = 1}};
      auto consumer = pipe.consumer(0);
      for (int step = 0; step < 40; ++step) {
        auto batch = consumer.pull();
        REQUIRE(batch);
        order.push_back(&*batch);
        batch.release_after(setup.transform.streams[0]->record());
      }
    }
    CHECK(std::set<const batch_type*>(order.begin(), order.end()).size() == slots);
    for (std::size_t k = slots; k < order.size(); ++k) {
      CAPTURE(k);
      CHECK(order[k] == order[k - slots]);
    }
  }

  TEST_CASE("stop from every state, with uploads and device work in flight, frees every byte") {
    crema::test::watchdog guard(60s, "device batch stop");
    rig setup(2);
    crema::emulated_stream* upload_stream = setup.transform.streams[0].get();
    SUBCASE("the producers start the uploads") {}
    SUBCASE("an uploader per consumer starts them") {
      setup.transform.uploads = uploads_on::uploader;
      upload_stream = &setup.transform.uploaders[0]->stream();
    }
    const auto live = [&] {
      return setup.devices[0].stats().live_bytes + setup.devices[1].stats().live_bytes;
    };
    {
      // Producers suspended on full pools, uploads queued behind a slow upload stream.
      upload_stream->launch([] { std::this_thread::sleep_for(20ms); });
      crema::double_buffered_pipeline pipe{
          numbers(100),
          setup.transform,
          {.batch_size = 4, .prefetch = 2, .producers = 3, .threads = 2, .consumers = 2}};
      while (pipe.stats().waiting_producers == 0) std::this_thread::sleep_for(1ms);
    }
    CHECK(live() == 0);
    std::optional<decltype(std::declval<crema::double_buffered_pipeline<crema::vector_source<int>,
                                                                        fill_batch>&>()
                               .consumer(0)
                               .pull())>
        kept;
    {
      // Leases held past the pipeline, released after device work that is still queued.
      crema::emulated_stream compute;
      compute.launch([] { std::this_thread::sleep_for(20ms); });
      crema::double_buffered_pipeline pipe{
          numbers(100), setup.transform, {.batch_size = 4, .prefetch = 2, .consumers = 2}};
      auto first = pipe.consumer(0).pull();
      kept.emplace(pipe.consumer(1).pull());
      (void)first->device(compute);
      first.release_after(compute.record());
    }
    REQUIRE(kept);
    CHECK(static_cast<bool>(*kept));
    kept.reset();
    CHECK(live() == 0);
    {
      // A consumer waiting for a slow transform when the pipeline goes.
      auto slow = setup.transform;
      struct slow_fill : fill_batch {
        void operator()(const int& record, batch_type& batch,
                        const crema::sample_context& sample) const {
          std::this_thread::sleep_for(5ms);
          fill_batch::operator()(record, batch, sample);
        }
      };
      auto pipe =
          std::make_unique<crema::double_buffered_pipeline<crema::vector_source<int>, slow_fill>>(
              numbers(100), slow_fill{slow}, crema::pipeline_options{.batch_size = 50});
      std::thread waiting(
          [&, handle = pipe->consumer(0)]() mutable { CHECK_FALSE(handle.pull()); });
      std::this_thread::sleep_for(20ms);
      pipe.reset();
      waiting.join();
    }
    CHECK(live() == 0);
  }

  TEST_CASE(
      "a batch whose upload an uploader has not started yet waits for it when moved or "
      "destroyed, and an upload that failed is thrown to whoever touches the batch next") {
    crema::test::watchdog guard(60s, "uploader jobs");
    crema::emulated_device device;
    const crema::test::recording_device_resource recording(device);
    const auto uploader = std::make_shared<uploader_type>();
    // Holds the uploader's thread until opened, so that the jobs submitted after it queue.
    struct held_job final : uploader_type::job {
      std::atomic<bool> open{false};
      void run(crema::emulated_stream& /*stream*/) override {
        while (!open.load()) std::this_thread::sleep_for(1ms);
      }
    };
    const auto fill = [](auto& batch) {
      for (std::size_t i = 0; i < batch.capacity(); ++i) {
        const auto pixels = batch.record(i);
        std::fill(pixels.begin(), pixels.end(), static_cast<float>(10 + i));
        batch.set_label(i, static_cast<float>(10 + i));
      }
      batch.finish({.size = batch.capacity()});
    };
    const auto check_on_device = [](const batch_type& batch) {
      const auto view = batch.device();
      for (std::size_t i = 0; i < batch.size(); ++i) {
        CHECK(view.labels.data()[i] == static_cast<float>(10 + i));
        const float* record = view.data.data() + i * shape.elements();
        CHECK(std::all_of(record, record + shape.elements(),
                          [&](float v) { return v == static_cast<float>(10 + i); }));
      }
    };
    held_job hold;
    std::thread opener;
    const auto hold_for_a_while = [&] {
      hold.open = false;
      uploader->submit(hold);
      opener = std::thread([&] {
        std::this_thread::sleep_for(20ms);
        hold.open = true;
      });
    };

    SUBCASE("moved") {
      batch_type batch(4, shape, uploader, {}, recording);
      hold_for_a_while();
      fill(batch);
      CHECK(recording.uploads().empty());  // queued behind the held job
      batch_type moved(std::move(batch));
      CHECK(recording.uploads().size() == 1);  // the move waited for it
      opener.join();
      check_on_device(moved);
      batch_type assigned(4, shape, uploader, {}, recording);
      hold_for_a_while();
      fill(moved);
      assigned = std::move(moved);
      CHECK(recording.uploads().size() == 2);
      opener.join();
      check_on_device(assigned);
    }
    SUBCASE("destroyed") {
      {
        batch_type batch(4, shape, uploader, {}, recording);
        hold_for_a_while();
        fill(batch);
      }
      CHECK(recording.uploads().size() == 1);  // started before the batch's memory went
      opener.join();
      uploader->stream().synchronize();
      CHECK(device.stats().live_bytes == 0);
    }
    SUBCASE("failed") {
      using limited = crema::limiting_resource_adaptor<crema::emulated_device_resource>;
      crema::device_batch<float, crema::host_malloc_resource, limited> batch(
          4, shape, uploader, {}, limited(crema::emulated_device_resource(device), 64));
      fill(batch);  // the device block is made on the uploader's thread, past the limit
      // Named with its batch, as a producer's failed finishing step is, the cause nested.
      bool thrown = false;
      try {
        (void)batch.device();
      } catch (const crema::pipeline_error& e) {
        thrown = true;
        CHECK(std::string_view(e.what()) ==
              "device_batch: uploading batch 0 of consumer 0 failed on the uploader's thread");
        CHECK_THROWS_WITH_AS(std::rethrow_if_nested(e), doctest::Contains("limit of 64 bytes"),
                             crema::allocation_error);
      }
      CHECK(thrown);
      CHECK(device.stats().live_bytes == 0);
    }
  }

  TEST_CASE("a thousand pipelines of device batches are made, used and destroyed cleanly") {
    crema::test::watchdog guard(300s, "1000 device cycles");
    rig setup(2);
    for (int cycle = 0; cycle < 1000; ++cycle) {
      setup.transform.uploads = static_cast<uploads_on>(cycle / 3 % 3);
      crema::double_buffered_pipeline pipe{
          numbers(37),
          setup.transform,
          {.batch_size = 5,
           .prefetch = 2,
           .producers = 1 + static_cast<std::size_t>(cycle % 3),
           .threads = 1 + static_cast<std::size_t>(cycle % 2),
           .consumers = 1 + static_cast<std::size_t>(cycle % 2),
           .mode = cycle % 2 == 0 ? pipeline_mode::single_pass : pipeline_mode::repeat}};
      auto consumer = pipe.consumer(0);
      for (int pulls = 0; pulls < cycle % 3; ++pulls) (void)consumer.pull();
    }
    CHECK(setup.devices[0].stats().live_bytes == 0);
    CHECK(setup.devices[1].stats().live_bytes == 0);
  }

  TEST_CASE("a batch of bytes keeps float labels, and refuses a host block not aligned to them") {
    crema::device_batch<std::uint8_t> bytes(3, {1, 2, 2});
    static_assert(std::is_same_v<decltype(bytes)::label_type, float>);
    for (std::size_t i = 0; i < 3; ++i) {
      std::ranges::fill(bytes.record(i), static_cast<std::uint8_t>(200 + i));
      bytes.set_label(i, 997.0f + static_cast<float>(i));
    }
    bytes.finish({.size = 3});
    const auto on_device = bytes.device();
    CHECK(std::vector<float>(on_device.labels.data(), on_device.labels.data() + 3) ==
          std::vector<float>{997.0f, 998.0f, 999.0f});
    CHECK(std::vector<std::uint8_t>(on_device.data.data(), on_device.data.data() + 12) ==
          std::vector<std::uint8_t>{200, 200, 200, 200, 201, 201, 201, 201, 202, 202, 202, 202});
    // The data starts 256 bytes in: the labels' share is rounded up to it.
    CHECK(bytes.data_offset() == 256);

    crema::device_batch<std::uint8_t, misaligned_host> off(2, {1, 1, 1});
    CHECK_THROWS_WITH_AS(off.set_label(0, 1.0f), doctest::Contains("not aligned"),
                         crema::state_error);
  }

  TEST_CASE("a batch with int64 labels (PyTorch's class indices) keeps them exact past 2^24") {
    using int64_batch = crema::device_batch<std::uint8_t, crema::host_malloc_resource,
                                            crema::emulated_device_resource, std::int64_t>;
    static_assert(std::is_same_v<int64_batch::label_type, std::int64_t>);
    int64_batch batch(40, {1, 1, 2});
    // Past float's 24-bit mantissa: a float label would round these.
    constexpr std::int64_t first = (std::int64_t{1} << 40) + 1;
    for (std::size_t i = 0; i < 40; ++i) {
      std::ranges::fill(batch.record(i), static_cast<std::uint8_t>(i));
      batch.set_label(i, first + static_cast<std::int64_t>(i));
    }
    batch.finish({.size = 40});
    const auto on_device = batch.device();
    for (std::size_t i = 0; i < 40; ++i) {
      CHECK(on_device.labels.data()[i] == first + static_cast<std::int64_t>(i));
      CHECK(on_device.data.data()[2 * i + 1] == static_cast<std::uint8_t>(i));
    }
    // 40 labels of 8 bytes round up to 512: the data stays 256-aligned.
    CHECK(batch.data_offset() == 512);
    CHECK(std::vector<std::int64_t>(batch.host_labels().begin(), batch.host_labels().end()) ==
          std::vector<std::int64_t>(on_device.labels.data(), on_device.labels.data() + 40));
  }
}
