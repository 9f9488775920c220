"""Processes of one job sharing one gpulimit cap, the ways PyTorch jobs
start them. Prints one JSON line.

  share_cap.py spawn CAP_BYTES   torch.multiprocessing (spawn) children:
        the parent holds a quarter of the cap and hands a CUDA tensor to
        each child through a queue (CUDA IPC); each child writes its mark
        into it; once both have, they allocate until refused, one after the
        other. Together they never pass the cap.
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



MiB = 1 << 20


def fill(step=16 * MiB):
    """Allocates STEP-sized tensors until PyTorch refuses; returns them."""
    held = []
    while True:
        try:
            held.append(torch.empty(step, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            break
    torch.cuda.synchronize()
    return held


def spawn_child(rank, shared_queue, results, go):
    shared = shared_queue.get()  # a CUDA tensor of the parent's, through CUDA IPC
    shared[rank] = rank + 1  # a copy from the host into the parent's memory
    torch.cuda.synchronize()
    results.put(("ready", rank))
    go[rank].wait()
    held = fill()
    results.put(("held", rank, sum(t.numel() for t in held)))
    while True:  # keep everything until the parent has counted it
        time.sleep(1)


def run_spawn(cap):
    ctx = mp.get_context("spawn")
    parent_held = torch.empty(cap // 4, dtype=torch.uint8, device="cuda")
    shared = torch.zeros(2, dtype=torch.int32, device="cuda")
    queue, results = ctx.Queue(), ctx.Queue()
    go = [ctx.Event(), ctx.Event()]
    children = [ctx.Process(target=spawn_child, args=(rank, queue, results, go))
                for rank in range(2)]
    for child in children:
        child.start()
    for _ in children:
        queue.put(shared)
    for _ in children:  # both opened the tensor before anyone fills the cap
        assert results.get(timeout=300)[0] == "ready"
    held = []
    for rank in range(2):
        go[rank].set()
        _, got_rank, got = results.get(timeout=300)
        held.append({"rank": got_rank, "held": got})
    written = shared.cpu().tolist()
    parent_more = fill()  # everything is taken: the parent gets at most a step
    report = {"mode": "spawn", "cap": cap, "parent_bytes": parent_held.numel(),
              "children": held, "written_by_children": written,
              "parent_more_bytes": sum(t.numel() for t in parent_more)}
    for child in children:
        child.kill()
        child.join()
    return report


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
    if mode == "spawn":
        report = run_spawn(int(sys.argv[2]))
    elif mode == "kill":
        report = run_kill(int(sys.argv[2]))
    else:
        report = run_loader()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
