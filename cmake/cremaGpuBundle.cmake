# The relocatable GPU test bundle (CREMA_GPU_BUNDLE; `cmake --workflow --preset gpu-bundle`).
#
# GPU machines often lack the build's dependencies ({fmt}, Google Benchmark, a C++ runtime as new
# as the build's). The target crema_gpu_bundle puts every CUDA test and GPU benchmark into
# <build>/bundle/bin, the shared libraries they load into <build>/bundle/lib (found through their
# RUNPATH, $ORIGIN/../lib), and run.sh beside them: copied anywhere, it needs only the GPU driver,
# NCCL and compute-sanitizer (and a C library as new as the build machine's). The CUDA runtime is
# linked statically; the C++ runtime travels in lib/.
# docs/gpu.md says how to use it.

include_guard(GLOBAL)

if(NOT CREMA_COMPILE_CUDA OR NOT CREMA_BUILD_TESTS)
  message(FATAL_ERROR "CREMA_GPU_BUNDLE needs CREMA_COMPILE_CUDA and CREMA_BUILD_TESTS")
endif()
if(NOT TARGET crema-gpu-info)
  message(FATAL_ERROR "CREMA_GPU_BUNDLE needs the GPU benchmarks: CREMA_BUILD_BENCHMARKS and "
                      "Google Benchmark (Debian: libbenchmark-dev)")
endif()

set(crema_bundle_dir "${PROJECT_BINARY_DIR}/bundle")
set(crema_bundle_tests crema_cuda_tests crema_cuda_kernel_tests crema_thrust_cpu_tests
    crema_cuda_fault_tests)
if(TARGET crema_nvjpeg_tests)  # where nvJPEG is found; the bundle carries its library
  list(APPEND crema_bundle_tests crema_nvjpeg_tests)
  get_filename_component(crema_bundle_search "${crema_NVJPEG_LIBRARY}" DIRECTORY)
endif()
set(crema_bundle_programs ${crema_bundle_tests} crema-gpu-info crema-gpu-bench-synced_buffer
    crema-gpu-bench-device_batches crema-gpu-bench-consumer_cpu)
# where LMDB, nvJPEG are found
foreach(optional IN ITEMS crema-gpu-bench-data_layer crema-gpu-bench-jpeg_input crema-cuda-demo)
  if(TARGET ${optional})
    list(APPEND crema_bundle_programs ${optional})
  endif()
endforeach()

set(bundle_files "")
foreach(program IN LISTS crema_bundle_programs)
  set_target_properties(${program} PROPERTIES
    INSTALL_RPATH "\$ORIGIN/../lib" BUILD_WITH_INSTALL_RPATH ON)
  list(APPEND bundle_files "$<TARGET_FILE:${program}>")
endforeach()

find_program(crema_git git)
add_custom_target(crema_gpu_bundle ALL
  COMMAND "${CMAKE_COMMAND}"
          "-Dprograms=$<JOIN:${bundle_files},|>"
          "-Dbundle=${crema_bundle_dir}"
          "-Dsource=${PROJECT_SOURCE_DIR}"
          "-Dsearch=${crema_bundle_search}"
          "-Dgit=${crema_git}"
          "-Dcxx=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
          "-Dcuda=${CMAKE_CUDA_COMPILER_ID} ${CMAKE_CUDA_COMPILER_VERSION}"
          "-Darchitectures=${CMAKE_CUDA_ARCHITECTURES}"
          -P "${PROJECT_SOURCE_DIR}/tools/gpu-bundle/assemble.cmake"
  DEPENDS ${crema_bundle_programs} "${PROJECT_SOURCE_DIR}/tools/gpu-bundle/run.sh"
  COMMENT "Assembling the GPU test bundle in ${crema_bundle_dir}"
  VERBATIM)

# Not in the bundle, compiled with it: the Python package's nvcc translation unit.
if(TARGET crema_python_nvjpeg_compile)
  add_dependencies(crema_gpu_bundle crema_python_nvjpeg_compile)
endif()

# Copied away from the build tree, the bundle loads nothing from it and run.sh works (on this
# machine without a GPU it runs what needs none and says so).
add_test(NAME gpu_bundle.relocatable
  COMMAND bash "${PROJECT_SOURCE_DIR}/tools/gpu-bundle/check_relocatable.sh" "${crema_bundle_dir}")
set_tests_properties(gpu_bundle.relocatable PROPERTIES LABELS gpu-bundle TIMEOUT 600)
