#pragma once

#include <crema/collective/reduction.hpp>
#include <crema/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace crema {

/// @brief A tree over the participants of a collective: who sends to whom, and in which order
/// sums are taken.
///
/// `build` pairs participants that reach each other, then pairs of pairs, until one root is left,
/// as Caffe's P2PSync paired GPUs by peer access. A participant left over at a level (odd counts)
/// goes up unpaired. Where a level can pair nobody (islands that cannot reach each other), the
/// remaining subtrees hang under the first one as a tree of bounded degree, through edges marked
/// not `direct` (a device backend stages those through the host). `flat` makes the root the
/// parent of everyone, which suits shared memory.
///
/// Participants are numbered by their position in the list given (0 .. size()-1); `id(i)` is the
/// caller's own number for it (a device ordinal, a rank). Immutable once built; every member is
/// thread-safe and never allocates.
class tree_topology {
 public:
  /// The most children a fallback (non-direct) parent takes.
  static constexpr std::size_t fallback_degree = 4;

  /// @brief Pairs participants by `reach(a, b)` (a can reach b directly), levels up to one root.
  /// A pair needs reach both ways.
  /// @param ids   the participants' own numbers, each once
  /// @param reach `bool(int a, int b)` on those numbers
  /// @throws crema::collective_error on an empty list or a number given twice
  template <class Reach>
  [[nodiscard]] static tree_topology build(std::span<const int> ids, Reach reach) {
    tree_topology tree(ids);
    std::vector<std::size_t> roots(ids.size());
    for (std::size_t i = 0; i < roots.size(); ++i) roots[i] = i;
    while (roots.size() > 1) {
      std::vector<std::size_t> next;
      std::vector<bool> used(roots.size(), false);
      for (std::size_t a = 0; a < roots.size(); ++a) {
        if (used[a]) continue;
        used[a] = true;
        next.push_back(roots[a]);
        for (std::size_t b = a + 1; b < roots.size(); ++b) {
          if (!used[b] && reach(ids[roots[a]], ids[roots[b]]) &&
              reach(ids[roots[b]], ids[roots[a]])) {
            used[b] = true;
            tree.attach(roots[b], roots[a], true);
            break;
          }
        }
      }
      if (next.size() == roots.size()) {  // nobody paired: islands
        for (std::size_t i = 1; i < roots.size(); ++i) {
          tree.attach(roots[i], roots[(i - 1) / fallback_degree], false);
        }
        next.assign(1, roots.front());
      }
      roots = std::move(next);
    }
    tree.root_ = roots.front();
    tree.finish();
    return tree;
  }

  /// @brief A root (the first participant) with every other participant as its child.
  /// @throws crema::collective_error on an empty list or a number given twice
  [[nodiscard]] static tree_topology flat(std::span<const int> ids) {
    tree_topology tree(ids);
    for (std::size_t i = 1; i < ids.size(); ++i) tree.attach(i, 0, true);
    tree.root_ = 0;
    tree.finish();
    return tree;
  }

  /// @return the number of participants
  [[nodiscard]] std::size_t size() const noexcept { return ids_.size(); }
  /// @return the root's position
  [[nodiscard]] std::size_t root() const noexcept { return root_; }
  /// @return participant `i`'s own number
  [[nodiscard]] int id(std::size_t i) const { return ids_.at(i); }
  /// @return participant `i`'s parent, or nothing for the root
  [[nodiscard]] std::optional<std::size_t> parent(std::size_t i) const {
    detail::check_participant("tree_topology", "parent", i, ids_.size());
    if (i == root_) return std::nullopt;
    return parent_[i];
  }
  /// @return participant `i`'s children, in the order their sums are added
  [[nodiscard]] std::span<const std::size_t> children(std::size_t i) const {
    detail::check_participant("tree_topology", "children", i, ids_.size());
    return children_[i];
  }
  /// @return whether participant `i` reaches its parent directly (always true for the root)
  [[nodiscard]] bool direct(std::size_t i) const {
    detail::check_participant("tree_topology", "direct", i, ids_.size());
    return direct_[i];
  }
  /// @return participant `i`'s distance from the root
  [[nodiscard]] std::size_t depth(std::size_t i) const {
    detail::check_participant("tree_topology", "depth", i, ids_.size());
    return depth_[i];
  }
  /// @return the number of levels (1 for a single participant)
  [[nodiscard]] std::size_t height() const noexcept {
    return 1 + *std::max_element(depth_.begin(), depth_.end());
  }
  /// @return every participant, each after all of its children: the order a reduction completes
  [[nodiscard]] std::span<const std::size_t> bottom_up() const noexcept { return bottom_up_; }

  /// @return the tree on one line, as "0(1 2(3))": each participant's number, then its children
  [[nodiscard]] std::string describe() const { return describe(root_); }

  /// @brief The tree of several trees: `over` joins `parts` (one per node of `over`, all of the
  /// same size), the way ranks join their local trees. Participant i of part p is numbered
  /// p x parts[0].size() + i (and that is its id). Each part keeps its shape; the root of part p
  /// takes, after its own children, the roots of the parts that are p's children in `over`, in
  /// their order. So a sum in the joined tree's order is each part's local sum, then its child
  /// parts' sums: what a reducer across ranks computes.
  /// @throws crema::collective_error if the parts do not match `over`'s size or each other's
  [[nodiscard]] static tree_topology join(const tree_topology& over,
                                          const std::vector<tree_topology>& parts) {
    if (parts.size() != over.size() || parts.empty()) {
      detail::fail<collective_error>("tree_topology::join: {} parts for a tree of {}", parts.size(),
                                     over.size());
    }
    const std::size_t local = parts.front().size();
    for (std::size_t p = 1; p < parts.size(); ++p) {
      if (parts[p].size() != local) {
        detail::fail<collective_error>(
            "tree_topology::join: part {} has {} participants, part 0 has {}", p, parts[p].size(),
            local);
      }
    }
    std::vector<int> ids(over.size() * local);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    tree_topology tree(ids);
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const tree_topology& part = parts[p];
      const std::size_t base = p * local;
      for (std::size_t i = 0; i < local; ++i) {
        for (const std::size_t child : part.children(i)) {
          tree.attach(base + child, base + i, part.direct(child));
        }
      }
      for (const std::size_t child_part : over.children(p)) {
        tree.attach(child_part * local + parts[child_part].root(), base + part.root(),
                    over.direct(child_part));
      }
    }
    tree.root_ = over.root() * local + parts[over.root()].root();
    tree.finish();
    return tree;
  }

 private:
  explicit tree_topology(std::span<const int> ids)
      : ids_(ids.begin(), ids.end()),
        parent_(ids.size(), 0),
        children_(ids.size()),
        direct_(ids.size(), true),
        depth_(ids.size(), 0) {
    if (ids.empty()) detail::fail<collective_error>("tree_topology: no participants");
    std::vector<int> sorted(ids.begin(), ids.end());
    std::sort(sorted.begin(), sorted.end());
    const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
    if (twice != sorted.end()) {
      detail::fail<collective_error>("tree_topology: participant {} appears twice", *twice);
    }
  }

  void attach(std::size_t child, std::size_t parent, bool direct) {
    parent_[child] = parent;
    direct_[child] = direct;
    children_[parent].push_back(child);
  }

  // Depths and the bottom-up order, from the root down.
  void finish() {
    std::vector<std::size_t> top_down{root_};
    for (std::size_t i = 0; i < top_down.size(); ++i) {
      for (const std::size_t child : children_[top_down[i]]) {
        depth_[child] = depth_[top_down[i]] + 1;
        top_down.push_back(child);
      }
    }
    bottom_up_.assign(top_down.rbegin(), top_down.rend());
  }

  [[nodiscard]] std::string describe(std::size_t i) const {
    std::string text = std::to_string(ids_[i]);
    if (children_[i].empty()) return text;
    text += '(';
    for (std::size_t c = 0; c < children_[i].size(); ++c) {
      if (c != 0) text += ' ';
      text += describe(children_[i][c]);
    }
    return text + ')';
  }

  std::vector<int> ids_;
  std::vector<std::size_t> parent_;
  std::vector<std::vector<std::size_t>> children_;
  std::vector<bool> direct_;
  std::vector<std::size_t> depth_;
  std::vector<std::size_t> bottom_up_;
  std::size_t root_ = 0;
};

}  // namespace crema
