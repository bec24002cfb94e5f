#pragma once

#include <coroutine>
#include <exception>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>

namespace crema {

/// @brief A lazy, move-only sequence produced by a coroutine (`co_yield`), consumed by range-for.
///
/// The coroutine runs only while the consumer advances: `begin()` runs it to its first
/// `co_yield`, each `++` to the next. A yielded value is referred to, not copied: `*it` is valid
/// until the iterator is advanced. An exception thrown by the coroutine propagates out of
/// `begin()` or `++` in the consumer. Not thread-safe: one thread at a time advances a
/// generator. Creating one allocates its coroutine frame.
/// @tparam T the yielded type; `*it` is a `T&` (or `T` itself when `T` is a reference)
template <class T>
class generator {
 public:
  using value_type = std::remove_cvref_t<T>;
  using reference = std::conditional_t<std::is_reference_v<T>, T, T&>;
  using pointer = std::add_pointer_t<reference>;

  class promise_type {
   public:
    generator get_return_object() noexcept {
      return generator{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    std::suspend_always final_suspend() const noexcept { return {}; }

    // The yielded object lives in the coroutine frame (a temporary lives until the coroutine
    // resumes), so pointing at it is enough.
    std::suspend_always yield_value(std::remove_reference_t<T>& value) noexcept {
      value_ = std::addressof(value);
      return {};
    }
    std::suspend_always yield_value(std::remove_reference_t<T>&& value) noexcept {
      value_ = std::addressof(value);
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { exception_ = std::current_exception(); }
    template <class U>
    std::suspend_never await_transform(U&&) = delete;  // a generator cannot co_await

    [[nodiscard]] reference value() const noexcept { return static_cast<reference>(*value_); }
    void rethrow_if_failed() const {
      if (exception_) std::rethrow_exception(exception_);
    }

   private:
    pointer value_ = nullptr;
    std::exception_ptr exception_;
  };

  struct sentinel {};

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using difference_type = std::ptrdiff_t;
    using value_type = generator::value_type;
    using reference = generator::reference;
    using pointer = generator::pointer;

    iterator() noexcept = default;
    explicit iterator(std::coroutine_handle<promise_type> coroutine) noexcept
        : coroutine_(coroutine) {}

    friend bool operator==(const iterator& it, sentinel) noexcept {
      return !it.coroutine_ || it.coroutine_.done();
    }
    iterator& operator++() {
      coroutine_.resume();
      if (coroutine_.done()) coroutine_.promise().rethrow_if_failed();
      return *this;
    }
    void operator++(int) { ++*this; }
    [[nodiscard]] reference operator*() const noexcept { return coroutine_.promise().value(); }
    [[nodiscard]] pointer operator->() const noexcept { return std::addressof(**this); }

   private:
    std::coroutine_handle<promise_type> coroutine_;
  };

  generator() noexcept = default;
  generator(generator&& other) noexcept : coroutine_(std::exchange(other.coroutine_, {})) {}
  generator& operator=(generator&& other) noexcept {
    std::swap(coroutine_, other.coroutine_);
    return *this;
  }
  generator(const generator&) = delete;
  generator& operator=(const generator&) = delete;
  ~generator() {
    if (coroutine_) coroutine_.destroy();
  }

  /// @brief Runs the coroutine to its first `co_yield`. Call once.
  /// @throws whatever the coroutine throws before yielding
  [[nodiscard]] iterator begin() {
    if (coroutine_) {
      coroutine_.resume();
      if (coroutine_.done()) coroutine_.promise().rethrow_if_failed();
    }
    return iterator{coroutine_};
  }
  [[nodiscard]] sentinel end() const noexcept { return {}; }

 private:
  explicit generator(std::coroutine_handle<promise_type> coroutine) noexcept
      : coroutine_(coroutine) {}

  std::coroutine_handle<promise_type> coroutine_;
};

}  // namespace crema
