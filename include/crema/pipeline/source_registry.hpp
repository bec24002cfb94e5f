#pragma once

#include <crema/core/error.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <unordered_map>

namespace crema {

/// @brief Lets pipelines that read the same data share one reader, as Caffe's DataReader shared
/// one body per database.
///
/// Entries are weak references keyed by the source's `key()` (name + ":" + location): the first
/// pipeline makes the shared reader, later ones with the same key get it, and it dies with the
/// last pipeline that holds it. Thread-safe (one mutex, taken only when a pipeline is made or
/// the registry is asked). Must outlive the pipelines registered in it.
class source_registry {
 public:
  /// @brief The live shared object registered under `key`, or a new one from `make()`.
  /// @tparam Shared the type shared under the key
  /// @param make returns a `std::shared_ptr<Shared>`; called with the registry's lock held
  /// @throws crema::config_error if `key` is registered for another type
  template <class Shared, class Make>
  std::shared_ptr<Shared> find_or_make(const std::string& key, Make&& make) {
    std::scoped_lock lock(mutex_);
    auto found = entries_.find(key);
    if (found != entries_.end()) {
      if (auto existing = found->second.object.lock()) {
        if (found->second.type != std::type_index(typeid(Shared))) {
          detail::fail<config_error>(
              "source_registry: key {} is shared by a source of another "
              "type",
              key);
        }
        return std::static_pointer_cast<Shared>(existing);
      }
    }
    std::shared_ptr<Shared> made = make();
    entries_.insert_or_assign(key, entry{made, std::type_index(typeid(Shared))});
    return made;
  }

  /// @return how many keys have a live shared object
  [[nodiscard]] std::size_t live_count() const {
    std::scoped_lock lock(mutex_);
    std::size_t live = 0;
    for (const auto& [key, value] : entries_) live += value.object.expired() ? 0 : 1;
    return live;
  }

 private:
  struct entry {
    std::weak_ptr<void> object;
    std::type_index type;
  };

  mutable std::mutex mutex_;
  std::unordered_map<std::string, entry> entries_;
};

}  // namespace crema
