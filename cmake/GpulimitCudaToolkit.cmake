# The CUDA toolkit supplies cuda.h, cudaTypedefs.h, CUPTI and nvcc (used to
# build the workloads' PTX). gpulimit never links the real libcuda: the
# driver is whatever libcuda.so.1 the loader finds at run time.

if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND OR NOT CUDAToolkit_NVCC_EXECUTABLE
   OR NOT EXISTS "${CUDAToolkit_INCLUDE_DIRS}/cudaTypedefs.h")
  message(FATAL_ERROR
    "gpulimit needs the CUDA toolkit (12 or 13: cuda.h, cudaTypedefs.h, nvcc, CUPTI), "
    "and none was found at /usr/local/cuda. Install NVIDIA's CUDA toolkit there, "
    "or point -DCUDAToolkit_ROOT=DIR at one.")
endif()
if(CUDAToolkit_VERSION VERSION_LESS 12.0)
  message(FATAL_ERROR "gpulimit needs CUDA toolkit 12 or newer; found ${CUDAToolkit_VERSION} "
                      "at ${CUDAToolkit_ROOT}")
endif()
message(STATUS "gpulimit: CUDA toolkit ${CUDAToolkit_VERSION} (${CUDAToolkit_NVCC_EXECUTABLE})")

# Headers only: cuda.h and friends, as a system include so that our -Werror
# does not judge NVIDIA's headers.
add_library(gpulimit_cuda_headers INTERFACE)
add_library(gpulimit::cuda_headers ALIAS gpulimit_cuda_headers)
target_include_directories(gpulimit_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
