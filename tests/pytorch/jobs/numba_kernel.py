"""A numba-cuda kernel: numba compiles it (NVVM, then PTX that the driver
loads), copies an array to the device and launches the kernel. Prints one
JSON line with what the context reports of the device's memory. Kernels do
not compute on the simulated GPU, so the array's values are not looked at.

  numba_kernel.py
"""

import json
import os
import warnings

import numpy as np
from numba import cuda


@cuda.jit
def add_one(values):
    i = cuda.grid(1)
    if i < values.size:
        values[i] += 1


def main():
    warnings.simplefilter("ignore")  # numba's note on a small grid
    device_array = cuda.to_device(np.zeros(1024, dtype=np.float32))
    add_one[4, 256](device_array)
    cuda.synchronize()
    free, total = cuda.current_context().get_memory_info()
    print(json.dumps({"pid": os.getpid(), "free": free, "total": total}), flush=True)


if __name__ == "__main__":
    main()
