# Writes the CUresult names that cuda.h defines as an X-macro list, so that
# cuGetErrorName knows exactly the toolkit's codes.
file(STRINGS "${CUDA_H}" lines REGEX "^ *CUDA_(SUCCESS|ERROR_[A-Z0-9_]+) *= *[0-9]+")
set(body "// Generated from ${CUDA_H}; do not edit.\n")
foreach(line IN LISTS lines)
  string(REGEX MATCH "CUDA_(SUCCESS|ERROR_[A-Z0-9_]+)" name "${line}")
  string(APPEND body "FAKECUDA_ERROR(${name})\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "${body}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
