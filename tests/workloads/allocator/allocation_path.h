// One way of taking device memory from the driver, with the matching way of
// giving it back. Each --path of the allocator is one implementation.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace workloads {

enum class AllocationKind {
  linear,   // cuMemAlloc_v2
  pitch,    // cuMemAllocPitch_v2
  managed,  // cuMemAllocManaged
  async,    // cuMemAllocAsync from the device's default pool
  pool,     // cuMemAllocFromPoolAsync from a pool of our own
  vmm,      // cuMemCreate, mapped with cuMemAddressReserve + cuMemMap
  array,    // cuArrayCreate_v2
  array3d,  // cuArray3DCreate_v2
  mipmap,   // cuMipmappedArrayCreate
};

std::string_view to_string(AllocationKind kind);
std::optional<AllocationKind> parse_allocation_kind(std::string_view text);

// Every allocation size is a multiple of this: the granularity of VMM on every
// current GPU, and a size each path can shape into rows and slices exactly.
inline constexpr uint64_t kAllocationUnit = 2ull << 20;

class AllocationPath {
 public:
  virtual ~AllocationPath() = default;

  // Makes one allocation of about `bytes` (a multiple of kAllocationUnit).
  // On success sets `obtained` to the bytes it occupies as the driver was
  // asked for them: a row pitch, a VMM granularity or a mipmap chain can make
  // that more than `bytes`. A failure is returned, not reported: running out
  // of memory is what the allocator is there to observe.
  virtual CUresult allocate(uint64_t bytes, uint64_t& obtained) = 0;

  // Gives back every allocation made so far through the path's own free
  // function, so that the driver can hand the memory out again. Reports
  // failures.
  virtual CUresult release_all() = 0;

  // What the path still holds in reserve after release_all: a pool's
  // CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT after its trim; 0 for other paths.
  virtual uint64_t reserved_after_release() const { return 0; }
};

// `device` is where allocations go; paths that name it explicitly
// (pools, VMM) use it rather than the current context's device.
std::unique_ptr<AllocationPath> make_allocation_path(AllocationKind kind, CUdevice device);

std::unique_ptr<AllocationPath> make_linear_path();
std::unique_ptr<AllocationPath> make_pitch_path();
std::unique_ptr<AllocationPath> make_managed_path();
std::unique_ptr<AllocationPath> make_async_path();
std::unique_ptr<AllocationPath> make_pool_path(CUdevice device);
std::unique_ptr<AllocationPath> make_vmm_path(CUdevice device);
std::unique_ptr<AllocationPath> make_array_path();
std::unique_ptr<AllocationPath> make_array3d_path();
std::unique_ptr<AllocationPath> make_mipmap_path();

}  // namespace workloads
