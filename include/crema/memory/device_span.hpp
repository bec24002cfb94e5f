#pragma once

#include <crema/core/error.hpp>

#include <cstddef>
#include <type_traits>

namespace crema {

/// @brief A view of `size()` elements of type `T` in device memory: a pointer and a size.
///
/// Unlike `std::span` it has no element access and no iterators, so host code cannot dereference
/// device memory by accident; hand `data()` and `size()` to a kernel, a copy or a collective.
/// Converts from `device_span<U>` where `U(*)[]` converts to `T(*)[]` (non-const to const).
/// Trivially copyable; every member is `constexpr`, `noexcept` (but `subspan`), thread-safe and
/// never allocates.
/// @tparam T the element type, `const`-qualified for a read-only view
template <class T>
class device_span {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using size_type = std::size_t;
  using pointer = T*;

  /// @brief An empty view.
  constexpr device_span() noexcept = default;
  /// @brief A view of `size` elements starting at the device address `data`.
  constexpr device_span(T* data, size_type size) noexcept : data_(data), size_(size) {}
  /// @brief A view of the same memory with a more `const` element type.
  template <class U>
  requires std::is_convertible_v<U (*)[], T (*)[]>
  constexpr device_span(device_span<U> other) noexcept  // NOLINT(google-explicit-constructor)
      : data_(other.data()), size_(other.size()) {}

  /// @return the device address of the first element; not to be dereferenced on the host
  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  /// @return the number of elements
  [[nodiscard]] constexpr size_type size() const noexcept { return size_; }
  /// @return the number of bytes
  [[nodiscard]] constexpr size_type size_bytes() const noexcept { return size_ * sizeof(T); }
  /// @return whether the view has no elements
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }

  /// @brief The `count` elements that start at `offset`.
  /// @throws crema::length_error if the range does not lie inside this view
  [[nodiscard]] constexpr device_span subspan(size_type offset, size_type count) const {
    if (offset > size_ || count > size_ - offset) {
      detail::fail<length_error>("device_span::subspan: [{}, {}+{}) lies outside {} elements",
                                 offset, offset, count, size_);
    }
    return {data_ + offset, count};
  }

 private:
  T* data_ = nullptr;
  size_type size_ = 0;
};

static_assert(std::is_trivially_copyable_v<device_span<float>>);
static_assert(std::is_convertible_v<device_span<float>, device_span<const float>>);
static_assert(!std::is_convertible_v<device_span<const float>, device_span<float>>);

}  // namespace crema
