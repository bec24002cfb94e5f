// Diff compression: IEEE half conversion against the format's own rules, the coordinates each
// rule sends, error feedback that loses nothing, and messages that are refused.
#include <crema/collective/ps/compression.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace {

using crema::detail::from_half;
using crema::detail::to_half;

std::vector<float> random_diff(std::size_t count, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> diff(count);
  for (auto& value : diff) value = normal(generator);
  return diff;
}

// Encodes one diff and decodes it into zeros: what the server adds.
template <class T>
std::vector<T> round_trip(crema::diff_encoder<T>& encoder, const std::vector<T>& diff,
                          std::size_t* bytes = nullptr) {
  std::vector<std::byte> message;
  encoder.encode(diff, message);
  if (bytes) *bytes = message.size();
  std::vector<T> decoded(diff.size());
  CHECK(crema::add_encoded_diff<T>(message, decoded) == message.size());
  return decoded;
}

std::size_t nonzeros(const std::vector<float>& values) {
  return static_cast<std::size_t>(
      std::count_if(values.begin(), values.end(), [](float v) { return v != 0.0f; }));
}

}  // namespace

TEST_SUITE("compression") {
  TEST_CASE("every finite half converts to float and back to the same bits") {
    for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
      const auto half = static_cast<std::uint16_t>(bits);
      const bool nan = (half & 0x7c00) == 0x7c00 && (half & 0x3ff) != 0;
      if (nan) {
        CHECK(std::isnan(from_half(half)));
        CHECK((to_half(from_half(half)) & 0x7fff) > 0x7c00);  // stays a NaN
        continue;
      }
      REQUIRE(to_half(from_half(half)) == half);
    }
    CHECK(from_half(0x3c00) == 1.0f);
    CHECK(from_half(0x7bff) == 65504.0f);
    CHECK(from_half(0x0001) == std::ldexp(1.0f, -24));
    CHECK(from_half(0xc000) == -2.0f);
  }

  TEST_CASE("a float becomes the nearest half, ties to even, past 65504 infinity") {
    // Between 1 and the next half (1 + 2^-10): halfway goes to the even one, 1.
    CHECK(to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
    CHECK(to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
    CHECK(to_half(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)) == 0x3c01);
    CHECK(to_half(65519.0f) == 0x7bff);
    CHECK(to_half(65520.0f) == 0x7c00);
    CHECK(to_half(-1e30f) == 0xfc00);
    CHECK(to_half(std::ldexp(1.0f, -25)) == 0x0000);  // halfway to the smallest: even, zero
    CHECK(to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
    CHECK(to_half(std::ldexp(3.0f, -25)) == 0x0002);  // halfway between 1 and 2 units: even
    CHECK(to_half(-0.0f) == 0x8000);
    // Any float in range lands on a half no farther than either neighbour.
    std::mt19937 generator(7);
    std::uniform_real_distribution<float> exponent(-26.0f, 15.9f);
    for (int i = 0; i < 200000; ++i) {
      const float value = std::exp2(exponent(generator)) * (i % 2 ? -1.0f : 1.0f);
      const std::uint16_t half = to_half(value);
      const float nearest = from_half(half);
      const float error = std::abs(value - nearest);
      for (const int step : {-1, 1}) {
        const auto neighbour = static_cast<std::uint16_t>(half + step);
        if ((neighbour & 0x7fff) >= 0x7c00 || (neighbour & 0x8000) != (half & 0x8000)) continue;
        REQUIRE(error <= std::abs(value - from_half(neighbour)));
      }
    }
  }

  TEST_CASE("the dense half loops give the one-by-one conversion's bits, where F16C is used too") {
    std::vector<float> values = random_diff(1003, 9, 1e3f);  // not a multiple of 8
    values[0] = 1e6f;
    values[1] = -1e6f;
    values[2] = std::numeric_limits<float>::quiet_NaN();
    values[3] = std::numeric_limits<float>::infinity();
    values[4] = std::ldexp(1.0f, -25);
    values[5] = 1.0f + std::ldexp(1.0f, -11);
    values[6] = -0.0f;
    for (std::size_t i = 7; i < 200; ++i)
      values[i] = std::ldexp(values[i], -30);  // subnormal halves
    auto owed_fast = values;
    auto owed_slow = values;
    std::vector<std::byte> fast(values.size() * 2);
    std::vector<std::byte> slow(values.size() * 2);
    crema::detail::send_halves(owed_fast.data(), fast.data(), values.size());
    crema::detail::send_halves_one_by_one(owed_slow.data(), slow.data(), values.size());
    CHECK(fast == slow);
    CHECK(std::memcmp(owed_fast.data(), owed_slow.data(), values.size() * sizeof(float)) == 0);
    std::vector<float> sum_fast(values.size(), 1.0f);
    std::vector<float> sum_slow(values.size(), 1.0f);
    crema::detail::add_halves(fast.data(), sum_fast.data(), values.size());
    crema::detail::add_halves_one_by_one(fast.data(), sum_slow.data(), values.size());
    CHECK(std::memcmp(sum_fast.data(), sum_slow.data(), values.size() * sizeof(float)) == 0);
  }

  TEST_CASE("none sends every coordinate as it is and owes nothing") {
    const auto diff = random_diff(1000, 1);
    crema::diff_encoder<float> encoder(diff.size(), {});
    std::size_t bytes = 0;
    CHECK(round_trip(encoder, diff, &bytes) == diff);
    CHECK(bytes == crema::dense_diff_bytes<float>(diff.size()));
    CHECK(
        std::all_of(encoder.owed().begin(), encoder.owed().end(), [](float v) { return v == 0; }));
  }

  TEST_CASE("top_k sends exactly the k largest magnitudes and owes the rest") {
    for (const std::size_t count : {1000U, 1U << 20}) {  // the second goes through the sample
      CAPTURE(count);
      const auto diff = random_diff(count, 2);
      crema::diff_encoder<float> encoder(count, crema::compression::top_k(0.01));
      std::size_t bytes = 0;
      const auto sent = round_trip(encoder, diff, &bytes);
      const std::size_t k = (count + 99) / 100;
      REQUIRE(nonzeros(sent) == k);
      std::vector<float> magnitudes(count);
      std::transform(diff.begin(), diff.end(), magnitudes.begin(),
                     [](float v) { return std::abs(v); });
      std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(k - 1),
                       magnitudes.end(), std::greater<float>());
      const float kth = magnitudes[k - 1];
      for (std::size_t i = 0; i < count; ++i) {
        if (sent[i] != 0.0f) {
          REQUIRE(sent[i] == diff[i]);
          REQUIRE(std::abs(diff[i]) >= kth);
          REQUIRE(encoder.owed()[i] == 0.0f);
        } else {
          REQUIRE(std::abs(diff[i]) <= kth);
          REQUIRE(encoder.owed()[i] == diff[i]);
        }
      }
      // 1%: a header and k (index, value) pairs, about 2% of the dense bytes.
      CHECK(bytes == sizeof(crema::detail::diff_header) + k * 8);
    }
  }

  TEST_CASE("threshold sends the coordinates whose owed magnitude reaches it") {
    // Zeros after: the sparse message is the smaller one.
    std::vector<float> diff{0.5f, -0.05f, 0.2f, -0.2f, 0.0f, 1e-3f};
    diff.resize(40);
    crema::diff_encoder<float> encoder(diff.size(), crema::compression::above(0.2));
    auto sent = round_trip(encoder, diff);
    sent.resize(6);
    CHECK(sent == std::vector<float>{0.5f, 0, 0.2f, -0.2f, 0, 0});
    CHECK(std::vector<float>(encoder.owed().begin(), encoder.owed().begin() + 6) ==
          std::vector<float>{0, -0.05f, 0, 0, 0, 1e-3f});
  }

  TEST_CASE("error feedback: a small persistent gradient is not lost") {
    // Coordinate 0 gets 1e-3 every time while the others get far larger values: top-k and the
    // threshold never pick it at first, but what it is owed grows until it is sent.
    constexpr std::size_t count = 100;
    for (const auto how : {crema::compression::top_k(0.05), crema::compression::above(0.5),
                           crema::compression::top_k(0.05).with_fp16()}) {
      crema::diff_encoder<float> encoder(count, how);
      std::vector<double> arrived(count, 0.0);
      std::vector<double> given(count, 0.0);
      for (std::uint32_t step = 0; step < 4000; ++step) {
        auto diff = random_diff(count, 100 + step, 0.1f);
        diff[0] = 1e-3f;
        const auto sent = round_trip(encoder, diff);
        for (std::size_t i = 0; i < count; ++i) {
          arrived[i] += sent[i];
          given[i] += diff[i];
        }
      }
      // Everything given has arrived or is still owed (to rounding), and coordinate 0's 4.0 has
      // mostly arrived.
      for (std::size_t i = 0; i < count; ++i) {
        REQUIRE(std::abs(arrived[i] + encoder.owed()[i] - given[i]) < 1e-3);
      }
      CHECK(arrived[0] > 3.0);
    }
  }

  TEST_CASE("without error feedback what is not sent is lost") {
    crema::compression how = crema::compression::top_k(0.05);
    how.error_feedback = false;
    crema::diff_encoder<float> encoder(100, how);
    double arrived = 0.0;
    for (std::uint32_t step = 0; step < 200; ++step) {
      auto diff = random_diff(100, 100 + step, 0.1f);
      diff[0] = 1e-3f;
      arrived += round_trip(encoder, diff)[0];
    }
    CHECK(arrived == 0.0);
    CHECK(
        std::all_of(encoder.owed().begin(), encoder.owed().end(), [](float v) { return v == 0; }));
  }

  TEST_CASE("fp16 halves the bytes and owes its rounding, clamping past 65504") {
    const std::vector<float> diff{1.0f / 3.0f, 1e5f, -7.0f, 1e-9f};
    crema::diff_encoder<float> encoder(diff.size(), crema::compression{}.with_fp16());
    std::size_t bytes = 0;
    const auto sent = round_trip(encoder, diff, &bytes);
    CHECK(bytes == sizeof(crema::detail::diff_header) + diff.size() * 2);
    CHECK(sent[0] == from_half(to_half(1.0f / 3.0f)));
    CHECK(sent[1] == 65504.0f);
    CHECK(sent[2] == -7.0f);
    CHECK(sent[3] == 0.0f);
    for (std::size_t i = 0; i < diff.size(); ++i) CHECK(sent[i] + encoder.owed()[i] == diff[i]);
  }

  TEST_CASE("a sparse message larger than the dense one is sent dense") {
    crema::diff_encoder<float> encoder(10, crema::compression::top_k(0.9));
    std::size_t bytes = 0;
    const auto diff = random_diff(10, 3);
    CHECK(round_trip(encoder, diff, &bytes) == diff);
    CHECK(bytes == crema::dense_diff_bytes<float>(10));
  }

  TEST_CASE("double diffs travel as doubles or halves") {
    std::vector<double> diff{0.1, -2.5, 1e-12};
    crema::diff_encoder<double> plain(3, {});
    CHECK(round_trip(plain, diff) == diff);
    crema::diff_encoder<double> half(3, crema::compression{}.with_fp16());
    const auto sent = round_trip(half, diff);
    CHECK(sent[1] == -2.5);
    CHECK(sent[0] + half.owed()[0] == diff[0]);
  }

  TEST_CASE("bad settings and bad messages are refused by name") {
    CHECK_THROWS_WITH_AS(crema::diff_encoder<float>(10, crema::compression::top_k(0.0)),
                         doctest::Contains("fraction must be in (0, 1], got 0"),
                         crema::config_error);
    CHECK_THROWS_AS(crema::diff_encoder<float>(10, crema::compression::top_k(1.5)),
                    crema::config_error);
    CHECK_THROWS_WITH_AS(crema::diff_encoder<float>(10, crema::compression::above(-1)),
                         doctest::Contains("threshold must be finite"), crema::config_error);
    CHECK_THROWS_AS(crema::diff_encoder<float>(10, crema::compression::above(NAN)),
                    crema::config_error);
    crema::diff_encoder<float> encoder(10, crema::compression::top_k(0.2));
    std::vector<std::byte> message;
    CHECK_THROWS_WITH_AS(encoder.encode(std::vector<float>(9), message),
                         doctest::Contains("a diff of 9 elements, expected 10"),
                         crema::length_error);
    encoder.encode(random_diff(10, 4), message);
    std::vector<float> into(10);
    CHECK_THROWS_WITH_AS(
        crema::add_encoded_diff<float>(std::span(message).first(message.size() - 1), into),
        doctest::Contains("its header says"), crema::format_error);
    CHECK_THROWS_WITH_AS(crema::add_encoded_diff<float>(std::span(message).first(8), into),
                         doctest::Contains("shorter than its"), crema::format_error);
    std::vector<float> wrong(11);
    CHECK_THROWS_WITH_AS(crema::add_encoded_diff<float>(message, wrong),
                         doctest::Contains("of 10 elements, expected 11"), crema::format_error);
    auto bad_index = message;
    const std::uint32_t far = 10;
    std::memcpy(bad_index.data() + sizeof(crema::detail::diff_header), &far, sizeof far);
    CHECK_THROWS_WITH_AS(crema::add_encoded_diff<float>(bad_index, into),
                         doctest::Contains("coordinate 10 of a diff of 10"), crema::format_error);
    CHECK(std::all_of(into.begin(), into.end(), [](float v) { return v == 0; }));  // untouched
    auto bad_format = message;
    bad_format[0] = std::byte{0};
    CHECK_THROWS_WITH_AS(crema::add_encoded_diff<float>(bad_format, into),
                         doctest::Contains("unknown format"), crema::format_error);
  }

  TEST_CASE(
      "encoded_diff_bytes says how long a diff is, checking its header as "
      "add_encoded_diff does, and adds nothing") {
    crema::diff_encoder<float> encoder(10, crema::compression::top_k(0.2));
    std::vector<std::byte> message;
    encoder.encode(random_diff(10, 4), message);
    CHECK(crema::encoded_diff_bytes<float>(message, 10) == message.size());
    // What a server receives: the diff and whatever a client put after it.
    auto longer = message;
    longer.resize(message.size() + 5);
    CHECK(crema::encoded_diff_bytes<float>(longer, 10) == message.size());
    CHECK_THROWS_WITH_AS(
        crema::encoded_diff_bytes<float>(std::span(message).first(message.size() - 1), 10),
        doctest::Contains("its header says"), crema::format_error);
    CHECK_THROWS_WITH_AS(crema::encoded_diff_bytes<float>(message, 11),
                         doctest::Contains("of 10 elements, expected 11"), crema::format_error);
    CHECK_THROWS_WITH_AS(crema::encoded_diff_bytes<double>(message, 10),
                         doctest::Contains("values of 4 bytes, expected 2 or 8"),
                         crema::format_error);
    // A sparse header claiming more coordinates than elements.
    auto too_many = message;
    crema::detail::diff_header header;
    std::memcpy(&header, too_many.data(), sizeof header);
    header.sent = 11;
    std::memcpy(too_many.data(), &header, sizeof header);
    CHECK_THROWS_WITH_AS(crema::encoded_diff_bytes<float>(too_many, 10),
                         doctest::Contains("11 coordinates sent of 10"), crema::format_error);
  }
}
