// expect: crema: a pipeline's Transform must take the source's records
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include <string>

int main() {
  // The records are ints; this transform takes strings.
  const auto shout = [](const std::string& text) { return text + "!"; };
  crema::double_buffered_pipeline pipe{crema::vector_source<int>({1, 2, 3}), shout, {}};
}
