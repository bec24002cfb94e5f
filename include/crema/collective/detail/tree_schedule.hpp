#pragma once

#include <crema/collective/topology.hpp>

#include <cstddef>

namespace crema::detail {

// The order in which a backend that moves data along the tree's edges runs an allreduce in
// place: every parent adds each child's (finished) subtree sum into its own buffer, children in
// order, deepest first; the root finishes the sum (scaling it); then every child copies its
// parent's result, top down. A parent's buffer ends up holding its subtree's sum in the tree's
// order, so the result is the same bits as the host reducer's.
template <class AddChild, class FinishRoot, class CopyDown>
void tree_allreduce_schedule(const tree_topology& tree, AddChild&& add_child,
                             FinishRoot&& finish_root, CopyDown&& copy_down) {
  for (const std::size_t node : tree.bottom_up()) {
    for (const std::size_t child : tree.children(node)) add_child(node, child);
  }
  finish_root(tree.root());
  const auto order = tree.bottom_up();
  for (std::size_t i = order.size(); i-- > 0;) {
    for (const std::size_t child : tree.children(order[i])) copy_down(order[i], child);
  }
}

// The order in which such a backend runs a reduce that leaves every buffer as it was: each inner
// participant builds its subtree's sum in a partial buffer of its own (a leaf's subtree sum is
// its own buffer). `start(node)` copies the node's own elements into its partial;
// `add_child(parent, child)` adds the child's subtree sum into the parent's partial; children in
// order, deepest first. The root's subtree sum is then the tree-order sum, the same bits as the
// host reducer's; the caller writes it where it goes.
template <class Start, class AddChild>
void tree_reduce_schedule(const tree_topology& tree, Start&& start, AddChild&& add_child) {
  for (const std::size_t node : tree.bottom_up()) {
    if (tree.children(node).empty()) continue;
    start(node);
    for (const std::size_t child : tree.children(node)) add_child(node, child);
  }
}

}  // namespace crema::detail
