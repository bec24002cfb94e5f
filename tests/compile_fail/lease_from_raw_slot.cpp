// expect: private|protected|inaccessible
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include <memory>

// Only a pipeline makes leases: a lease made from a raw slot would return a slot the pipeline
// never handed out.
int main() {
  using pipeline = crema::double_buffered_pipeline<crema::vector_source<int>, int (*)(const int&)>;
  using lease = pipeline::lease_type;
  lease made(nullptr, nullptr);
}
