/* The part of NVIDIA's NVML API that gpulimit and its simulated driver use.
 *
 * nvml.h is not installed on the build machines, so the subset is declared
 * here, ABI-identical to NVIDIA's nvml.h (NVML_API_VERSION 12): the same enum
 * values, struct layouts, version words and symbol names, checked against
 * the public nvml.h and the NVML API reference.
 *
 * Unlike nvml.h, this header declares every versioned name explicitly and
 * never #defines the unversioned names onto the newest version: an
 * interposer has to define nvmlInit and nvmlInit_v2 as two distinct symbols,
 * and the simulator exports both. */
#ifndef GPULIMIT_NVIDIA_NVML_SUBSET_H
#define GPULIMIT_NVIDIA_NVML_SUBSET_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* Opaque: a handle is only ever compared and passed back to NVML. */
typedef struct nvmlDevice_st* nvmlDevice_t;

/* nvmlInitWithFlags */
#define NVML_INIT_FLAG_NO_GPUS 1    /* succeed even when no GPU is found */
#define NVML_INIT_FLAG_NO_ATTACH 2  /* do not attach the GPUs found */
#define NVML_INIT_FLAG_FORCE_INIT 4 /* attach after an earlier NO_GPUS|NO_ATTACH init */

/* Buffer sizes guaranteed to hold the strings the named calls return. */
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96 /* nvmlDeviceGetUUID, MIG UUIDs included */
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96 /* nvmlDeviceGetName */
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* Versioned structs carry sizeof(struct) | version << 24 in their first word. */
#define NVML_STRUCT_VERSION(data, ver) \
  (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((unsigned int)(ver) << 24U))

#define NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT "%04X:%02X:%02X.0"
#define NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0"

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "DDDD:BB:DD.0" */
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;                       /* device id << 16 | vendor id */
  unsigned int pciSubSystemId;                    /* subsystem id << 16 | subsystem vendor id */
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "DDDDDDDD:BB:DD.0" */
} nvmlPciInfo_t;

/* v1: free + used == total, where used includes memory the driver reserves. */
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

/* v2: the caller sets version to nvmlMemory_v2; reserved is reported apart
 * from used. */
typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

/* The entry of nvmlDeviceGetComputeRunningProcesses (the unversioned, v1
 * symbol). */
typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid; /* as the host sees it, also from inside a container */
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* The entry of the _v2 and _v3 calls. */
typedef struct nvmlProcessInfo_v2_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;     /* 0xFFFFFFFF when MIG is off */
  unsigned int computeInstanceId; /* 0xFFFFFFFF when MIG is off */
} nvmlProcessInfo_v2_t, nvmlProcessInfo_t;

/* Initialisation is reference counted: every successful init needs one
 * shutdown. Until then, every call but nvmlErrorString fails with
 * NVML_ERROR_UNINITIALIZED. */
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char* nvmlErrorString(nvmlReturn_t result);

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length);
/* 1000 * major + 10 * minor of the CUDA version the driver supports. */
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion);

/* NVML enumerates every GPU of the machine; CUDA_VISIBLE_DEVICES does not
 * apply to it. */
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci);

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory);

/* *infoCount is the capacity of infos on entry and the number of processes
 * on return. When the capacity is too small, nothing is written to infos,
 * *infoCount is set to the number needed and NVML_ERROR_INSUFFICIENT_SIZE is
 * returned; with *infoCount == 0, infos may be NULL (a count query). */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                  nvmlProcessInfo_v1_t* infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_v2_t* infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos);

#ifdef __cplusplus
}
#endif

#endif /* GPULIMIT_NVIDIA_NVML_SUBSET_H */
