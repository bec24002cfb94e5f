#pragma once

#include <optional>
#include <string_view>

/// @file
/// The head-state machine of a host/device mirrored buffer, as a `constexpr` table.
///
/// The *head* says where the newest copy of the data is. Reads copy only when the other side is
/// newer and leave both sides equal (`synced`); writes make their side the head; the first touch of
/// a side allocates it and fills it with zeros. `synced_buffer` runs every access through
/// `transition()`, and the `static_assert`s at the end of this header pin every
/// (state, operation) pair, so the table is the machine.

namespace crema {

/// @brief Where the newest copy of a buffer's data is.
enum class head : unsigned char {
  uninitialized,  ///< neither side allocated yet
  at_host,        ///< the host copy is newer than the device copy (or the only one)
  at_device,      ///< the device copy is newer than the host copy (or the only one)
  synced,         ///< both copies exist and are equal
};

/// @brief What a caller does to a buffer.
enum class operation : unsigned char {
  read_host,       ///< `host()`: read the host copy
  write_host,      ///< `mutable_host()`: get the host copy for writing
  read_device,     ///< `device()`: read the device copy
  write_device,    ///< `mutable_device()`: get the device copy for writing
  borrow_host,     ///< `set_host_data()`: replace the host copy with the caller's memory
  borrow_device,   ///< `set_device_data()`: replace the device copy with the caller's memory
  upload_async,    ///< `upload_async()`: start copying the host copy to the device on a stream
  download_async,  ///< `download_async()`: start copying the device copy to the host on a stream
};

/// @brief The work an operation does before its side can be used.
enum class action : unsigned char {
  none,              ///< the side is current already
  zero_fill_host,    ///< allocate the host side and fill it with zeros
  zero_fill_device,  ///< allocate the device side and fill it with zeros
  copy_to_host,      ///< allocate the host side if needed and copy the device copy into it
  copy_to_device,    ///< allocate the device side if needed and copy the host copy into it
};

/// @brief One edge of the machine: the head after the operation and the work it takes.
struct step {
  head next;
  action work;
  friend constexpr bool operator==(const step&, const step&) = default;
};

/// @brief The edge that `op` takes from state `from`.
/// @return the step, or `std::nullopt` where the operation is not allowed in that state (an
///         asynchronous copy needs the newest data on the side it copies from)
[[nodiscard]] constexpr std::optional<step> transition(head from, operation op) noexcept {
  // A read makes its side current; a write does the same work, then makes its side the head.
  const auto read_host = [from]() -> step {
    switch (from) {
      case head::uninitialized:
        return {head::at_host, action::zero_fill_host};
      case head::at_device:
        return {head::synced, action::copy_to_host};
      default:
        return {from, action::none};
    }
  };
  const auto read_device = [from]() -> step {
    switch (from) {
      case head::uninitialized:
        return {head::at_device, action::zero_fill_device};
      case head::at_host:
        return {head::synced, action::copy_to_device};
      default:
        return {from, action::none};
    }
  };
  switch (op) {
    case operation::read_host:
      return read_host();
    case operation::write_host:
      return step{head::at_host, read_host().work};
    case operation::read_device:
      return read_device();
    case operation::write_device:
      return step{head::at_device, read_device().work};
    case operation::borrow_host:
      return step{head::at_host, action::none};
    case operation::borrow_device:
      return step{head::at_device, action::none};
    case operation::upload_async:
      if (from != head::at_host) return std::nullopt;
      return read_device();
    case operation::download_async:
      if (from != head::at_device) return std::nullopt;
      return read_host();
  }
  return std::nullopt;
}

/// @brief The name of a head state, as written in crema's messages ("at_host").
[[nodiscard]] constexpr std::string_view to_string(head h) noexcept {
  switch (h) {
    case head::uninitialized:
      return "uninitialized";
    case head::at_host:
      return "at_host";
    case head::at_device:
      return "at_device";
    case head::synced:
      return "synced";
  }
  return "invalid";
}

/// @brief The name of an operation, as written in crema's messages ("read_host").
[[nodiscard]] constexpr std::string_view to_string(operation op) noexcept {
  switch (op) {
    case operation::read_host:
      return "read_host";
    case operation::write_host:
      return "write_host";
    case operation::read_device:
      return "read_device";
    case operation::write_device:
      return "write_device";
    case operation::borrow_host:
      return "borrow_host";
    case operation::borrow_device:
      return "borrow_device";
    case operation::upload_async:
      return "upload_async";
    case operation::download_async:
      return "download_async";
  }
  return "invalid";
}

}  // namespace crema

// Every (state, operation) pair, written out: this is Caffe's SyncedMemory, plus the two
// asynchronous copies that need their source side to be the head.
namespace crema::detail::head_table {

constexpr bool is(head from, operation op, head next, action work) {
  return transition(from, op) == step{next, work};
}
constexpr bool refused(head from, operation op) { return !transition(from, op).has_value(); }

using enum head;
using enum operation;
using enum action;

static_assert(is(uninitialized, read_host, at_host, zero_fill_host));
static_assert(is(uninitialized, write_host, at_host, zero_fill_host));
static_assert(is(uninitialized, read_device, at_device, zero_fill_device));
static_assert(is(uninitialized, write_device, at_device, zero_fill_device));
static_assert(is(uninitialized, borrow_host, at_host, none));
static_assert(is(uninitialized, borrow_device, at_device, none));
static_assert(refused(uninitialized, upload_async));
static_assert(refused(uninitialized, download_async));

static_assert(is(at_host, read_host, at_host, none));
static_assert(is(at_host, write_host, at_host, none));
static_assert(is(at_host, read_device, synced, copy_to_device));
static_assert(is(at_host, write_device, at_device, copy_to_device));
static_assert(is(at_host, borrow_host, at_host, none));
static_assert(is(at_host, borrow_device, at_device, none));
static_assert(is(at_host, upload_async, synced, copy_to_device));
static_assert(refused(at_host, download_async));

static_assert(is(at_device, read_host, synced, copy_to_host));
static_assert(is(at_device, write_host, at_host, copy_to_host));
static_assert(is(at_device, read_device, at_device, none));
static_assert(is(at_device, write_device, at_device, none));
static_assert(is(at_device, borrow_host, at_host, none));
static_assert(is(at_device, borrow_device, at_device, none));
static_assert(refused(at_device, upload_async));
static_assert(is(at_device, download_async, synced, copy_to_host));

static_assert(is(synced, read_host, synced, none));
static_assert(is(synced, write_host, at_host, none));
static_assert(is(synced, read_device, synced, none));
static_assert(is(synced, write_device, at_device, none));
static_assert(is(synced, borrow_host, at_host, none));
static_assert(is(synced, borrow_device, at_device, none));
static_assert(refused(synced, upload_async));
static_assert(refused(synced, download_async));

}  // namespace crema::detail::head_table
