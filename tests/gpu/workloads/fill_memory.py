"""Fills the GPU's memory from PyTorch until PyTorch raises its
out-of-memory error, then frees it all and carries on. Run under
`gpulimit --mem SIZE`, this shows what the cap looks like to PyTorch.
Prints one JSON line.

The allocation steps shrink (1 GiB, 64 MiB, 2 MiB tensors) so that the
last refusal comes within 2 MiB of what the allocator could still get.
While everything is held, NVML is asked (nvml_query.py, without the job's
preload, so that it sees the driver as it is) what this process really
holds; nvidia-smi's views are kept too where there is one.

Carrying on means allocating half the cap again and running a matmul to
its end. On a real GPU its result must also be finite; the simulated GPU
runs no kernel's arithmetic (tests/fakecuda/README.md), so there the result
is recorded, not judged.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch

MiB = 1 << 20
GiB = 1 << 30

OutOfMemory = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def nvidia_smi(args, preloaded):
    """nvidia-smi's answer as text; `preloaded` keeps the job's LD_PRELOAD
    (the tenant's view), otherwise it is removed (the driver's own view)."""
    env = dict(os.environ)
    if not preloaded:
        env.pop("LD_PRELOAD", None)
    try:
        done = subprocess.run(["nvidia-smi"] + args, env=env, capture_output=True, text=True,
                              timeout=30)
        return done.stdout.strip() if done.returncode == 0 else "error: " + done.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        return "error: %s" % error


def nvml_view():
    """nvml_query.py's answer, asked without the job's preload."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvml_query.py")
    try:
        done = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True,
                              timeout=30)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as error:
        return {"error": "nvml_query.py: %s" % error}


def process_memory_bytes(view, pid):
    """What NVML says `pid` holds, in bytes, and how the process was found
    there. NVML lists host pids: in a container the pid differs, and then
    the one process listed is taken."""
    if "error" in view:
        return None, view["error"]
    listed = view["processes"]
    if str(pid) in listed:
        return listed[str(pid)], "by pid"
    if len(listed) == 1:
        (only, used), = listed.items()
        return used, "the only process listed (pid %s)" % only
    return None, "not listed among %d processes" % len(listed)


def main():
    parser = argparse.ArgumentParser(description="fill GPU memory until PyTorch's OOM")
    parser.add_argument("--hold-file", default="",
                        help="write this file while everything is held, remove it after")
    args = parser.parse_args()

    torch.cuda.init()
    free_start, total = torch.cuda.mem_get_info()
    held = []
    steps = []
    raised = None
    for size in (GiB, 64 * MiB, 2 * MiB):
        count = 0
        while True:
            try:
                held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
                count += 1
            except OutOfMemory as error:
                raised = type(error).__module__ + "." + type(error).__name__
                break
        steps.append({"tensor_bytes": size, "tensors": count})
    torch.cuda.synchronize()
    tensor_bytes = sum(t.numel() for t in held)
    reserved = torch.cuda.memory_reserved()
    free_full, total_full = torch.cuda.mem_get_info()

    if args.hold_file:
        with open(args.hold_file, "w") as marker:
            marker.write(str(os.getpid()))
    nvml = nvml_view()
    nvml_bytes, nvml_match = process_memory_bytes(nvml, os.getpid())
    tenant_view = nvidia_smi(["--query-gpu=memory.total,memory.used,memory.free",
                              "--format=csv,noheader"], preloaded=True)
    driver_view = nvidia_smi(["--query-gpu=memory.total,memory.used,memory.free",
                              "--format=csv,noheader"], preloaded=False)
    apps = nvidia_smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                      preloaded=False)

    # Give everything back, then show that the process carries on.
    del held
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    time.sleep(0.2)
    free_after, _ = torch.cuda.mem_get_info()
    if args.hold_file:
        os.unlink(args.hold_file)
    carried_on = False
    finite = None
    again_error = None
    try:
        a = torch.randn(4096, 4096, device="cuda")
        half = torch.empty(total // 2, dtype=torch.uint8, device="cuda")
        finite = bool(torch.isfinite((a @ a).sum()).item())
        torch.cuda.synchronize()
        carried_on = True
        del half
    except (OutOfMemory, RuntimeError) as error:
        again_error = str(error).splitlines()[0]

    print(json.dumps({
        "workload": "fill_memory", "pid": os.getpid(), "torch": torch.__version__,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "total": total, "free_start": free_start, "total_when_full": total_full,
        "free_when_full": free_full, "raised": raised, "steps": steps,
        "tensor_bytes": tensor_bytes, "reserved_bytes": reserved,
        "nvml_process_bytes": nvml_bytes, "nvml_process_match": nvml_match,
        "nvml_memory": nvml.get("memory"),
        "nvidia_smi_tenant_view": tenant_view, "nvidia_smi_driver_view": driver_view,
        "nvidia_smi_apps": apps, "free_after_free": free_after,
        "again_error": again_error, "matmul_finite": finite,
        "carried_on": carried_on}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
