// One pass of allocations up to a target, made by one thread or by several
// racing for the same budget, each through a path of its own.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "allocation_path.h"

namespace workloads {

struct Round {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  CUresult error = CUDA_SUCCESS;       // what ended the round early, if anything
  std::vector<uint64_t> thread_bytes;  // what each thread obtained
};

// Allocates chunks of at most `chunk` bytes through `paths` until `target`
// bytes are obtained or the driver refuses. With one path the calling thread
// allocates; with several, one thread per path starts at once, with
// `context` current, and each takes chunks from the shared budget until it
// is spent or the driver refuses that thread.
Round allocate_until(const std::vector<std::unique_ptr<AllocationPath>>& paths, uint64_t target,
                     uint64_t chunk, CUcontext context);

// Running out is the result the allocator exists to observe; any other
// refusal means the driver (or an interposer) misbehaved.
inline bool is_expected(CUresult result) {
  return result == CUDA_SUCCESS || result == CUDA_ERROR_OUT_OF_MEMORY;
}

}  // namespace workloads
