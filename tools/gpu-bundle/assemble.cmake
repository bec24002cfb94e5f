# cmake -Dprograms=A|B|... -Dbundle=DIR -Dsource=DIR [-Dsearch=DIR -Dgit=PATH -Dcxx=.. -Dcuda=..
#       -Darchitectures=..] -P assemble.cmake
#
# Makes the GPU test bundle in DIR afresh: the programs in bin/, every shared library they load
# that a GPU machine cannot be counted on to have in lib/ (looked for also in `search`: nvJPEG's
# folder when it comes from a wheel), the test photographs in data/, run.sh, and MANIFEST (what
# was built, from which commit, by which compilers). Called by the crema_gpu_bundle target.
cmake_minimum_required(VERSION 3.24)

foreach(required IN ITEMS programs bundle source)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "assemble.cmake: -D${required}=... is missing")
  endif()
endforeach()
string(REPLACE "|" ";" programs "${programs}")

file(REMOVE_RECURSE "${bundle}")
file(MAKE_DIRECTORY "${bundle}/bin" "${bundle}/lib")
file(COPY ${programs} DESTINATION "${bundle}/bin" FILE_PERMISSIONS
  OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

# What the GPU machine provides: the C library and its loader, zlib (which every system has, and
# which the bundle's libspng would load from the system anyway: RUNPATH is not inherited), the
# driver (libcuda, NVML), and NCCL (beside the toolkit or in Python's nvidia-nccl wheel; run.sh
# finds it). The CUDA runtime is
# linked into the programs. The C++ runtime travels in lib/ with {fmt} and Google Benchmark, which
# need it too: a GPU machine's own may be older than the build's (and NCCL, built for old
# systems, is content with the build's).
set(provided
  "^ld-linux" "^linux-vdso" "^libc\\.so" "^libm\\.so" "^libdl\\.so" "^libpthread\\.so"
  "^librt\\.so" "^libutil\\.so" "^libz\\.so" "^libcuda\\.so" "^libnvidia-ml\\.so" "^libnccl\\.so")
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${programs}
  RESOLVED_DEPENDENCIES_VAR resolved
  UNRESOLVED_DEPENDENCIES_VAR unresolved
  PRE_EXCLUDE_REGEXES ${provided}
  DIRECTORIES ${search})
if(unresolved)
  message(FATAL_ERROR "assemble.cmake: cannot find ${unresolved}, which the bundle's programs load")
endif()
foreach(library IN LISTS resolved)
  get_filename_component(name "${library}" NAME)
  # By the name the programs ask for (the soname), the target of any symbolic link copied.
  file(REAL_PATH "${library}" target)
  file(COPY_FILE "${target}" "${bundle}/lib/${name}")
endforeach()

# The same list for whoever checks the bundle (check_relocatable.sh): one pattern a line.
list(JOIN provided "\n" provided_lines)
file(WRITE "${bundle}/PROVIDED" "${provided_lines}\n")

file(GLOB photographs "${source}/tests/data/*.jpg")
file(COPY ${photographs} DESTINATION "${bundle}/data")
configure_file("${source}/tools/gpu-bundle/run.sh" "${bundle}/run.sh" COPYONLY)
file(CHMOD "${bundle}/run.sh" PERMISSIONS
  OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

set(commit "unknown")
if(git)
  execute_process(COMMAND "${git}" -C "${source}" describe --always --dirty --abbrev=12
    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
string(TIMESTAMP built "%Y-%m-%dT%H:%M:%SZ" UTC)
set(manifest "crema GPU test bundle\ncommit: ${commit}\nbuilt: ${built}\n")
string(APPEND manifest "c++ compiler: ${cxx}\ncuda compiler: ${cuda}\n")
string(APPEND manifest "cuda architectures: ${architectures}\nprograms:\n")
foreach(program IN LISTS programs)
  get_filename_component(name "${program}" NAME)
  string(APPEND manifest "  bin/${name}\n")
endforeach()
string(APPEND manifest "libraries:\n")
foreach(library IN LISTS resolved)
  get_filename_component(name "${library}" NAME)
  string(APPEND manifest "  lib/${name}\n")
endforeach()
file(WRITE "${bundle}/MANIFEST" "${manifest}")
list(LENGTH programs program_count)
list(LENGTH resolved library_count)
message(STATUS "GPU test bundle: ${bundle} (${program_count} programs, ${library_count} libraries)")
