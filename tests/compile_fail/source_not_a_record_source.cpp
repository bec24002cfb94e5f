// expect: crema: a pipeline's Source must model crema::record_source
#include <crema/pipeline/double_buffered_pipeline.hpp>

// A source without shard(), position(), seek() or key().
struct bare {
  using record_type = int;
  static constexpr bool records_are_stable = true;
  const int* next() { return nullptr; }
  void rewind() {}
};

int main() {
  crema::double_buffered_pipeline pipe{bare{}, [](const int& record) { return record; }, {}};
}
