#include <crema/memory/head.hpp>

#include <doctest/doctest.h>

#include <array>
#include <set>
#include <utility>

namespace {

constexpr std::array all_heads{crema::head::uninitialized, crema::head::at_host,
                               crema::head::at_device, crema::head::synced};
constexpr std::array all_operations{
    crema::operation::read_host,    crema::operation::write_host,
    crema::operation::read_device,  crema::operation::write_device,
    crema::operation::borrow_host,  crema::operation::borrow_device,
    crema::operation::upload_async, crema::operation::download_async};

}  // namespace

TEST_SUITE("head") {
  TEST_CASE("every state is reachable from uninitialized through the table") {
    std::set<crema::head> reached{crema::head::uninitialized};
    for (int round = 0; round < 4; ++round) {
      for (const auto from : std::set(reached)) {
        for (const auto op : all_operations) {
          if (const auto next = crema::transition(from, op)) reached.insert(next->next);
        }
      }
    }
    CHECK(reached.size() == all_heads.size());
  }

  TEST_CASE("a write always leaves its own side as the head") {
    for (const auto from : all_heads) {
      CHECK(crema::transition(from, crema::operation::write_host)->next == crema::head::at_host);
      CHECK(crema::transition(from, crema::operation::write_device)->next ==
            crema::head::at_device);
    }
  }

  TEST_CASE("a read never copies unless the other side is strictly newer") {
    for (const auto from : all_heads) {
      const auto up = crema::transition(from, crema::operation::read_device)->work;
      const auto down = crema::transition(from, crema::operation::read_host)->work;
      CHECK((up == crema::action::copy_to_device) == (from == crema::head::at_host));
      CHECK((down == crema::action::copy_to_host) == (from == crema::head::at_device));
    }
  }

  TEST_CASE("only the side holding the newest data may start an asynchronous copy") {
    std::set<std::pair<crema::head, crema::operation>> allowed;
    for (const auto from : all_heads) {
      for (const auto op : {crema::operation::upload_async, crema::operation::download_async}) {
        if (crema::transition(from, op)) allowed.insert({from, op});
      }
    }
    CHECK(allowed == std::set<std::pair<crema::head, crema::operation>>{
                         {crema::head::at_host, crema::operation::upload_async},
                         {crema::head::at_device, crema::operation::download_async}});
  }

  TEST_CASE("states and operations have the names used in messages") {
    CHECK(crema::to_string(crema::head::uninitialized) == "uninitialized");
    CHECK(crema::to_string(crema::head::at_host) == "at_host");
    CHECK(crema::to_string(crema::head::at_device) == "at_device");
    CHECK(crema::to_string(crema::head::synced) == "synced");
    CHECK(crema::to_string(crema::operation::upload_async) == "upload_async");
    CHECK(crema::to_string(crema::operation::borrow_device) == "borrow_device");
  }
}
