#pragma once

#include <crema/core/error.hpp>
#include <crema/memory/resource.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>

namespace crema {
namespace detail {

// What an adaptor forwards to a device upstream: its stream type, copies and device id. A host
// upstream has none of them, and neither has the adaptor then.
template <class Derived, class Upstream>
class device_forwarding {};

template <class Derived, device_resource Upstream>
class device_forwarding<Derived, Upstream> {
 public:
  using stream_type = typename Upstream::stream_type;

  void fill_zero(void* destination, std::size_t bytes) { upstream().fill_zero(destination, bytes); }
  void copy_to_device(void* destination, const void* source, std::size_t bytes) {
    upstream().copy_to_device(destination, source, bytes);
  }
  void copy_to_host(void* destination, const void* source, std::size_t bytes) {
    upstream().copy_to_host(destination, source, bytes);
  }
  void copy_to_device_async(void* destination, const void* source, std::size_t bytes,
                            stream_type& stream) {
    upstream().copy_to_device_async(destination, source, bytes, stream);
  }
  void copy_to_host_async(void* destination, const void* source, std::size_t bytes,
                          stream_type& stream) {
    upstream().copy_to_host_async(destination, source, bytes, stream);
  }
  [[nodiscard]] int device_id() const {
    return static_cast<const Derived&>(*this).upstream().device_id();
  }

 private:
  Upstream& upstream() { return static_cast<Derived&>(*this).upstream_; }
};

}  // namespace detail

/// @brief Wraps a host or device resource and refuses allocations past a byte budget.
///
/// For tests of out-of-memory paths and for capping what one part of an engine may take.
/// A handle: copies share the budget and the byte count. A refused allocation throws
/// `crema::allocation_error` naming the bytes, the side, the limit and what is in use, and
/// leaves the count as it was; so does a failure of the upstream resource. Every member is
/// thread-safe; the count is a lock-free atomic. A device upstream's copies, streams and
/// device id pass through unchanged.
/// @tparam Upstream a `host_resource` or a `device_resource`
template <class Upstream>
requires host_resource<Upstream> || device_resource<Upstream>
class limiting_resource_adaptor
    : public detail::device_forwarding<limiting_resource_adaptor<Upstream>, Upstream> {
 public:
  /// @param upstream    the resource that provides the memory
  /// @param limit_bytes how many bytes may be allocated at once, in all
  limiting_resource_adaptor(Upstream upstream, std::size_t limit_bytes)
      : upstream_(std::move(upstream)), budget_(std::make_shared<budget>(limit_bytes)) {}

  /// @brief Allocates from upstream if the budget allows it.
  /// @throws crema::allocation_error past the budget, or when upstream fails
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = alignof(std::max_align_t)) {
    std::size_t used = budget_->used.load(std::memory_order_relaxed);
    do {
      if (bytes > budget_->limit - used) {
        throw allocation_error(
            bytes, side(),
            crema::detail::format("limit of {} bytes, {} in use", budget_->limit, used));
      }
    } while (!budget_->used.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    try {
      return upstream_.allocate(bytes, alignment);
    } catch (...) {
      budget_->used.fetch_sub(bytes, std::memory_order_relaxed);
      throw;
    }
  }
  /// @brief Returns memory to upstream and its bytes to the budget.
  void deallocate(void* pointer, std::size_t bytes,
                  std::size_t alignment = alignof(std::max_align_t)) noexcept {
    upstream_.deallocate(pointer, bytes, alignment);
    budget_->used.fetch_sub(bytes, std::memory_order_relaxed);
  }

  /// @return the bytes allocated through this adaptor and its copies, not yet deallocated
  [[nodiscard]] std::size_t allocated_bytes() const noexcept {
    return budget_->used.load(std::memory_order_relaxed);
  }
  /// @return the budget, in bytes
  [[nodiscard]] std::size_t limit() const noexcept { return budget_->limit; }
  /// @return the wrapped resource
  [[nodiscard]] const Upstream& upstream() const noexcept { return upstream_; }

 private:
  friend class detail::device_forwarding<limiting_resource_adaptor, Upstream>;

  struct budget {
    explicit budget(std::size_t limit_bytes) : limit(limit_bytes) {}
    const std::size_t limit;
    std::atomic<std::size_t> used{0};
  };

  static constexpr std::string_view side() noexcept {
    return device_resource<Upstream> ? "device" : "host";
  }

  Upstream upstream_;
  std::shared_ptr<budget> budget_;
};

}  // namespace crema
