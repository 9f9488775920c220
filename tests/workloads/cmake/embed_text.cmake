# Writes a C++ source file that holds the text of INPUT as a NUL-terminated
# string constant, so that a binary carries its PTX with it.
#
#   cmake -DINPUT=spin.ptx -DOUTPUT=spin_ptx.cpp -DNAMESPACE=workloads -DSYMBOL=kSpinPtx
#         -P embed_text.cmake
#
# The generated file defines `extern const char SYMBOL[]` in NAMESPACE.

foreach(var INPUT OUTPUT NAMESPACE SYMBOL)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_text.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${INPUT}" text)

# A raw string literal needs no escaping, provided its closing delimiter does
# not occur in the text.
set(delimiter "embed")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "embed_text.cmake: ${INPUT} contains the delimiter ')${delimiter}\"'")
endif()

get_filename_component(input_name "${INPUT}" NAME)
set(content "// Generated from ${input_name} by embed_text.cmake. Do not edit.
namespace ${NAMESPACE} {
extern const char ${SYMBOL}[] = R\"${delimiter}(${text})${delimiter}\";
}  // namespace ${NAMESPACE}
")

# Rewrite only on change, so that an unchanged kernel rebuilds nothing.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" previous)
  if(previous STREQUAL content)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${content}")
