"""Fills the GPU from PyTorch until its out-of-memory error, holds
everything until told to let go, then frees it, empties the cache and
allocates again. Prints one JSON line.

  fill_and_hold.py HELD RELEASE

writes HELD (its pid) once everything is held and waits for RELEASE to
exist, so that a test can look at the device meanwhile."""

import json
import os
import sys
import time

import torch

MiB = 1 << 20
GiB = 1 << 30


def main():
    held_marker, release_marker = sys.argv[1], sys.argv[2]
    torch.cuda.init()
    free_start, total = torch.cuda.mem_get_info()
    held = []
    message = None
    # Shrinking steps, so that the last refusal is within 2 MiB of the end.
    for size in (256 * MiB, 32 * MiB, 2 * MiB):
        while True:
            try:
                held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
            except torch.OutOfMemoryError as error:
                message = str(error)
                break
    torch.cuda.synchronize()
    tensor_bytes = sum(t.numel() for t in held)
    reserved = torch.cuda.memory_reserved()
    free_full, _ = torch.cuda.mem_get_info()

    with open(held_marker + ".tmp", "w") as marker:
        marker.write(str(os.getpid()))
    os.rename(held_marker + ".tmp", held_marker)
    deadline = time.monotonic() + 120
    while not os.path.exists(release_marker) and time.monotonic() < deadline:
        time.sleep(0.02)

    del held
    torch.cuda.empty_cache()
    free_after, _ = torch.cuda.mem_get_info()
    again = torch.empty(total // 2, dtype=torch.uint8, device="cuda")
    again.fill_(1)
    torch.cuda.synchronize()
    print(json.dumps({
        "pid": os.getpid(), "total": total, "free_start": free_start,
        "oom_message": message, "tensor_bytes": tensor_bytes, "reserved": reserved,
        "free_when_full": free_full, "free_after_empty_cache": free_after,
        "allocated_again": again.numel()}), flush=True)


if __name__ == "__main__":
    main()
