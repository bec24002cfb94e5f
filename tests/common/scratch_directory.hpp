#pragma once

// A directory of a test's own under the temporary directory, empty when made and removed with
// everything in it when the test is done.

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace crema::test {

class scratch_directory {
 public:
  explicit scratch_directory(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              fmt::format("crema-{}-{}", name, ::getpid())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  scratch_directory(const scratch_directory&) = delete;
  scratch_directory& operator=(const scratch_directory&) = delete;
  ~scratch_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace crema::test
