#pragma once

#include <crema/core/error.hpp>
#include <crema/io/encoded_sample.hpp>
#include <crema/io/shards/tar.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

/// @file
/// WebDataset's layout of a tar shard: consecutive members whose names share a key (the path up
/// to the first dot of the file name) are one sample, each member named by the rest of its name,
/// its extension (lowercased): `n01440764/ILSVRC2012_val_00000293.jpg` and `....cls` make one
/// sample with a `jpg` and a `cls`. Members whose file name starts with `__` (`__key__`,
/// WebDataset's own) are passed over. Component: core.

namespace crema {

/// @brief Where one member of a sample lies in its shard, and its extension.
struct webdataset_member {
  std::string extension;  ///< lowercased, without the first dot ("jpg", "seg.png")
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

/// @brief One sample of a shard, as an index of it has it: its key and its members in the
/// shard's order.
struct webdataset_entry {
  std::string key;
  std::vector<webdataset_member> members;
};

/// @brief A tar member's name split as WebDataset splits it: the key (everything up to the
/// first dot of the file name, the folders included) and the extension after that dot,
/// lowercased; a file name without a dot is all key, with an empty extension.
[[nodiscard]] inline std::pair<std::string_view, std::string> webdataset_split(
    std::string_view name) {
  const std::size_t slash = name.rfind('/');
  const std::size_t file = slash == std::string_view::npos ? 0 : slash + 1;
  const std::size_t dot = name.find('.', file);
  if (dot == std::string_view::npos) return {name, std::string()};
  std::string extension(name.substr(dot + 1));
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return {name.substr(0, dot), std::move(extension)};
}

/// @return whether WebDataset passes member `name` over: its file name starts with `__`
///         (`__key__`, `__meta__.json`, ...)
[[nodiscard]] inline bool webdataset_passed_over(std::string_view name) noexcept {
  const std::size_t slash = name.rfind('/');
  return name.substr(slash == std::string_view::npos ? 0 : slash + 1).starts_with("__");
}

/// @brief The samples of one tar shard one after another, from its headers alone (no member's
/// data is read): consecutive members of one key make a sample, `__` files passed over. What a
/// source that streams a shard reads, and what `index_webdataset` collects.
/// @tparam Shard has `read_at(offset, span<byte>)`, `size()` and `path()` (`shard_file`)
template <class Shard>
class webdataset_scanner {
 public:
  explicit webdataset_scanner(const Shard& shard) noexcept : shard_(&shard), members_(shard) {}

  /// @return the next sample, or nothing at the shard's end
  /// @throws crema::format_error naming the shard and the offset for a malformed archive, and
  ///         naming the shard and the key for a sample with two members of one extension
  [[nodiscard]] std::optional<webdataset_entry> next() {
    std::optional<webdataset_entry> sample;
    for (;;) {
      if (!pending_) pending_ = members_.next();
      if (!pending_) return sample;
      if (webdataset_passed_over(pending_->name)) {
        pending_.reset();
        continue;
      }
      auto split = webdataset_split(pending_->name);
      const std::string_view key = split.first;
      if (sample && sample->key != key) return sample;  // the pending member starts the next
      if (!sample) sample.emplace(webdataset_entry{std::string(key), {}});
      std::string extension = std::move(split.second);
      auto& members = sample->members;
      if (std::any_of(members.begin(), members.end(),
                      [&](const webdataset_member& m) { return m.extension == extension; })) {
        detail::fail<format_error>(
            "webdataset shard {}: sample {} has two members of extension "
            "'{}' (the second at byte {})",
            shard_->path(), key, extension, pending_->offset);
      }
      members.push_back({std::move(extension), pending_->offset, pending_->size});
      pending_.reset();
    }
  }

 private:
  const Shard* shard_;
  tar_scanner<Shard> members_;
  std::optional<tar_member> pending_;  // read, not yet in a sample
};

/// @brief The samples of one tar shard, from its headers alone (no member's data is read).
/// @throws crema::format_error as `webdataset_scanner::next`
template <class Shard>
[[nodiscard]] std::vector<webdataset_entry> index_webdataset(const Shard& shard) {
  std::vector<webdataset_entry> samples;
  webdataset_scanner<Shard> scanner(shard);
  while (auto sample = scanner.next()) samples.push_back(std::move(*sample));
  return samples;
}

namespace detail {

// A `cls` member's text as a class number: decimal, spaces and newlines around it allowed.
[[nodiscard]] inline std::int32_t class_number(std::string_view digits, std::string_view sample) {
  while (!digits.empty() && std::isspace(static_cast<unsigned char>(digits.front()))) {
    digits.remove_prefix(1);
  }
  while (!digits.empty() && std::isspace(static_cast<unsigned char>(digits.back()))) {
    digits.remove_suffix(1);
  }
  std::int32_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc{} || end != digits.data() + digits.size() || digits.empty()) {
    fail<format_error>("webdataset sample {}: its cls '{}' is not a class number", sample,
                       digits.substr(0, 32));
  }
  return value;
}

// The extensions of a sample's members, for the error that says one is missing.
template <class Members>
[[noreturn]] void missing_member(std::string_view sample, std::string_view extension,
                                 const Members& members) {
  std::string have;
  for (const auto& m : members) have += (have.empty() ? "" : ", ") + m.extension;
  fail<format_error>("webdataset sample {}: no '{}' member (it has: {})", sample, extension,
                     have.empty() ? "none" : have);
}

// The extensions an image member may have, in the order a sample's image is looked for.
inline constexpr std::array<std::string_view, 4> image_extensions = {"jpg", "jpeg", "png", "webp"};

}  // namespace detail

/// @brief One sample as a source hands it to a transform: its members' bytes by extension.
///
/// `image()` is the first of its `jpg`, `jpeg`, `png` and `webp` members, `cls()` its `cls`
/// member read as a decimal class index, `text(extension)` a member as text (`txt`, `json`),
/// `member(extension)` any member's bytes. `encoded()` is the image and the class as the image
/// batchers take them (`image_batcher`, `nvjpeg_batcher`), so those take WebDataset samples as
/// they take image files. The sample owns its bytes.
class webdataset_sample {
 public:
  /// @return the sample's key ("n01440764/ILSVRC2012_val_00000293")
  [[nodiscard]] std::string_view key() const noexcept {
    return std::string_view(name_).substr(shard_length_ + 1);
  }
  /// @return the shard it was read from
  [[nodiscard]] std::string_view shard() const noexcept {
    return std::string_view(name_).substr(0, shard_length_);
  }
  /// @return "shard:key", what errors name it by
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

  /// @return the extensions of its members, in the shard's order
  [[nodiscard]] std::vector<std::string_view> extensions() const {
    std::vector<std::string_view> all;
    for (const auto& m : members_) all.emplace_back(m.extension);
    return all;
  }
  /// @return the bytes of its member of `extension` (lowercase), or nothing
  [[nodiscard]] std::optional<std::span<const std::byte>> member(
      std::string_view extension) const noexcept {
    for (const auto& m : members_) {
      if (m.extension == extension) {
        return std::span<const std::byte>(data_).subspan(static_cast<std::size_t>(m.offset),
                                                         static_cast<std::size_t>(m.size));
      }
    }
    return std::nullopt;
  }
  /// @return the bytes of its member of `extension`
  /// @throws crema::format_error naming the sample and the extensions it has, if it has none
  [[nodiscard]] std::span<const std::byte> bytes(std::string_view extension) const {
    if (auto found = member(extension)) return *found;
    missing(extension);
  }
  /// @return its member of `extension` as text
  /// @throws crema::format_error as `bytes`
  [[nodiscard]] std::string_view text(std::string_view extension = "txt") const {
    const auto found = bytes(extension);
    return {reinterpret_cast<const char*>(found.data()), found.size()};
  }
  /// @return its image: the first of its `jpg`, `jpeg`, `png` and `webp` members
  /// @throws crema::format_error naming the sample if it has none
  [[nodiscard]] std::span<const std::byte> image() const {
    for (const std::string_view extension : detail::image_extensions) {
      if (auto found = member(extension)) return *found;
    }
    missing("jpg");
  }
  /// @return its class: the `cls` member, a decimal number (spaces and a newline around it
  /// allowed)
  /// @throws crema::format_error naming the sample if it has no `cls` or it is not a number
  [[nodiscard]] std::int32_t cls() const { return detail::class_number(text("cls"), name_); }
  /// @return its image, class and name, as the image batchers take them
  /// @throws crema::format_error as `image` and `cls`
  [[nodiscard]] encoded_sample encoded() const { return {image(), cls(), name_}; }

  /// @brief Makes it the sample `entry` of shard `shard`, its members' bytes read from `data`
  /// (the shard's bytes from the first member's offset to the last one's end). For sources.
  void assign(std::string_view shard, const webdataset_entry& entry) {
    name_.assign(shard);
    shard_length_ = shard.size();
    name_ += ':';
    name_ += entry.key;
    members_.resize(entry.members.size());
    const std::uint64_t start = entry.members.empty() ? 0 : entry.members.front().offset;
    for (std::size_t i = 0; i < entry.members.size(); ++i) {
      members_[i].extension.assign(entry.members[i].extension);
      members_[i].offset = entry.members[i].offset - start;
      members_[i].size = entry.members[i].size;
    }
    const std::uint64_t end =
        entry.members.empty() ? 0 : entry.members.back().offset + entry.members.back().size;
    data_.resize(static_cast<std::size_t>(end - start));
  }
  /// @return where `assign`'s caller reads the sample's bytes into
  [[nodiscard]] std::span<std::byte> data() noexcept { return data_; }

 private:
  [[noreturn]] void missing(std::string_view extension) const {
    detail::missing_member(name_, extension, members_);
  }

  std::string name_;  // shard:key
  std::size_t shard_length_ = 0;
  std::vector<webdataset_member> members_;  // offsets into data_
  std::vector<std::byte> data_;
};

}  // namespace crema
