import os
import re

from conan import ConanFile
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout
from conan.tools.files import load

required_conan_version = ">=2.0"


class CremaConan(ConanFile):
    name = "crema"
    description = "C++20 machinery for deep-learning training engines"
    topics = ("deep-learning", "header-only", "cuda", "mpi", "lmdb", "webdataset")
    package_type = "header-library"  # a library per compiled component (configure)
    settings = "os", "arch", "compiler", "build_type"
    # The CREMA_ENABLE_<X> switches of the CMake build, one option each; CREMA_HEADER_ONLY and
    # BUILD_SHARED_LIBS for the components compiled into libraries (lmdb, image, mpi, http).
    options = {
        "header_only": [True, False],
        "shared": [True, False],
        "with_lmdb": [True, False],
        "with_image": [True, False],
        "with_cuda": [True, False],
        "with_nccl": [True, False],
        "with_mpi": [True, False],
        "with_http": [True, False],
    }
    default_options = {
        "header_only": False,
        "shared": False,
        "with_lmdb": True,
        "with_image": False,
        "with_cuda": False,
        "with_nccl": False,
        "with_mpi": False,
        "with_http": False,
    }
    exports_sources = "CMakeLists.txt", "cmake/*", "include/*", "src/*"
    no_copy_source = True

    def set_version(self):
        # The version is written once, in include/crema/version.hpp.
        text = load(self, os.path.join(self.recipe_folder, "include", "crema", "version.hpp"))
        parts = [re.search(rf"#define CREMA_VERSION_{part} (\d+)", text).group(1)
                 for part in ("MAJOR", "MINOR", "PATCH")]
        self.version = ".".join(parts)

    # The components with code compiled into a library of their own.
    _library_components = ("lmdb", "image", "mpi", "http")

    def _libraries(self, options=None):
        """The libraries the build makes, in link order: the components', then the core's."""
        options = options or self.options
        if options.header_only:
            return []
        return [f"crema_{component}" for component in self._library_components
                if options.get_safe(f"with_{component}")] + ["crema"]

    def _compiled(self):
        return bool(self._libraries())

    def configure(self):
        if not self.options.with_cuda:
            self.options.with_nccl = False
        if self._compiled():
            self.package_type = "shared-library" if self.options.shared else "static-library"
        else:
            self.options.rm_safe("shared")

    def requirements(self):
        self.requires("fmt/[>=9.1 <12]", transitive_headers=True)
        self.requires("concurrentqueue/[>=1.0.3 <2]", transitive_headers=True)
        if self.options.with_lmdb:
            self.requires("lmdb/[>=0.9.24 <1]", transitive_headers=True)
        if self.options.with_image:
            self.requires("libjpeg-turbo/[>=2.1 <4]", transitive_headers=True)
            self.requires("libpng/[>=1.6 <2]", transitive_headers=True)
        if self.options.with_mpi:
            self.requires("openmpi/[>=4.1 <6]", transitive_headers=True)
        if self.options.with_http:
            self.requires("libcurl/[>=7.75 <9]", transitive_headers=True)
        # CUDA and NCCL come with the CUDA toolkit, which is found on the system, not packaged.

    def layout(self):
        cmake_layout(self)

    def generate(self):
        toolchain = CMakeToolchain(self)
        for option in ("BUILD_TESTS", "BUILD_EXAMPLES", "BUILD_BENCHMARKS", "BUILD_DOCS"):
            toolchain.cache_variables[f"CREMA_{option}"] = False
        toolchain.cache_variables["CREMA_INSTALL"] = True
        toolchain.cache_variables["CREMA_HEADER_ONLY"] = bool(self.options.header_only)
        for component in ("lmdb", "image", "cuda", "nccl", "mpi", "http"):
            enabled = bool(self.options.get_safe(f"with_{component}"))
            toolchain.cache_variables[f"CREMA_ENABLE_{component.upper()}"] = "ON" if enabled else "OFF"
        toolchain.generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        if self._compiled():
            cmake.build(target="crema_libraries")

    def package(self):
        cmake = CMake(self)
        cmake.install()

    def package_id(self):
        # Headers only: one package serves every setting. The options stay in the id, since
        # they decide which components' files are installed.
        if not self._libraries(self.info.options):
            self.info.settings.clear()

    def package_info(self):
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = ["lib"] if self._compiled() else []
        self.cpp_info.libs = self._libraries()
        if self._compiled():
            # The core's compiled code is in libcrema: users' files do not compile it again.
            self.cpp_info.defines = ["CREMA_CORE_LIBRARY"]
        # The package installs its own cremaConfig.cmake, which finds the dependencies the
        # requested components need; consumers use that rather than a generated one.
        self.cpp_info.set_property("cmake_find_mode", "none")
        package_dir = "lib" if self._compiled() else "share"
        self.cpp_info.builddirs = [os.path.join(package_dir, "cmake", "crema")]
