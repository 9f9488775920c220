// Virtual memory management, as PyTorch's expandable segments and NCCL use
// it: physical memory from cuMemCreate, mapped into an address range of its
// own and made accessible. Only cuMemCreate takes device memory; given back
// with cuMemUnmap + cuMemRelease + cuMemAddressFree.
#include <vector>

#include "allocation_path.h"
#include "cu_check.h"

namespace workloads {
namespace {

struct Mapping {
  CUmemGenericAllocationHandle handle;
  CUdeviceptr address;
  size_t size;
};

class VmmPath final : public AllocationPath {
 public:
  explicit VmmPath(CUdevice device) : device_(device) {
    props_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    props_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props_.location.id = device;
  }

  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    if (granularity_ == 0) {
      CU_CHECK(
          cuMemGetAllocationGranularity(&granularity_, &props_, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
      if (granularity_ == 0) {
        report_error("cuMemGetAllocationGranularity returned a granularity of 0");
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    const size_t size = (bytes + granularity_ - 1) / granularity_ * granularity_;

    CUmemGenericAllocationHandle handle = 0;
    const CUresult result = CU(cuMemCreate)(&handle, size, &props_, 0);
    if (result != CUDA_SUCCESS) return result;
    CUdeviceptr address = 0;
    const CUresult mapped = map(handle, size, address);
    if (mapped != CUDA_SUCCESS) {
      CU(cuMemRelease)(handle);
      return mapped;
    }
    mappings_.push_back({handle, address, size});
    obtained = size;
    return CUDA_SUCCESS;
  }

  CUresult release_all() override {
    while (!mappings_.empty()) {
      const Mapping& mapping = mappings_.back();
      CU_CHECK(cuMemUnmap(mapping.address, mapping.size));
      CU_CHECK(cuMemRelease(mapping.handle));
      CU_CHECK(cuMemAddressFree(mapping.address, mapping.size));
      mappings_.pop_back();
    }
    return CUDA_SUCCESS;
  }

 private:
  // Reserves an address range for `handle`, maps it and grants this device
  // read-write access; undoes its own steps if one fails. Failures are
  // returned unreported, like cuMemCreate's.
  CUresult map(CUmemGenericAllocationHandle handle, size_t size, CUdeviceptr& address) {
    CUresult result = CU(cuMemAddressReserve)(&address, size, 0, 0, 0);
    if (result != CUDA_SUCCESS) return result;
    result = CU(cuMemMap)(address, size, 0, handle, 0);
    if (result == CUDA_SUCCESS) {
      CUmemAccessDesc access = {};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device_;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      result = CU(cuMemSetAccess)(address, size, &access, 1);
      if (result != CUDA_SUCCESS) CU(cuMemUnmap)(address, size);
    }
    if (result != CUDA_SUCCESS) CU(cuMemAddressFree)(address, size);
    return result;
  }

  CUdevice device_;
  CUmemAllocationProp props_ = {};
  size_t granularity_ = 0;
  std::vector<Mapping> mappings_;
};

}  // namespace

std::unique_ptr<AllocationPath> make_vmm_path(CUdevice device) {
  return std::make_unique<VmmPath>(device);
}

}  // namespace workloads
