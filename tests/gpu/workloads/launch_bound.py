"""A launch-bound loop: many tiny kernels (an in-place add on a 1-element
tensor), so that the host's cost per launch, hooks included, is all that is
measured. Prints one JSON line with launches per second.
"""

import argparse
import json
import os
import sys
import time

import torch


def main():
    parser = argparse.ArgumentParser(description="launch-bound microbenchmark")
    parser.add_argument("--launches", type=int, default=200000)
    parser.add_argument("--warmup", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    x = torch.zeros(1, device="cuda")
    for _ in range(args.warmup):
        x.add_(1.0)
    torch.cuda.synchronize()

    # The best of a few repeats: launches are short enough that a moment of
    # host noise would otherwise decide the figure.
    rates = []
    for _ in range(args.repeats):
        start = time.perf_counter_ns()
        for _ in range(args.launches):
            x.add_(1.0)
        torch.cuda.synchronize()
        rates.append(args.launches / ((time.perf_counter_ns() - start) / 1e9))
    expected = float(args.warmup + args.repeats * args.launches)
    print(json.dumps({"workload": "launch_bound", "pid": os.getpid(),
                      "launches": args.launches, "repeats": args.repeats,
                      "launches_per_s": max(rates), "all_launches_per_s": rates,
                      "us_per_launch": 1e6 / max(rates),
                      "result_correct": float(x.item()) == expected}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
