# cmake -P check_snippet.cmake -DREADME=<markdown> -DEXAMPLE=<source>: fails unless the source
# file stands in the markdown file, whole and unchanged.
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(FIND "${readme}" "${example}" where)
if(where EQUAL -1)
  message(FATAL_ERROR "${README} does not quote ${EXAMPLE} exactly; copy the file into it again")
endif()
message(STATUS "${README} quotes ${EXAMPLE}")
