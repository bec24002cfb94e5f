// WebDataset shards read by every rank of an MPI job (1, 2 or 4 ranks): balanced, every rank
// gets as many batches of the pipeline as every other, and the ranks' shares are disjoint and
// together cover every sample (padded, a few are read twice; dropped, a few are left out).

#include <crema/io/shards/tar.hpp>
#include <crema/io/shards/webdataset_source.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "collective/mpi/mpi_world.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Shards of 7, 5 and 1 samples (13: a multiple of no world size above 1), written by rank 0
// into a folder every rank names alike.
std::vector<std::string> shared_shards(const crema::test::mpi_world& world) {
  int pid = ::getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const fs::path folder = fs::temp_directory_path() / fmt::format("crema-mpi-shards-{}", pid);
  std::vector<std::string> paths;
  std::size_t next = 0;
  for (const std::size_t samples : {7, 5, 1}) {
    paths.push_back((folder / fmt::format("s-{}.tar", paths.size())).string());
    if (world.rank != 0) continue;
    fs::create_directories(folder);
    crema::tar_writer tar(paths.back());
    for (std::size_t i = 0; i < samples; ++i, ++next) {
      const std::string key = fmt::format("k{:03}", next);
      const auto bytes = std::as_bytes(std::span(key));
      tar.add(key + ".txt", bytes);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return paths;
}

}  // namespace

TEST_SUITE("sharded sources across ranks") {
  TEST_CASE("every rank the same number of batches; shares disjoint and covering") {
    const crema::test::mpi_world world;
    const auto shards = shared_shards(world);
    for (const auto balance : {crema::shard_balance::pad, crema::shard_balance::drop}) {
      CAPTURE(static_cast<int>(balance));
      crema::webdataset_source source(shards);
      source.shuffle(17);
      source.balance(balance);
      source.shard(static_cast<std::size_t>(world.rank), static_cast<std::size_t>(world.ranks));
      crema::double_buffered_pipeline pipe{
          std::move(source),
          [](const crema::webdataset_record& record) { return std::string(record.key()); },
          {.batch_size = 2,
           .producers = 2,
           .threads = 2,
           .mode = crema::pipeline_mode::single_pass,
           .seed = 17}};
      int batches = 0;
      std::vector<char> keys;  // this rank's keys, each 4 characters
      for (auto batch : pipe.consumer(0)) {
        ++batches;
        for (const std::string& key : *batch) keys.insert(keys.end(), key.begin(), key.end());
      }
      int fewest = 0;
      int most = 0;
      MPI_Allreduce(&batches, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(&batches, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      CHECK(fewest == most);
      CHECK(batches > 0);
      // Every rank's keys at rank 0: padded, all 13 with the fewest read twice; dropped, each
      // read once.
      const int count = static_cast<int>(keys.size());
      std::vector<int> counts(static_cast<std::size_t>(world.ranks));
      MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
      std::vector<int> offsets(counts.size());
      int total = 0;
      for (std::size_t r = 0; r < counts.size(); ++r) {
        offsets[r] = total;
        total += counts[r];
      }
      std::vector<char> all(static_cast<std::size_t>(world.rank == 0 ? total : 0));
      MPI_Gatherv(keys.data(), count, MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR,
                  0, MPI_COMM_WORLD);
      if (world.rank == 0) {
        std::multiset<std::string> read;
        for (std::size_t at = 0; at + 4 <= all.size(); at += 4) read.emplace(&all[at], 4);
        const std::set<std::string> distinct(read.begin(), read.end());
        const auto ranks = static_cast<std::size_t>(world.ranks);
        if (balance == crema::shard_balance::pad) {
          CHECK(distinct.size() == 13);
          CHECK(read.size() == (13 + ranks - 1) / ranks * ranks);
        } else {
          CHECK(read.size() == 13 / ranks * ranks);
          CHECK(distinct.size() == read.size());
        }
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (world.rank == 0) fs::remove_all(fs::path(shards.front()).parent_path());
  }
}
