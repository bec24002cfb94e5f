# run_step(<what> <command> [<arg>...]): runs a command of a packaging test; a failure stops the
# script with a message naming the step and the command.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "${what}: '${command}' failed (${result})")
  endif()
endfunction()
