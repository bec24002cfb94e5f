#pragma once

// The one place crema's version is written. CMakeLists.txt and conanfile.py parse these lines.
#define CREMA_VERSION_MAJOR 0
#define CREMA_VERSION_MINOR 1
#define CREMA_VERSION_PATCH 0

/// The version as one number, `major * 10000 + minor * 100 + patch`, for preprocessor checks.
#define CREMA_VERSION \
  (CREMA_VERSION_MAJOR * 10000 + CREMA_VERSION_MINOR * 100 + CREMA_VERSION_PATCH)

namespace crema {

/// @brief The version of the crema headers in use.
struct version_info {
  int major;
  int minor;
  int patch;
};

inline constexpr version_info version{CREMA_VERSION_MAJOR, CREMA_VERSION_MINOR,
                                      CREMA_VERSION_PATCH};

}  // namespace crema
