// Stream memory operations: cuStreamWaitValue32/64, cuStreamWriteValue32/64
// and cuStreamBatchMemOp. A wait holds its stream until the condition holds
// on the memory, which may change from the host, another stream or another
// process (IPC memory); the executor looks at it again every few
// microseconds. Writes happen in stream order.
#include <atomic>

#include "context.h"
#include "stream.h"

using namespace fakecuda;

namespace {

constexpr unsigned kWaitConditions = 0x3;  // GEQ, EQ, AND, NOR
constexpr unsigned kMaxBatch = 256;        // cuStreamBatchMemOp's documented limit

// Memory a memop may use: any device or page-locked host memory the driver
// knows, never managed memory, aligned to the operand (caller holds
// Driver::mu).
CUresult check_address_locked(CUdeviceptr addr, size_t bytes) {
  FAKECUDA_REQUIRE(addr && addr % bytes == 0, CUDA_ERROR_INVALID_VALUE);
  const Allocation* a = find_allocation(addr);
  FAKECUDA_REQUIRE(a && a->kind != AllocationKind::kManaged && addr + bytes <= a->base + a->size,
                   CUDA_ERROR_INVALID_VALUE);
  return CUDA_SUCCESS;
}

template <typename T>
bool condition_holds(T current, T value, unsigned condition) {
  using Signed = std::make_signed_t<T>;
  switch (condition) {
    case CU_STREAM_WAIT_VALUE_GEQ:  // cyclic: (signed)(*addr - value) >= 0
      return static_cast<Signed>(current - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return current == value;
    case CU_STREAM_WAIT_VALUE_AND:
      return (current & value) != 0;
    default:  // NOR
      return static_cast<T>(~(current | value)) != 0;
  }
}

template <typename T>
Op wait_op(CUdeviceptr addr, T value, unsigned condition) {
  Op op = action_op([](uint64_t) {});
  op.poll = [addr, value, condition] {
    const T current = std::atomic_ref<T>(*reinterpret_cast<T*>(addr)).load();
    return condition_holds<T>(current, value, condition);
  };
  return op;
}

template <typename T>
Op write_op(CUdeviceptr addr, T value) {
  return action_op(
      [addr, value](uint64_t) { std::atomic_ref<T>(*reinterpret_cast<T*>(addr)).store(value); });
}

template <typename T>
CUresult wait_value(CUstream stream, CUdeviceptr addr, T value, unsigned flags,
                    DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE((flags & ~(kWaitConditions | CU_STREAM_WAIT_VALUE_FLUSH)) == 0,
                   CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  if (CUresult r = check_address_locked(addr, sizeof(T)); r != CUDA_SUCCESS) return r;
  return submit_locked(stream, mode, wait_op<T>(addr, value, flags & kWaitConditions));
}

template <typename T>
CUresult write_value(CUstream stream, CUdeviceptr addr, T value, unsigned flags,
                     DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE((flags & ~CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) == 0,
                   CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  if (CUresult r = check_address_locked(addr, sizeof(T)); r != CUDA_SUCCESS) return r;
  return submit_locked(stream, mode, write_op<T>(addr, value));
}

CUresult batch(CUstream stream, unsigned count, CUstreamBatchMemOpParams* params, unsigned flags,
               DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(flags == 0 && count > 0 && count <= kMaxBatch && params,
                   CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  // All or nothing: the stream and every operation are checked before any
  // is enqueued.
  CUstream_st* resolved = nullptr;
  if (CUresult r = resolve_stream(stream, mode, &resolved); r != CUDA_SUCCESS) return r;
  std::vector<Op> ops;
  for (unsigned i = 0; i < count; ++i) {
    const CUstreamBatchMemOpParams& p = params[i];
    switch (p.operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
        const bool wide = p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
        const unsigned f = p.waitValue.flags;
        FAKECUDA_REQUIRE((f & ~(kWaitConditions | CU_STREAM_WAIT_VALUE_FLUSH)) == 0,
                         CUDA_ERROR_INVALID_VALUE);
        if (CUresult r = check_address_locked(p.waitValue.address, wide ? 8 : 4); r != CUDA_SUCCESS)
          return r;
        ops.push_back(
            wide ? wait_op<uint64_t>(p.waitValue.address, p.waitValue.value64, f & kWaitConditions)
                 : wait_op<uint32_t>(p.waitValue.address, p.waitValue.value, f & kWaitConditions));
        break;
      }
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
      case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
        const bool wide = p.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
        FAKECUDA_REQUIRE((p.writeValue.flags & ~CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) == 0,
                         CUDA_ERROR_INVALID_VALUE);
        if (CUresult r = check_address_locked(p.writeValue.address, wide ? 8 : 4);
            r != CUDA_SUCCESS)
          return r;
        ops.push_back(wide ? write_op<uint64_t>(p.writeValue.address, p.writeValue.value64)
                           : write_op<uint32_t>(p.writeValue.address, p.writeValue.value));
        break;
      }
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        FAKECUDA_REQUIRE(p.flushRemoteWrites.flags == 0, CUDA_ERROR_INVALID_VALUE);
        ops.push_back(action_op([](uint64_t) {}));
        break;
      case CU_STREAM_MEM_OP_BARRIER:
        FAKECUDA_REQUIRE(p.memoryBarrier.flags == CU_STREAM_MEMORY_BARRIER_TYPE_SYS ||
                             p.memoryBarrier.flags == CU_STREAM_MEMORY_BARRIER_TYPE_GPU,
                         CUDA_ERROR_INVALID_VALUE);
        ops.push_back(action_op([](uint64_t) {}));
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (Op& op : ops)
    if (CUresult r = submit_locked(resolved, mode, std::move(op)); r != CUDA_SUCCESS) return r;
  return CUDA_SUCCESS;
}

}  // namespace

// CUDA 8.0/9.0's names and CUDA 11.7's _v2 take the same arguments; with
// stream memory operations always supported they behave the same.
#define FAKECUDA_MEMOP(name, impl, T)                                                    \
  FAKECUDA_EXPORT CUresult name(CUstream s, CUdeviceptr a, T v, unsigned int f) {        \
    return impl<T>(s, a, v, f, DefaultStream::kLegacy);                                  \
  }                                                                                      \
  FAKECUDA_EXPORT CUresult name##_ptsz(CUstream s, CUdeviceptr a, T v, unsigned int f) { \
    return impl<T>(s, a, v, f, DefaultStream::kPerThread);                               \
  }

FAKECUDA_MEMOP(cuStreamWaitValue32, wait_value, cuuint32_t)
FAKECUDA_MEMOP(cuStreamWaitValue32_v2, wait_value, cuuint32_t)
FAKECUDA_MEMOP(cuStreamWaitValue64, wait_value, cuuint64_t)
FAKECUDA_MEMOP(cuStreamWaitValue64_v2, wait_value, cuuint64_t)
FAKECUDA_MEMOP(cuStreamWriteValue32, write_value, cuuint32_t)
FAKECUDA_MEMOP(cuStreamWriteValue32_v2, write_value, cuuint32_t)
FAKECUDA_MEMOP(cuStreamWriteValue64, write_value, cuuint64_t)
FAKECUDA_MEMOP(cuStreamWriteValue64_v2, write_value, cuuint64_t)

FAKECUDA_EXPORT CUresult cuStreamBatchMemOp(CUstream s, unsigned int count,
                                            CUstreamBatchMemOpParams* p, unsigned int flags) {
  return batch(s, count, p, flags, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamBatchMemOp_ptsz(CUstream s, unsigned int count,
                                                 CUstreamBatchMemOpParams* p, unsigned int flags) {
  return batch(s, count, p, flags, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamBatchMemOp_v2(CUstream s, unsigned int count,
                                               CUstreamBatchMemOpParams* p, unsigned int flags) {
  return batch(s, count, p, flags, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamBatchMemOp_v2_ptsz(CUstream s, unsigned int count,
                                                    CUstreamBatchMemOpParams* p,
                                                    unsigned int flags) {
  return batch(s, count, p, flags, DefaultStream::kPerThread);
}
