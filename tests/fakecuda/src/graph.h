// CUDA graphs and stream capture.
#pragma once

#include <thread>

#include "driver.h"

namespace fakecuda {

// One capture sequence: the graph being built, and its rules.
struct Capture {
  CUgraph_st* graph;
  CUstreamCaptureMode mode;
  CUstream_st* origin;
  std::thread::id thread;
  uint64_t id;
  bool invalidated;
  std::vector<CUstream_st*> streams;  // origin and every stream that joined
};

// Records `op` as a node of the capture `stream` belongs to (caller holds
// Driver::mu).
CUresult capture_op_locked(CUstream_st* stream, Op op);

// The legacy default stream may not be used while a blocking stream of its
// context captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; the capture is
// invalidated).
CUresult check_legacy_use_locked(CUstream_st* legacy);

// "Potentially unsafe" calls (synchronous allocation and free, context and
// device synchronisation) are refused while this thread captures, or any
// thread captures in global mode, as with the real driver.
CUresult capture_forbids_unsafe_call_locked();

// Ends every capture `stream` takes part in with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
void invalidate_capture_locked(CUstream_st* stream);

// Stream-ordered allocation inside a capture becomes a memory node.
CUresult capture_mem_alloc_locked(CUstream_st* stream, size_t bytes, CUdeviceptr* out);
CUresult capture_mem_free_locked(CUstream_st* stream, CUdeviceptr ptr);

// True when `ptr` is the address of an allocation node: allocated by the
// launches of its graph, whether or not one has run.
bool graph_address_locked(CUdeviceptr ptr);

}  // namespace fakecuda
