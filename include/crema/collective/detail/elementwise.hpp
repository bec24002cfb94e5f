#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace crema::detail {

// The element-wise loops a host reducer runs over every element of every buffer. Users compile
// crema's headers with their own flags, and at -O2 GCC leaves plain loops over two pointers that
// may alias unvectorized (it would need run-time overlap checks); for float and double these are
// written with the compilers' vector extensions instead, so they run on vector registers at any
// optimisation level. Each lane does exactly the scalar operation, in the same order: results are
// the same bits as the plain loops'.

template <class T>
inline constexpr bool has_vector_loops =
#if defined(__GNUC__)
    std::is_same_v<T, float> || std::is_same_v<T, double>;
#else
    false;
#endif

#if defined(__GNUC__)
// 32 bytes: one AVX register, or two SSE registers where AVX is not enabled. (The attribute
// applies to a concrete type only: GCC ignores it on a template parameter.)
typedef float float_vector __attribute__((vector_size(32)));
typedef double double_vector __attribute__((vector_size(32)));
template <class T>
using vector_of = std::conditional_t<std::is_same_v<T, float>, float_vector, double_vector>;
#endif

// out[i] = out[i] + from[i]
template <class T>
void add_into(T* out, const T* from, std::size_t count) {
  std::size_t i = 0;
#if defined(__GNUC__)
  if constexpr (has_vector_loops<T>) {
    using vector = vector_of<T>;
    constexpr std::size_t lanes = sizeof(vector) / sizeof(T);
    for (; i + lanes <= count; i += lanes) {
      vector sum;
      vector other;
      std::memcpy(&sum, out + i, sizeof sum);  // unaligned loads and stores
      std::memcpy(&other, from + i, sizeof other);
      sum += other;
      std::memcpy(out + i, &sum, sizeof sum);
    }
  }
#endif
  for (; i < count; ++i) out[i] = out[i] + from[i];
}

// out[i] = values[i] * scale
template <class T, class Scale>
void scale_into(T* out, const T* values, std::size_t count, Scale scale) {
  std::size_t i = 0;
#if defined(__GNUC__)
  if constexpr (has_vector_loops<T> && std::is_same_v<T, Scale>) {
    using vector = vector_of<T>;
    constexpr std::size_t lanes = sizeof(vector) / sizeof(T);
    for (; i + lanes <= count; i += lanes) {
      vector product;
      std::memcpy(&product, values + i, sizeof product);
      product *= scale;
      std::memcpy(out + i, &product, sizeof product);
    }
  }
#endif
  for (; i < count; ++i) out[i] = values[i] * scale;
}

}  // namespace crema::detail
