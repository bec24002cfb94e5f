#include <crema/memory/device_span.hpp>

#include <doctest/doctest.h>

#include <array>
#include <type_traits>

TEST_SUITE("device_span") {
  TEST_CASE("a device_span carries a pointer and a size and nothing to dereference") {
    std::array<int, 8> storage{};
    const crema::device_span<int> span(storage.data(), storage.size());
    CHECK(span.data() == storage.data());
    CHECK(span.size() == 8);
    CHECK(span.size_bytes() == 32);
    CHECK_FALSE(span.empty());
    CHECK(crema::device_span<int>{}.empty());
  }

  TEST_CASE("a mutable device_span converts to a read-only one and not back") {
    static_assert(
        std::is_convertible_v<crema::device_span<float>, crema::device_span<const float>>);
    static_assert(
        !std::is_convertible_v<crema::device_span<const float>, crema::device_span<float>>);
    static_assert(!std::is_convertible_v<crema::device_span<float>, crema::device_span<double>>);
    std::array<float, 2> storage{};
    const crema::device_span<const float> view = crema::device_span<float>(storage.data(), 2);
    CHECK(view.data() == storage.data());
  }

  TEST_CASE("subspan checks its range and names it when out of bounds") {
    std::array<int, 8> storage{};
    const crema::device_span<int> span(storage.data(), storage.size());
    const auto middle = span.subspan(2, 4);
    CHECK(middle.data() == storage.data() + 2);
    CHECK(middle.size() == 4);
    CHECK(span.subspan(8, 0).empty());
    CHECK_THROWS_WITH_AS((void)span.subspan(6, 3),
                         "device_span::subspan: [6, 6+3) lies outside 8 elements",
                         crema::length_error);
    CHECK_THROWS_AS((void)span.subspan(9, 0), crema::length_error);
  }
}
