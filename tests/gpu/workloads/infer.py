"""A latency-sensitive inference tenant: small batches through a small
transformer at a steady rate, each request timed from its start to its
result on the host. Prints one JSON line with p50/p99 latency.

--barrier DIR --parties N as in train.py: measure only once every party
(the training tenant beside it) is running.
"""

import argparse
import json
import os
import sys
import time

import torch
from torch import nn

from barrier import wait_for_parties


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description="steady-rate inference latency")
    parser.add_argument("--name", default="infer")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--barrier", default="")
    parser.add_argument("--parties", type=int, default=1)
    args = parser.parse_args()

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(args.width, 8, 4 * args.width, dropout=0.0,
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False)
    model = model.to("cuda", dtype=torch.bfloat16).eval()
    inputs = torch.randn(args.batch, args.seq, args.width, device="cuda", dtype=torch.bfloat16)

    def request():
        with torch.inference_mode():
            out = model(inputs)
        torch.cuda.synchronize()
        return out

    for _ in range(args.warmup):
        request()
    if args.barrier:
        wait_for_parties(args.barrier, args.name, args.parties, 120.0)

    # Requests on a fixed schedule: a late one starts at once, never in a
    # burst to catch up (the next is scheduled from now).
    period_ns = int(1e9 / args.rate)
    latencies = []
    start = time.monotonic_ns()
    stop_at = start + int(args.seconds * 1e9)
    next_at = start
    while True:
        now = time.monotonic_ns()
        if now >= stop_at:
            break
        if now < next_at:
            time.sleep((next_at - now) / 1e9)
        began = time.monotonic_ns()
        request()
        latencies.append(time.monotonic_ns() - began)
        next_at = max(next_at + period_ns, time.monotonic_ns())
    end = time.monotonic_ns()
    print(json.dumps({
        "workload": "infer", "name": args.name, "pid": os.getpid(), "requests": len(latencies),
        "rate": args.rate, "batch": args.batch, "seconds": (end - start) / 1e9,
        "p50_ms": percentile(latencies, 0.50) / 1e6, "p99_ms": percentile(latencies, 0.99) / 1e6,
        "max_ms": max(latencies) / 1e6, "window_from_ns": start, "window_to_ns": end,
        "torch": torch.__version__}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
