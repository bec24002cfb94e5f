# cmake -P run_consumer.cmake: configures, builds and runs one consumer project.
#   MODE               add_subdirectory | fetch_content | find_package
#   CREMA_SOURCE_DIR   crema's source tree
#   CREMA_BINARY_DIR   crema's build tree (find_package installs from it)
#   WORK_DIR           scratch directory, emptied first
#   CXX_COMPILER, GENERATOR, COMPONENTS (;-separated, find_package only)
#   TOOLS              the tools this build made (find_package only): each must be installed
foreach(var IN ITEMS MODE CREMA_SOURCE_DIR CREMA_BINARY_DIR WORK_DIR CXX_COMPILER GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()

include("${CMAKE_CURRENT_LIST_DIR}/run_step.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
set(configure_args -DCREMA_SOURCE_DIR=${CREMA_SOURCE_DIR})
if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run_step("consumer ${MODE}" "${CMAKE_COMMAND}" --install "${CREMA_BINARY_DIR}" --prefix "${prefix}")
  foreach(tool IN LISTS TOOLS)
    if(NOT EXISTS "${prefix}/bin/${tool}")
      message(FATAL_ERROR "consumer ${MODE}: ${tool} was built but not installed in ${prefix}/bin")
    endif()
  endforeach()
  string(REPLACE ";" "\\;" components "${COMPONENTS}")
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${prefix} "-DCREMA_TEST_COMPONENTS=${components}"
       -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON)
endif()
run_step("consumer ${MODE}" "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}/${MODE}" -B "${WORK_DIR}/build"
    -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
    ${configure_args})
run_step("consumer ${MODE}" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
run_step("consumer ${MODE}" "${WORK_DIR}/build/consumer")
if(MODE STREQUAL "find_package")
  run_step("consumer ${MODE}" "${WORK_DIR}/build/components")
endif()
message(STATUS "consumer ${MODE}: configured, built and ran")
