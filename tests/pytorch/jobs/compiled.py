"""Runs a torch.compile'd function on the GPU: Inductor generates a Triton
kernel, Triton compiles it (to PTX, then a cubin with its bundled ptxas)
and launches it through the driver. Prints one JSON line with what ran, or
the stage and the error where it stopped.

  compiled.py
"""

import json
import os
import traceback

import torch


def main():
    report = {"pid": os.getpid()}
    x = torch.arange(4096, dtype=torch.float32, device="cuda")

    @torch.compile
    def scaled(t):
        return torch.sin(t) * 2.0 + 1.0

    try:
        y = scaled(x)
        torch.cuda.synchronize()
        report["stage"] = "ran"
        report["elements"] = y.numel()
    except Exception as error:  # where it stopped, for the test to show
        report["stage"] = "failed"
        report["error"] = "%s: %s" % (type(error).__name__, str(error).splitlines()[0][:500])
        report["trace"] = traceback.format_exc()[-3000:]
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
