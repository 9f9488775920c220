"""PyTorch under `gpulimit --mem`: filling memory ends in PyTorch's own
out-of-memory error at the cap, the device really holds no more than the
cap (NVML, asked without the preload), gpulimit's ledger and status say
the same, and after freeing the job allocates again."""

import os
import re

import pytest

from conftest import GiB, MiB, describe, job, nvml_process_bytes, status_json, wait_for

import common

CAP = 2 * GiB
# PYTORCH_CUDA_ALLOC_CONF, how the allocator words its out-of-memory error
# and the cap's figure in it, and how close to the cap it can fill: the
# caching allocator's smallest segments are 2 MiB; expandable segments map
# their large pool in pages of 20 MiB.
ALLOCATORS = [
    ("", "CUDA out of memory.", "total capacity of 2.00 GiB", 4 * MiB),
    ("expandable_segments:True", "CUDA out of memory.", "total capacity of 2.00 GiB", 20 * MiB),
    ("backend:cudaMallocAsync", "Allocation on device 0 would exceed allowed memory.",
     "Device limit            : 2.00 GiB", 4 * MiB),
]


@pytest.mark.parametrize("conf,error,cap_figure,granularity", ALLOCATORS,
                         ids=[a[0] or "default" for a in ALLOCATORS])
def test_out_of_memory_at_the_cap_and_allocates_again(suite, machine, server, tmp_path, conf,
                                                      error, cap_figure, granularity):
    held_marker, release_marker = str(tmp_path / "held"), str(tmp_path / "release")
    extra = {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}
    env = machine.tenant_environment(os.path.join(machine.dir, "ledgers"), server.socket, extra)
    argv = common.gpulimit_command(suite, ["--mem", "2G"],
                                   [suite.python, job("fill_and_hold.py"), held_marker,
                                    release_marker])
    proc = common.Running(argv, env)
    try:
        pid = wait_for(held_marker, proc)
        device_view = nvml_process_bytes(suite, machine)
        status = status_json(suite, machine, server)
    finally:
        open(release_marker, "w").close()
    done = proc.wait(120)
    assert done.status == 0, describe(done)
    report = common.last_json(done.out)

    # PyTorch's own error, with the cap's figures.
    assert report["oom_message"].startswith(error), report["oom_message"]
    assert cap_figure in report["oom_message"], report["oom_message"]
    assert report["total"] == CAP
    # The device's own account: the process holds the cap, within what the
    # allocator can use of it, and never more.
    assert CAP - granularity <= device_view[pid] <= CAP, device_view
    # gpulimit's ledger, as gpulimitd reports it, says the same.
    tenants = [t for t in status["tenants"] if pid in t["pids"]]
    assert len(tenants) == 1, status
    used = tenants[0]["devices"][0]
    assert used["memory_cap"] == CAP
    assert used["memory_used"] == device_view[pid]
    assert used["oom_denials"] >= 1
    # Freed and emptied: the job gets half the cap again.
    assert report["free_after_empty_cache"] >= CAP // 2
    assert report["allocated_again"] == CAP // 2
