// device_views: what a process sees of every device, through CUDA and
// through NVML, as one key=value line, for the tests of which physical
// device a cap lands on (tenant_processes_test.cpp). Linked to the driver's
// and NVML's exported names; run with or without libgpulimit.so preloaded.
//
//   device_views [--alloc ORDINAL SIZE | --nvml-only]
//
// With --alloc, first allocates SIZE bytes (cuMemAlloc) on CUDA device
// ORDINAL and keeps them while it looks. With --nvml-only it never calls the
// driver (no cuInit: what a tool that sizes itself from NVML first sees)
// and writes only the nvml keys. Keys, for each CUDA ordinal i (as
// CUDA_VISIBLE_DEVICES numbers them) and each NVML index j (the machine's
// numbering):
//
//   cuda_devices, cuda<i>_uuid, cuda<i>_total, cuda<i>_free, cuda<i>_device_total
//   nvml_devices, nvml<j>_uuid, nvml<j>_total, nvml<j>_free, nvml<j>_used,
//   nvml<j>_v2_total, nvml<j>_v2_free
//
// UUIDs are written as NVML writes them: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
// Exit status 0, or 1 with one line on stderr when a call fails.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/byte_size.h"
#include "gpulimit/nvidia/nvml_subset.h"

namespace {

[[noreturn]] void fail(const std::string& call, int result) {
  std::fprintf(stderr, "device_views: %s failed: %d\n", call.c_str(), result);
  std::exit(1);
}

void check(const std::string& call, CUresult result) {
  if (result != CUDA_SUCCESS) fail(call, result);
}

void check_nvml(const std::string& call, nvmlReturn_t result) {
  if (result != NVML_SUCCESS) fail(call, result);
}

std::string uuid_text(const CUuuid& uuid) {
  std::string text = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
  }
  return text;
}

class Line {
 public:
  void add(const std::string& key, const std::string& value) {
    text_ += (text_.empty() ? "" : " ") + key + "=" + value;
  }
  void add(const std::string& key, unsigned long long value) { add(key, std::to_string(value)); }
  void print() const { std::printf("%s\n", text_.c_str()); }

 private:
  std::string text_;
};

}  // namespace

int main(int argc, char** argv) {
  std::optional<int> alloc_ordinal;
  uint64_t alloc_bytes = 0;
  if (argc == 4 && std::string(argv[1]) == "--alloc") {
    alloc_ordinal = std::atoi(argv[2]);
    alloc_bytes = gpulimit::parse_byte_size(argv[3]).value_or(0);
  }
  const bool nvml_only = argc == 2 && std::string(argv[1]) == "--nvml-only";
  if (argc != 1 && !nvml_only && (!alloc_ordinal || alloc_bytes == 0)) {
    std::fprintf(stderr, "usage: device_views [--alloc ORDINAL SIZE | --nvml-only]\n");
    return 2;
  }

  int count = 0;
  if (!nvml_only) {
    check("cuInit", cuInit(0));
    check("cuDeviceGetCount", cuDeviceGetCount(&count));
  }
  std::vector<CUcontext> contexts(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    check("cuDeviceGet", cuDeviceGet(&device, i));
    check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&contexts[i], device));
  }
  if (alloc_ordinal) {
    if (*alloc_ordinal < 0 || *alloc_ordinal >= count) fail("--alloc: no such device", -1);
    check("cuCtxSetCurrent", cuCtxSetCurrent(contexts[static_cast<size_t>(*alloc_ordinal)]));
    CUdeviceptr pointer = 0;
    check("cuMemAlloc", cuMemAlloc(&pointer, alloc_bytes));
  }

  Line line;
  line.add("workload", "device_views");
  if (!nvml_only) line.add("cuda_devices", static_cast<unsigned long long>(count));
  for (int i = 0; i < count; ++i) {
    const std::string key = "cuda" + std::to_string(i) + "_";
    CUuuid uuid{};
    check("cuDeviceGetUuid", cuDeviceGetUuid_v2(&uuid, i));
    size_t device_total = 0;
    check("cuDeviceTotalMem", cuDeviceTotalMem(&device_total, i));
    check("cuCtxSetCurrent", cuCtxSetCurrent(contexts[static_cast<size_t>(i)]));
    size_t free = 0, total = 0;
    check("cuMemGetInfo", cuMemGetInfo(&free, &total));
    line.add(key + "uuid", uuid_text(uuid));
    line.add(key + "total", total);
    line.add(key + "free", free);
    line.add(key + "device_total", device_total);
  }

  check_nvml("nvmlInit_v2", nvmlInit_v2());
  unsigned nvml_count = 0;
  check_nvml("nvmlDeviceGetCount_v2", nvmlDeviceGetCount_v2(&nvml_count));
  line.add("nvml_devices", nvml_count);
  for (unsigned j = 0; j < nvml_count; ++j) {
    const std::string key = "nvml" + std::to_string(j) + "_";
    nvmlDevice_t device = nullptr;
    check_nvml("nvmlDeviceGetHandleByIndex_v2", nvmlDeviceGetHandleByIndex_v2(j, &device));
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    check_nvml("nvmlDeviceGetUUID", nvmlDeviceGetUUID(device, uuid, sizeof(uuid)));
    nvmlMemory_t memory{};
    check_nvml("nvmlDeviceGetMemoryInfo", nvmlDeviceGetMemoryInfo(device, &memory));
    nvmlMemory_v2_t memory_v2{};
    memory_v2.version = nvmlMemory_v2;
    check_nvml("nvmlDeviceGetMemoryInfo_v2", nvmlDeviceGetMemoryInfo_v2(device, &memory_v2));
    line.add(key + "uuid", uuid);
    line.add(key + "total", memory.total);
    line.add(key + "free", memory.free);
    line.add(key + "used", memory.used);
    line.add(key + "v2_total", memory_v2.total);
    line.add(key + "v2_free", memory_v2.free);
  }
  nvmlShutdown();
  line.print();
  return 0;
}
