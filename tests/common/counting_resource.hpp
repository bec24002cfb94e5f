#pragma once

#include <crema/memory/host_malloc_resource.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace crema::test {

/// A host resource that remembers every pointer it handed out and took back, so a test can
/// prove that owned memory is freed exactly once and borrowed memory never.
class counting_host_resource {
 public:
  struct ledger {
    std::mutex mutex;
    std::vector<const void*> allocated;
    std::vector<const void*> deallocated;
  };

  counting_host_resource() : ledger_(std::make_shared<ledger>()) {}

  void* allocate(std::size_t bytes, std::size_t alignment) {
    void* pointer = upstream_.allocate(bytes, alignment);
    std::scoped_lock lock(ledger_->mutex);
    ledger_->allocated.push_back(pointer);
    return pointer;
  }
  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment) noexcept {
    {
      std::scoped_lock lock(ledger_->mutex);
      ledger_->deallocated.push_back(pointer);
    }
    upstream_.deallocate(pointer, bytes, alignment);
  }

  [[nodiscard]] std::size_t allocations() const {
    std::scoped_lock lock(ledger_->mutex);
    return ledger_->allocated.size();
  }
  [[nodiscard]] std::size_t deallocations() const {
    std::scoped_lock lock(ledger_->mutex);
    return ledger_->deallocated.size();
  }
  /// How many times `pointer` was handed back.
  [[nodiscard]] std::size_t times_freed(const void* pointer) const {
    std::scoped_lock lock(ledger_->mutex);
    return static_cast<std::size_t>(
        std::count(ledger_->deallocated.begin(), ledger_->deallocated.end(), pointer));
  }

 private:
  host_malloc_resource upstream_;
  std::shared_ptr<ledger> ledger_;
};

}  // namespace crema::test
