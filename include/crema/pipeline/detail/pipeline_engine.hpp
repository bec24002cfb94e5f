#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/batch_slot.hpp>
#include <crema/pipeline/detail/channel.hpp>
#include <crema/pipeline/detail/checked_options.hpp>
#include <crema/pipeline/detail/claim_sequencer.hpp>
#include <crema/pipeline/detail/delivery.hpp>
#include <crema/pipeline/detail/hang_watch.hpp>
#include <crema/pipeline/detail/pipeline_counters.hpp>
#include <crema/pipeline/detail/producer_loop.hpp>
#include <crema/pipeline/detail/reader.hpp>
#include <crema/pipeline/detail/release_poller.hpp>
#include <crema/pipeline/detail/run_state.hpp>
#include <crema/pipeline/pipeline_options.hpp>
#include <crema/pipeline/stats.hpp>
#include <crema/pipeline/transform.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <stop_token>
#include <utility>
#include <vector>

namespace crema::detail {

// Stopping a run stops its claims and every channel: producers waiting for their turn or a slot,
// and consumers waiting for a batch, wake. Hung on the run's stop token.
struct stop_claims_and_channels {
  claim_sequencer<thread_pool>& claims;
  std::span<channel_state* const> channels;
  void operator()() const noexcept {
    claims.stop();
    for (channel_state* each : channels) each->stop();
  }
};

// A double_buffered_pipeline's state and parts: its options, the shared reader, one channel of
// slots per consumer, the pool the producers run on (with the release poller as its idle hook),
// the producer loop and the delivery, and the run state they share. Each part takes what it uses
// from the members above it, in the order they are declared; the destructor joins the pool's
// threads first, so that none of them outlives a member it uses.
template <class Source, class Transform>
class pipeline_engine {
 public:
  using record_type = typename Source::record_type;
  using slot_type = batch_slot<Source, Transform>;
  using channel_type = channel<slot_type>;
  using lease_type = lease<channel_type>;
  using clock = std::chrono::steady_clock;

  pipeline_engine(Source&& from, Transform&& prototype, const pipeline_options& chosen)
      : options_(checked_options(chosen, footprint())),
        prototype_(std::move(prototype)),
        reader_(open_reader(std::move(from), options_)),
        first_batch_(options_.resume_from ? options_.resume_from->batch : 0),
        counters_(options_.producers),
        pool_(options_.threads, &poller_),
        claims_(pool_, options_.producers, first_batch_),
        channels_(make_channels()),
        states_(states_of(channels_)),
        stopping_(run_.token(), stop_claims_and_channels{claims_, states_}),
        hangs_(options_.producers, options_.hang_timeout),
        producers_(options_, prototype_, *reader_, channels_, claims_, run_, counters_, hangs_,
                   first_batch_),
        delivery_(options_, channels_, states_, claims_, run_, counters_, hangs_, reader_->key) {
    poller_.arm(states_, run_);
  }
  pipeline_engine(const pipeline_engine&) = delete;
  pipeline_engine& operator=(const pipeline_engine&) = delete;
  ~pipeline_engine() { pool_.join(); }

  // Posts the producers to the pool.
  void start() {
    run_.start_producers(options_.producers);
    for (std::size_t id = 0; id < options_.producers; ++id) {
      pool_.post(producers_.produce(id).coroutine);
    }
  }

  // Stops the run and waits for the producers, unless called by one of them.
  void stop_and_wait() {
    run_.request_stop();
    if (pool_.runs_this_thread()) return;  // a producer stopping its own pipeline
    run_.wait_for_producers();
  }

  pull_result<lease_type> pull(std::size_t index, wait_kind kind, clock::time_point deadline) {
    return delivery_.pull(index, kind, deadline);
  }

  // The first batch no consumer has been given; see `double_buffered_pipeline::position`.
  [[nodiscard]] pipeline_position position() const {
    if (!options_.ordered || options_.registry != nullptr) {
      fail<config_error>(
          "pipeline: position() needs an ordered pipeline with a reader of its own (ordered {}, "
          "registry {}): batches delivered out of order, or records read by another pipeline, "
          "leave no single point to resume from",
          options_.ordered, options_.registry != nullptr ? "set" : "none");
    }
    std::uint64_t lowest = ~std::uint64_t{0};
    for (std::size_t c = 0; c < channels_.size(); ++c) {
      lowest = std::min<std::uint64_t>(lowest, channels_[c]->next_sequence * channels_.size() + c);
    }
    return producers_.start_of(lowest);
  }

  [[nodiscard]] pipeline_stats snapshot() const {
    return counters_.snapshot(states_, run_.producers_alive(), claims_.waiting());
  }
  [[nodiscard]] const pipeline_options& options() const noexcept { return options_; }
  [[nodiscard]] std::size_t consumers() const noexcept { return channels_.size(); }

 private:
  static constexpr pipeline_footprint footprint() noexcept {
    constexpr std::size_t per_item = [] {
      if constexpr (slot_type::holds_batch) {
        return std::size_t{0};  // a batch object's own memory is its business
      } else {
        return sizeof(typename slot_type::item_type);
      }
    }();
    return {sizeof(const record_type*) + per_item + sizeof(record_origin) +
                (Source::records_are_stable ? 0 : sizeof(typename slot_type::storage_type)),
            sizeof(Transform) + 1024};
  }

  // The reader, where the options say it starts.
  static std::shared_ptr<reader_body<Source>> open_reader(Source&& from,
                                                          const pipeline_options& options) {
    auto reader = share_reader(std::move(from), options);
    if (options.resume_from) resume_reader(*reader, *options.resume_from);
    return reader;
  }

  std::vector<std::shared_ptr<channel_type>> make_channels() {
    std::vector<std::shared_ptr<channel_type>> made;
    made.reserve(options_.consumers);
    for (std::size_t consumer = 0; consumer < options_.consumers; ++consumer) {
      std::size_t slot_index = 0;
      auto& one = made.emplace_back(std::make_shared<channel_type>(
          options_.prefetch,
          [&] {
            slot_type slot(options_.batch_size, [&] {
              if constexpr (slot_type::holds_batch) {
                return prototype_.make_batch(
                    batch_context{consumer, slot_index, options_.batch_size});
              }
            });
            slot.consumer = consumer;
            ++slot_index;
            return slot;
          },
          pool_));
      // A resumed pipeline: this consumer's batches below the first were delivered before.
      const std::uint64_t count = options_.consumers;
      one->start_at((first_batch_ + count - 1 - consumer) / count);
      // A consumer's release wakes waiting producers once per half its slots (or once each
      // waiting producer has a slot, where fewer wait), not once per slot: the wake-up (a
      // system call when the producer's thread sleeps) is the largest cost left on the
      // consumer's thread. Consumers kick before they wait.
      one->free_slots().wake_in_groups(std::max<std::size_t>(1, options_.prefetch / 2));
    }
    return made;
  }

  static std::vector<channel_state*> states_of(
      const std::vector<std::shared_ptr<channel_type>>& channels) {
    std::vector<channel_state*> states;
    states.reserve(channels.size());
    for (const auto& each : channels) states.push_back(each.get());
    return states;
  }

  const pipeline_options options_;
  const Transform prototype_;
  std::shared_ptr<reader_body<Source>> reader_;
  const std::uint64_t first_batch_;  // 0, or the batch a resumed pipeline starts from
  run_state run_;
  pipeline_counters counters_;
  release_poller poller_;  // armed once the channels exist
  thread_pool pool_;
  claim_sequencer<thread_pool> claims_;
  std::vector<std::shared_ptr<channel_type>> channels_;
  std::vector<channel_state*> states_;  // the same channels, as the non-template parts see them
  std::stop_callback<stop_claims_and_channels> stopping_;
  hang_watch hangs_;
  producer_loop<Source, Transform> producers_;
  delivery<slot_type> delivery_;
};

}  // namespace crema::detail
