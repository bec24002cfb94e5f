// expect: crema: a per-item transform's item_type must be default-constructible
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include <vector>

// Items are made once per slot, before any record: an item that needs an argument cannot be.
struct needs_a_size {
  explicit needs_a_size(int size) : values(static_cast<std::size_t>(size)) {}
  std::vector<float> values;
};

struct fill {
  using item_type = needs_a_size;
  void operator()(const int& record, needs_a_size& item) const { item.values[0] = record; }
};

int main() {
  crema::double_buffered_pipeline pipe{crema::vector_source<int>({1, 2, 3}), fill{}, {}};
}
