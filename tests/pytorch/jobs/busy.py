"""Keeps the GPU busy from PyTorch for SECONDS: in-place adds on a small
tensor, each one kernel (on the simulated GPU it takes FAKECUDA_KERNEL_NS),
in batches of 16 with at most two batches queued ahead; with --graph each
batch is one replay of a torch.cuda.CUDAGraph of the 16 adds. Prints one
JSON line.

  busy.py SECONDS [--graph]
"""

import json
import os
import sys
import time

import torch

BATCH = 16


def main():
    seconds = float(sys.argv[1])
    graph_mode = "--graph" in sys.argv[2:]
    x = torch.zeros(256, device="cuda")

    def batch():
        for _ in range(BATCH):
            x.add_(1.0)

    if graph_mode:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            batch()  # warm-up outside the capture, as PyTorch documents
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            batch()
        step = graph.replay
    else:
        step = batch
    torch.cuda.synchronize()

    batches = 0
    pending = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        step()
        event = torch.cuda.Event()
        event.record()
        pending.append(event)
        if len(pending) > 2:
            pending.pop(0).synchronize()
        batches += 1
    torch.cuda.synchronize()
    print(json.dumps({"pid": os.getpid(), "graph": graph_mode, "batches": batches,
                      "kernels": batches * BATCH}), flush=True)


if __name__ == "__main__":
    main()
