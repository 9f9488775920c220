"""A PyTorch training loop on synthetic data: a small transformer encoder,
SGD, bf16 autocast (--precision fp32: none). Prints one JSON line.

Two ways to run:
  --steps N     time N steps after the warm-up (overhead figures): steps/s
                over the whole measured run, synchronised at both ends.
  --seconds S   train for S seconds after the warm-up (a tenant of the share
                and priority scenarios): the host time at which each step
                finished, so that throughput can be counted in any window.

--graph captures the whole step (forward, backward, optimiser) once and
replays it with torch.cuda.CUDAGraph: every step is one cuGraphLaunch.
--barrier DIR --parties N: after the warm-up, wait until N processes have
reached DIR, so that tenants measure over the same time.

Times are time.monotonic_ns(), CLOCK_MONOTONIC: the clock of the kernel
traces gpulimit-trace reads.
"""

import argparse
import json
import os
import sys
import time

import torch
from torch import nn

from barrier import wait_for_parties


def parse_args():
    parser = argparse.ArgumentParser(description="PyTorch training loop for the GPU suite")
    parser.add_argument("--name", default="train")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--graph", action="store_true")
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16",
                        help="bf16: the forward pass under torch.autocast to bfloat16; "
                             "fp32: no autocast")
    parser.add_argument("--barrier", default="")
    parser.add_argument("--parties", type=int, default=1)
    parser.add_argument("--barrier-timeout-s", type=float, default=120.0)
    args = parser.parse_args()
    if (args.steps > 0) == (args.seconds > 0):
        parser.error("give exactly one of --steps and --seconds")
    return args


class Model(nn.Module):
    def __init__(self, vocab, width, layers, heads=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def main():
    args = parse_args()
    device = torch.device("cuda")
    torch.manual_seed(0)
    vocab = 8192
    model = Model(vocab, args.width, args.layers).to(device)
    # SGD keeps no step counter on the host, so the whole step can be
    # captured in a graph as it is.
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    tokens = torch.randint(0, vocab, (args.batch, args.seq), device=device)
    targets = torch.randint(0, vocab, (args.batch, args.seq), device=device)

    def step():
        # No autocast cache: a cache kept across a graph capture is invalid.
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False,
                            enabled=args.precision == "bf16"):
            loss = loss_fn(model(tokens).view(-1, vocab), targets.view(-1))
        loss.backward()
        optimizer.step()
        return loss

    if args.graph:
        # As PyTorch documents whole-network capture: warm up on a side
        # stream, then capture one step with gradients set to None.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                optimizer.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = step()

        def run_step():
            graph.replay()
            return static_loss
    else:
        def run_step():
            optimizer.zero_grad(set_to_none=True)
            return step()

    for _ in range(args.warmup):
        loss = run_step()
    torch.cuda.synchronize()

    if args.barrier:
        wait_for_parties(args.barrier, args.name, args.parties, args.barrier_timeout_s)

    result = {"workload": "train", "name": args.name, "pid": os.getpid(),
              "graph": args.graph, "precision": args.precision, "batch": args.batch, "seq": args.seq, "width": args.width,
              "layers": args.layers, "warmup_steps": args.warmup,
              "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    if args.steps:
        start = time.monotonic_ns()
        for _ in range(args.steps):
            loss = run_step()
        torch.cuda.synchronize()
        end = time.monotonic_ns()
        result.update({"steps": args.steps, "seconds": (end - start) / 1e9,
                       "steps_per_s": args.steps / ((end - start) / 1e9),
                       "window_from_ns": start, "window_to_ns": end})
    else:
        # Two steps in flight, as a real loop keeps the GPU busy: wait for
        # step i-2 before queueing step i, and take the time it finished.
        done = []
        events = []
        start = time.monotonic_ns()
        stop_at = start + int(args.seconds * 1e9)
        while True:
            loss = run_step()
            event = torch.cuda.Event()
            event.record()
            events.append(event)
            if len(events) > 2:
                events.pop(0).synchronize()
                done.append(time.monotonic_ns())
            if time.monotonic_ns() >= stop_at:
                break
        for event in events:
            event.synchronize()
            done.append(time.monotonic_ns())
        end = time.monotonic_ns()
        result.update({"steps": len(done), "seconds": (end - start) / 1e9,
                       "steps_per_s": len(done) / ((end - start) / 1e9),
                       "window_from_ns": start, "window_to_ns": end,
                       "step_done_ns": done})
    result["final_loss"] = float(loss.item())
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
