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

}  // namespace crema::detail
