# How crema finds what it depends on. One file serves the source tree (CMakeLists.txt) and the
# installed package (cremaConfig.cmake), so a consumer of an install resolves every dependency
# exactly the way crema's own build did.
#
# Each crema_find_<dep>() macro sets crema_<dep>_FOUND and, when found, makes the imported target
# named below. Macros (not functions) so that find_package results land in the caller's scope.
#
#   crema_find_fmt()              fmt::fmt                 {fmt}'s own package config
#   crema_find_concurrentqueue()  crema::concurrentqueue   no config in Debian: a header search
#   crema_find_lmdb()             PkgConfig::LMDB          lmdb.pc
#   crema_find_image()            PkgConfig::TURBOJPEG, PkgConfig::JPEG, PkgConfig::SPNG
#                                 libturbojpeg.pc, libjpeg.pc (libjpeg-turbo's libjpeg API, for
#                                 decoding a window: jpeg_crop_scanline, jpeg_skip_scanlines),
#                                 spng.pc
#   crema_find_cuda()             CUDA::cudart, crema::cccl  FindCUDAToolkit
#   crema_find_nccl()             crema::nccl_library      nccl.h and libnccl beside the toolkit
#   crema_find_mpi()              MPI::MPI_CXX             FindMPI (the C API)
#   crema_find_nvjpeg()           crema::nvjpeg_library    nvjpeg.h and libnvjpeg in the toolkit,
#                                 else under CREMA_NVJPEG_ROOT (a CMake or environment variable)
#                                 or /opt/nvjpeg-wheel/nvidia/cu13 (PyPI's nvidia-nvjpeg wheel,
#                                 which tools/install-deps.sh puts there); needs cuda and image
#   crema_find_http()             PkgConfig::CURL          libcurl.pc (Debian: libcurl4-openssl-dev)

include_guard(GLOBAL)

macro(crema_find_fmt)
  find_package(fmt 9 CONFIG QUIET)
  set(crema_fmt_FOUND ${fmt_FOUND})
endmacro()

# concurrentqueue's headers sit at <concurrentqueue/...> in Debian, at <moodycamel/...> in an
# upstream install and at the top of its source tree. crema/core/detail/concurrentqueue.hpp
# tries each spelling; this target only contributes an include directory when none of them is
# on the compiler's default path.
macro(crema_find_concurrentqueue)
  if(TARGET crema::concurrentqueue)
    set(crema_concurrentqueue_FOUND TRUE)
  else()
    find_package(concurrentqueue CONFIG QUIET)
    if(concurrentqueue_FOUND AND TARGET concurrentqueue::concurrentqueue)
      add_library(crema::concurrentqueue INTERFACE IMPORTED)
      target_link_libraries(crema::concurrentqueue INTERFACE concurrentqueue::concurrentqueue)
      set(crema_concurrentqueue_FOUND TRUE)
    else()
      find_path(crema_concurrentqueue_INCLUDE_DIR
        NAMES concurrentqueue/blockingconcurrentqueue.h moodycamel/blockingconcurrentqueue.h
              blockingconcurrentqueue.h
        PATH_SUFFIXES concurrentqueue)
      if(crema_concurrentqueue_INCLUDE_DIR)
        add_library(crema::concurrentqueue INTERFACE IMPORTED)
        if(NOT crema_concurrentqueue_INCLUDE_DIR MATCHES "^/usr/include/?$")
          target_include_directories(crema::concurrentqueue INTERFACE
            "${crema_concurrentqueue_INCLUDE_DIR}")
        endif()
        set(crema_concurrentqueue_FOUND TRUE)
      else()
        set(crema_concurrentqueue_FOUND FALSE)
      endif()
    endif()
  endif()
endmacro()

macro(crema_find_lmdb)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND AND NOT TARGET PkgConfig::LMDB)
    pkg_check_modules(LMDB QUIET IMPORTED_TARGET lmdb)
  endif()
  if(TARGET PkgConfig::LMDB)
    set(crema_lmdb_FOUND TRUE)
  else()
    set(crema_lmdb_FOUND FALSE)
  endif()
endmacro()

macro(crema_find_image)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    if(NOT TARGET PkgConfig::TURBOJPEG)
      pkg_check_modules(TURBOJPEG QUIET IMPORTED_TARGET libturbojpeg)
    endif()
    if(NOT TARGET PkgConfig::JPEG)
      pkg_check_modules(JPEG QUIET IMPORTED_TARGET libjpeg)
    endif()
    if(NOT TARGET PkgConfig::SPNG)
      pkg_check_modules(SPNG QUIET IMPORTED_TARGET spng)
    endif()
  endif()
  if(TARGET PkgConfig::TURBOJPEG AND TARGET PkgConfig::JPEG AND TARGET PkgConfig::SPNG)
    set(crema_image_FOUND TRUE)
  else()
    set(crema_image_FOUND FALSE)
  endif()
endmacro()

macro(crema_find_cuda)
  if(NOT CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cudart)
    set(crema_cuda_FOUND TRUE)
    # CUDA 13 keeps Thrust, CUB and libcu++ under include/cccl: the host compiler needs it too,
    # for Thrust code built for its CPP device system.
    if(NOT TARGET crema::cccl)
      add_library(crema::cccl INTERFACE IMPORTED)
      foreach(include_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
        if(EXISTS "${include_dir}/cccl/thrust")
          target_include_directories(crema::cccl INTERFACE "${include_dir}/cccl")
        endif()
      endforeach()
    endif()
  else()
    set(crema_cuda_FOUND FALSE)
  endif()
endmacro()

# NCCL ships no CMake config: it installs nccl.h and libnccl beside the CUDA toolkit.
macro(crema_find_nccl)
  crema_find_cuda()
  set(crema_nccl_FOUND FALSE)
  if(crema_cuda_FOUND)
    if(TARGET crema::nccl_library)
      set(crema_nccl_FOUND TRUE)
    else()
      find_path(crema_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
      find_library(crema_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
      if(crema_NCCL_INCLUDE_DIR AND crema_NCCL_LIBRARY)
        add_library(crema::nccl_library UNKNOWN IMPORTED)
        set_target_properties(crema::nccl_library PROPERTIES
          IMPORTED_LOCATION "${crema_NCCL_LIBRARY}"
          INTERFACE_INCLUDE_DIRECTORIES "${crema_NCCL_INCLUDE_DIR}")
        target_link_libraries(crema::nccl_library INTERFACE CUDA::cudart)
        set(crema_nccl_FOUND TRUE)
      endif()
    endif()
  endif()
endmacro()

# The C API through the CXX component: it needs no C language enabled in the consumer, and
# MPI_CXX_SKIP_MPICXX keeps the deprecated C++ bindings out.
macro(crema_find_mpi)
  set(MPI_CXX_SKIP_MPICXX TRUE)
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND AND TARGET MPI::MPI_CXX)
    set(crema_mpi_FOUND TRUE)
  else()
    set(crema_mpi_FOUND FALSE)
  endif()
endmacro()

# nvJPEG: in the CUDA toolkit where it was installed with it; else the nvidia-nvjpeg wheel's
# header and library (its library has no unversioned link, so it is looked for by file name).
macro(crema_find_nvjpeg)
  crema_find_cuda()
  crema_find_image()
  set(crema_nvjpeg_FOUND FALSE)
  if(crema_cuda_FOUND AND crema_image_FOUND)
    if(TARGET crema::nvjpeg_library)
      set(crema_nvjpeg_FOUND TRUE)
    else()
      set(crema_nvjpeg_hints ${CREMA_NVJPEG_ROOT} $ENV{CREMA_NVJPEG_ROOT} /opt/nvjpeg-wheel/nvidia/cu13)
      find_path(crema_NVJPEG_INCLUDE_DIR nvjpeg.h
        HINTS ${CUDAToolkit_INCLUDE_DIRS} ${crema_nvjpeg_hints} PATH_SUFFIXES include)
      find_library(crema_NVJPEG_LIBRARY NAMES nvjpeg libnvjpeg.so.13
        HINTS ${CUDAToolkit_LIBRARY_DIR} ${crema_nvjpeg_hints} PATH_SUFFIXES lib lib64)
      if(crema_NVJPEG_INCLUDE_DIR AND crema_NVJPEG_LIBRARY)
        add_library(crema::nvjpeg_library UNKNOWN IMPORTED)
        set_target_properties(crema::nvjpeg_library PROPERTIES
          IMPORTED_LOCATION "${crema_NVJPEG_LIBRARY}"
          INTERFACE_INCLUDE_DIRECTORIES "${crema_NVJPEG_INCLUDE_DIR}")
        set(crema_nvjpeg_FOUND TRUE)
      endif()
      unset(crema_nvjpeg_hints)
    endif()
  endif()
endmacro()

macro(crema_find_http)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND AND NOT TARGET PkgConfig::CURL)
    pkg_check_modules(CURL QUIET IMPORTED_TARGET libcurl>=7.75)
  endif()
  if(TARGET PkgConfig::CURL)
    set(crema_http_FOUND TRUE)
  else()
    set(crema_http_FOUND FALSE)
  endif()
endmacro()
