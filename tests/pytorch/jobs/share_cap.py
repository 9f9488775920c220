"""Processes of one job sharing one gpulimit cap, the ways PyTorch jobs
start them. Prints one JSON line.

  share_cap.py kill CAP_BYTES    a child holds half the cap and is
        SIGKILLed; the parent then gets that half itself.
  share_cap.py loader            a DataLoader with two spawn workers feeds
        pinned batches to the GPU.
"""

import json
import os
import signal
import sys
import time

import torch
import torch.multiprocessing as mp



def kill_child(half, ready):
    held = torch.empty(half, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    ready.set()
    while held.numel():
        time.sleep(1)


def run_kill(cap):
    ctx = mp.get_context("spawn")
    torch.cuda.init()
    ready = ctx.Event()
    child = ctx.Process(target=kill_child, args=(cap // 2, ready))
    child.start()
    assert ready.wait(300), "the child did not allocate"
    free_while_held, total = torch.cuda.mem_get_info()
    refused = False
    try:
        torch.empty(cap // 2, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        refused = True
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    # The child's memory comes back to the tenant: the parent gets the half.
    got = None
    deadline = time.monotonic() + 60
    while got is None and time.monotonic() < deadline:
        try:
            got = torch.empty(cap // 2, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            time.sleep(0.1)
    return {"mode": "kill", "cap": cap, "total": total, "free_while_held": free_while_held,
            "refused_while_held": refused, "child_exit": child.exitcode,
            "got_half_after_kill": got is not None}


class Batches(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        return torch.full((256,), float(index))


def run_loader():
    loader = torch.utils.data.DataLoader(Batches(), batch_size=8, num_workers=2,
                                         multiprocessing_context="spawn", pin_memory=True)
    total = torch.zeros((), device="cuda")
    batches = 0
    for batch in loader:
        total += batch.to("cuda", non_blocking=True).sum()
        batches += 1
    torch.cuda.synchronize()
    return {"mode": "loader", "batches": batches}


def main():
    mode = sys.argv[1]
    if mode == "kill":
        report = run_kill(int(sys.argv[2]))
    else:
        report = run_loader()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
