// expect: crema: this source's records are only valid until its next record
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include <string>

// Records that point into a buffer the source rewrites: a copy of the pointer would dangle.
class line_reader {
 public:
  using record_type = const char*;
  static constexpr bool records_are_stable = false;
  const record_type* next() { return nullptr; }
  void rewind() {}
  void shard(std::size_t, std::size_t) {}
  [[nodiscard]] crema::record_position position() const { return 0; }
  void seek(crema::record_position) {}
  [[nodiscard]] std::string key() const { return "lines:file"; }
};

int main() {
  crema::double_buffered_pipeline pipe{line_reader{}, [](const char* const& line) { return line[0]; },
                                       {}};
}
