# crema's pkg-config files, for build systems other than CMake (Meson, Make, Bazel rules):
#
#   crema.pc               the core (libcrema, unless header-only); Requires {fmt}
#   crema-<component>.pc   one per component this build has; Requires crema and the component's
#                          own dependencies (lmdb, libturbojpeg + spng, MPI, CUDA, NCCL, libcurl)
#
# Installed to share/pkgconfig when nothing is compiled (the same on every architecture),
# else to <libdir>/pkgconfig beside the libraries. C++20 is the consumer's choice of flag:
# `c++ -std=c++20 $(pkg-config --cflags --libs crema-lmdb) ...`.
# Included from CMakeLists.txt's install block, after the components were found.

include_guard(GLOBAL)

set(crema_pkgconfig_dir "${crema_package_dir}/pkgconfig")

# The prefix as seen from the .pc file's folder, so that an install can be moved.
file(RELATIVE_PATH pc_prefix_from_pcfiledir
  "/prefix/${crema_pkgconfig_dir}" "/prefix")
string(REGEX REPLACE "/$" "" pc_prefix_from_pcfiledir "${pc_prefix_from_pcfiledir}")
# An install folder as the .pc file names it: under ${prefix} unless the user gave an absolute one.
function(crema_pkgconfig_path out_var dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out_var} "${dir}" PARENT_SCOPE)
  else()
    set(${out_var} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
crema_pkgconfig_path(pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
crema_pkgconfig_path(pc_libdir "${CMAKE_INSTALL_LIBDIR}")

# crema_pkgconfig_write(<file-name> NAME <name> DESCRIPTION <text> [REQUIRES <module>...]
#                       [CFLAGS <flag>...] [LIBS <flag>...])
function(crema_pkgconfig_write file_name)
  cmake_parse_arguments(PARSE_ARGV 1 pc "" "NAME;DESCRIPTION" "REQUIRES;CFLAGS;LIBS")
  list(JOIN pc_REQUIRES ", " pc_requires)
  list(JOIN pc_CFLAGS " " pc_cflags)
  list(JOIN pc_LIBS " " pc_libs)
  set(pc_name "${pc_NAME}")
  set(pc_description "${pc_DESCRIPTION}")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/crema.pc.in"
    "${PROJECT_BINARY_DIR}/pkgconfig/${file_name}.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/${file_name}.pc"
    DESTINATION "${crema_pkgconfig_dir}")
endfunction()

# -I for each folder, leaving out the compiler's own.
function(crema_pkgconfig_include_flags out_var)
  set(flags "")
  foreach(dir IN LISTS ARGN)
    if(dir AND NOT dir MATCHES "^/usr/include/?$")
      list(APPEND flags "-I${dir}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  set(${out_var} "${flags}" PARENT_SCOPE)
endfunction()

# The core: {fmt} has fmt.pc; concurrentqueue has none, so its folder goes into Cflags where it
# is not on the compiler's default path.
set(crema_pc_cflags "-I\${includedir}")
if(crema_concurrentqueue_INCLUDE_DIR)
  crema_pkgconfig_include_flags(queue_flags "${crema_concurrentqueue_INCLUDE_DIR}")
  list(APPEND crema_pc_cflags ${queue_flags})
endif()
set(crema_pc_libs "")
if(crema_core_compiled)
  # libcrema: the core's code compiled once; the define keeps users' files from compiling it.
  list(APPEND crema_pc_cflags -DCREMA_CORE_LIBRARY)
  set(crema_pc_libs "-L\${libdir}" -lcrema)
endif()
crema_pkgconfig_write(crema NAME crema
  DESCRIPTION "${PROJECT_DESCRIPTION}: the core"
  REQUIRES fmt CFLAGS ${crema_pc_cflags} -pthread LIBS ${crema_pc_libs} -pthread)


# The flags that link a component's library, where it was compiled into one.
function(crema_pkgconfig_library_flags out component)
  set(flags "")
  if("${component}" IN_LIST crema_compiled_components)
    set(flags "-L\${libdir}" -lcrema_${component})
  endif()
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

if(crema_lmdb_enabled)
  crema_pkgconfig_library_flags(lmdb_libs lmdb)
  crema_pkgconfig_write(crema-lmdb NAME crema-lmdb
    DESCRIPTION "crema: Caffe-format LMDB datasets" REQUIRES crema lmdb LIBS ${lmdb_libs})
endif()

if(crema_image_enabled)
  crema_pkgconfig_library_flags(image_libs image)
  crema_pkgconfig_write(crema-image NAME crema-image
    DESCRIPTION "crema: JPEG and PNG images" REQUIRES crema libturbojpeg libjpeg spng
    LIBS ${image_libs})
endif()

if(crema_http_enabled)
  crema_pkgconfig_library_flags(http_libs http)
  crema_pkgconfig_write(crema-http NAME crema-http
    DESCRIPTION "crema: shards over HTTP(S) and S3" REQUIRES crema libcurl LIBS ${http_libs})
endif()

if(crema_mpi_enabled)
  # The MPI that CMake found, by its pkg-config module where it has one (Debian's alternatives
  # give mpi.pc; Open MPI ompi-c.pc, MPICH mpich.pc), else by the flags FindMPI found.
  find_package(PkgConfig QUIET)
  set(mpi_module "")
  if(PkgConfig_FOUND)
    foreach(candidate IN ITEMS mpi ompi-c mpich)
      pkg_check_modules(crema_pc_mpi_${candidate} QUIET ${candidate})
      if(crema_pc_mpi_${candidate}_FOUND)
        set(mpi_module ${candidate})
        break()
      endif()
    endforeach()
  endif()
  # crema uses MPI's C API: the defines keep mpi.h from pulling in the deprecated C++ bindings,
  # whose symbols live in a library the C module does not link (CMake's MPI_CXX_SKIP_MPICXX).
  set(skip_cxx_bindings -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX)
  crema_pkgconfig_library_flags(mpi_libs mpi)
  if(mpi_module)
    crema_pkgconfig_write(crema-mpi NAME crema-mpi
      DESCRIPTION "crema: the MPI reducer and the parameter server" REQUIRES crema ${mpi_module}
      CFLAGS ${skip_cxx_bindings} LIBS ${mpi_libs})
  else()
    crema_pkgconfig_include_flags(mpi_cflags ${MPI_CXX_INCLUDE_DIRS})
    crema_pkgconfig_write(crema-mpi NAME crema-mpi
      DESCRIPTION "crema: the MPI reducer and the parameter server" REQUIRES crema
      CFLAGS ${skip_cxx_bindings} ${mpi_cflags} LIBS ${mpi_libs} ${MPI_CXX_LIBRARIES})
  endif()
endif()

if(crema_cuda_enabled)
  # The toolkit ships no .pc file: its folders as this build found them. CCCL (Thrust, CUB,
  # libcu++) sits under include/cccl in CUDA 13.
  set(cuda_include_dirs ${CUDAToolkit_INCLUDE_DIRS})
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    if(EXISTS "${dir}/cccl/thrust")
      list(APPEND cuda_include_dirs "${dir}/cccl")
    endif()
  endforeach()
  crema_pkgconfig_include_flags(cuda_cflags ${cuda_include_dirs})
  crema_pkgconfig_write(crema-cuda NAME crema-cuda
    DESCRIPTION "crema: CUDA resources, streams and device batches" REQUIRES crema
    CFLAGS ${cuda_cflags} LIBS "-L${CUDAToolkit_LIBRARY_DIR}" -lcudart)
endif()

if(crema_nccl_enabled)
  get_filename_component(nccl_library_dir "${crema_NCCL_LIBRARY}" DIRECTORY)
  crema_pkgconfig_include_flags(nccl_cflags "${crema_NCCL_INCLUDE_DIR}")
  crema_pkgconfig_write(crema-nccl NAME crema-nccl
    DESCRIPTION "crema: the NCCL reducer" REQUIRES crema-cuda
    CFLAGS ${nccl_cflags} LIBS "-L${nccl_library_dir}" -lnccl)
endif()

if(crema_nvjpeg_enabled)
  # The wheel's library has no unversioned link: named by its file (-l:libnvjpeg.so.13).
  get_filename_component(nvjpeg_library_dir "${crema_NVJPEG_LIBRARY}" DIRECTORY)
  get_filename_component(nvjpeg_library_name "${crema_NVJPEG_LIBRARY}" NAME)
  crema_pkgconfig_include_flags(nvjpeg_cflags "${crema_NVJPEG_INCLUDE_DIR}")
  crema_pkgconfig_write(crema-nvjpeg NAME crema-nvjpeg
    DESCRIPTION "crema: JPEG decoded on the GPU (nvJPEG)" REQUIRES crema-cuda crema-image
    CFLAGS ${nvjpeg_cflags} LIBS "-L${nvjpeg_library_dir}" "-l:${nvjpeg_library_name}")
endif()
