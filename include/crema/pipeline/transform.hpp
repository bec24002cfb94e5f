#pragma once

#include <crema/pipeline/sample_context.hpp>

#include <concepts>
#include <cstddef>
#include <functional>
#include <type_traits>

namespace crema {

/// @brief A transform that fills one batch-level object per slot, record by record:
/// `transform(record, batch, context)` fills record `context.index` of `batch`.
///
/// It names the object's type (`using batch_type = ...;`) and makes one per slot with
/// `make_batch(batch_context)`, once, for the consumer the slot belongs to (so that its device
/// memory is on that consumer's device); the pipeline never reallocates it. If the batch type has
/// `finish(const batch_info&)`, the producer calls it after the batch's last record and before
/// handing the batch on: the place to start an asynchronous upload (`device_batch` does). If it
/// has `after_record(std::size_t i)`, the producer calls it after the transform of record `i`, so
/// that a check of that record fails naming it (`device_batch` and `host_batch` refuse there, in
/// builds with misuse checks, a transform that wrote past its record).
template <class Transform, class Record>
concept batch_transform = requires {
  typename Transform::batch_type;
}
&&std::move_constructible<typename Transform::batch_type>&& requires(const Transform& transform,
                                                                     const batch_context& where) {
  { transform.make_batch(where) } -> std::same_as<typename Transform::batch_type>;
}
&&std::invocable<Transform&, const Record&, typename Transform::batch_type&, const sample_context&>;

/// @brief A transform that fills a preallocated item in place: `transform(record, item)` or
/// `transform(record, item, context)`, naming its item type (`using item_type = ...;`). The items
/// are made once per slot (so the item type must be default-constructible) and reused: the steady
/// state allocates nothing.
template <class Transform, class Record>
concept in_place_transform = requires {
  typename Transform::item_type;
}
&&std::default_initializable<typename Transform::item_type> &&
    (std::invocable<Transform&, const Record&, typename Transform::item_type&> ||
     std::invocable<Transform&, const Record&, typename Transform::item_type&,
                    const sample_context&>);

/// @brief A transform that returns each item: `item = transform(record)` or
/// `item = transform(record, context)`; the item is move-assigned into the slot.
template <class Transform, class Record>
concept item_transform = std::invocable<Transform&, const Record&> ||
    std::invocable<Transform&, const Record&, const sample_context&>;

/// @brief A transform a pipeline can run on records of `Record`: one of the three forms above,
/// copyable (each producer runs its own copy).
template <class Transform, class Record>
concept transform_for = std::copy_constructible<Transform> &&
    (batch_transform<Transform, Record> || in_place_transform<Transform, Record> ||
     item_transform<Transform, Record>);

namespace detail {

template <class Transform, class Record>
consteval bool takes_context() {
  if constexpr (in_place_transform<Transform, Record>) {
    return std::invocable<Transform&, const Record&, typename Transform::item_type&,
                          const sample_context&>;
  } else {
    return std::invocable<Transform&, const Record&, const sample_context&>;
  }
}

template <class Transform, class Record, bool WithContext = takes_context<Transform, Record>()>
struct returned_item {
  using type =
      std::remove_cvref_t<std::invoke_result_t<Transform&, const Record&, const sample_context&>>;
};
template <class Transform, class Record>
struct returned_item<Transform, Record, false> {
  using type = std::remove_cvref_t<std::invoke_result_t<Transform&, const Record&>>;
};

// The batch object a batch transform makes (a placeholder for the other forms).
template <class Transform, class Record>
struct batch_type_of {
  using type = char;
};
template <class Transform, class Record>
requires batch_transform<Transform, Record>
struct batch_type_of<Transform, Record> {
  using type = typename Transform::batch_type;
};

// A transform that names an item type that cannot be made ahead of time.
template <class Transform>
concept names_unmakeable_item = requires {
  typename Transform::item_type;
}
&&!std::default_initializable<typename Transform::item_type>;

// The per-record type a slot holds for the per-item forms (void for the batch form).
template <class Transform, class Record>
struct item_type_of {
  using type = void;
};
template <class Transform, class Record>
requires(!batch_transform<Transform, Record> &&
         in_place_transform<Transform, Record>) struct item_type_of<Transform, Record> {
  using type = typename Transform::item_type;
};
template <class Transform, class Record>
requires(!batch_transform<Transform, Record> && !in_place_transform<Transform, Record> &&
         item_transform<Transform, Record>) struct item_type_of<Transform, Record> {
  using type = typename returned_item<Transform, Record>::type;
};

// Runs a per-item transform on one record, into `item`.
template <class Transform, class Record, class Item>
void transform_item(Transform& transform, const Record& record, Item& item,
                    const sample_context& context) {
  if constexpr (in_place_transform<Transform, Record>) {
    if constexpr (takes_context<Transform, Record>()) {
      std::invoke(transform, record, item, context);
    } else {
      std::invoke(transform, record, item);
    }
  } else if constexpr (takes_context<Transform, Record>()) {
    item = std::invoke(transform, record, context);
  } else {
    item = std::invoke(transform, record);
  }
}

// Whether a batch object has the per-batch finishing step.
template <class Batch>
concept finishing_batch = requires(Batch& batch, const batch_info& info) {
  batch.finish(info);
};

}  // namespace detail
}  // namespace crema
