# cmake -DHEADER=rdmad/client.h -DOUT=example.inc -P ExtractExample.cmake
#
# Copies the code of a header's "// Example:" block (the lines after it that
# start with "//   ", up to the first that does not) into OUT, so that the
# build compiles it (examples/header_examples.cc) and the example in the
# public header cannot stop compiling unnoticed.
file(STRINGS ${HEADER} lines)
set(state before)  # before -> in (the block) -> after
set(code "")
foreach(line IN LISTS lines)
  if(state STREQUAL "before")
    if(line MATCHES "^// Example")
      set(state in)
    endif()
  elseif(state STREQUAL "in")
    if(line MATCHES "^//   (.*)$")
      string(APPEND code "${CMAKE_MATCH_1}\n")
    elseif(line STREQUAL "//" AND code STREQUAL "")
      # the blank comment line that opens the block
    else()
      set(state after)
    endif()
  endif()
endforeach()
if(code STREQUAL "")
  message(FATAL_ERROR "${HEADER}: no \"// Example:\" block found")
endif()
file(WRITE ${OUT} "${code}")
