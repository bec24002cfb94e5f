#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

/// @file
/// The seam between where an encoded image is kept (a file of a folder or a list, an encoded
/// Datum of an LMDB) and the batchers that decode it: whatever holds it, a batcher sees the same
/// three things.

namespace crema {

/// @brief One encoded image (JPEG, PNG) as a batcher takes it, pointing into its reader's or
/// its record's bytes (valid while they are).
struct encoded_sample {
  std::span<const std::byte> bytes;  ///< the encoded file's bytes
  std::int32_t label = 0;            ///< its class
  std::string_view key;              ///< what errors name: the file's path or the record's key
};

}  // namespace crema
