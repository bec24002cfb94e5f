# cmake -P conan_create.cmake: `conan create` of crema's recipe, offline. A fresh CONAN_HOME, a
# detected profile, and [platform_requires] for the Debian-provided dependencies, so nothing is
# downloaded and no remote is asked.
#   CREMA_SOURCE_DIR, WORK_DIR, CXX_COMPILER
find_program(conan conan)
if(NOT conan)
  message("crema-test-skip: conan is not installed (pip install conan); conan create not tested")
  return()
endif()

include("${CMAKE_CURRENT_LIST_DIR}/run_step.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(ENV{CONAN_HOME} "${WORK_DIR}/home")
set(ENV{CXX} "${CXX_COMPILER}")
run_step("conan" "${conan}" profile detect --name detected)
execute_process(COMMAND "${conan}" remote remove "*" OUTPUT_QUIET ERROR_QUIET)
file(WRITE "${WORK_DIR}/debian" "include(detected)

[settings]
compiler.cppstd=20
build_type=Release

[platform_requires]
fmt/9.1.0
concurrentqueue/1.0.3
lmdb/0.9.24
libcurl/7.88.1

[conf]
tools.cmake.cmaketoolchain:generator=Ninja
")
# The recipe is exported from a copy, so the source tree gets no conan output in it.
file(COPY "${CREMA_SOURCE_DIR}/conanfile.py" "${CREMA_SOURCE_DIR}/CMakeLists.txt"
          "${CREMA_SOURCE_DIR}/cmake" "${CREMA_SOURCE_DIR}/include" "${CREMA_SOURCE_DIR}/src"
          "${CREMA_SOURCE_DIR}/test_package" DESTINATION "${WORK_DIR}/recipe")
run_step("conan" "${conan}" create "${WORK_DIR}/recipe" -pr:a "${WORK_DIR}/debian" --build=missing
    -o "crema/*:with_lmdb=True" -o "crema/*:with_http=True")
message(STATUS "conan create: crema packaged and its test_package built and ran")
