"""What NVML says of GPU 0: its memory and what each process holds there.
Prints one JSON line: {"memory": {"total", "used", "free"}, "processes":
{pid: bytes}} or {"error": ...}. Standard library only (ctypes), so it asks
the driver's own NVML the way nvidia-smi does, on a real GPU and on the
simulated one (whose libnvidia-ml.so.1 LD_LIBRARY_PATH finds). Run it
without gpulimit's preload to see the device as it is.
"""

import ctypes
import json
import sys

NVML_SUCCESS = 0
NVML_ERROR_INSUFFICIENT_SIZE = 7


class ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t (the _v2/_v3 layout)."""
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Memory(ctypes.Structure):
    """nvmlMemory_t."""
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


def query():
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    if nvml.nvmlInit_v2() != NVML_SUCCESS:
        return {"error": "nvmlInit_v2 failed"}
    try:
        device = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(device)) != NVML_SUCCESS:
            return {"error": "nvmlDeviceGetHandleByIndex_v2(0) failed"}
        memory = Memory()
        if nvml.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory)) != NVML_SUCCESS:
            return {"error": "nvmlDeviceGetMemoryInfo failed"}
        capacity = 64
        while True:
            count = ctypes.c_uint(capacity)
            listed = (ProcessInfo * capacity)()
            status = nvml.nvmlDeviceGetComputeRunningProcesses_v3(device, ctypes.byref(count),
                                                                  listed)
            if status == NVML_ERROR_INSUFFICIENT_SIZE and capacity < 4096:
                capacity *= 4
                continue
            if status != NVML_SUCCESS:
                return {"error": "nvmlDeviceGetComputeRunningProcesses_v3: %d" % status}
            break
        return {
            "memory": {"total": memory.total, "used": memory.used, "free": memory.free},
            "processes": {str(listed[i].pid): listed[i].usedGpuMemory
                          for i in range(count.value)},
        }
    finally:
        nvml.nvmlShutdown()


def main():
    try:
        print(json.dumps(query()), flush=True)
    except OSError as error:
        print(json.dumps({"error": "libnvidia-ml.so.1: %s" % error}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
