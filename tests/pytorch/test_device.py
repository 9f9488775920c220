"""PyTorch sees the simulated GPU, and under `gpulimit --mem` a GPU of the
cap's size, with each of its three allocators."""

import pytest

from conftest import GiB, MiB, describe, job, run_bare, run_tenant

ALLOCATORS = [
    ("native", ""),
    ("native", "expandable_segments:True"),
    ("cudaMallocAsync", "backend:cudaMallocAsync"),
]


def test_sees_the_simulated_gpu_without_gpulimit(suite, machine):
    done, report = run_bare(machine, [suite.python, job("probe.py")])

    assert done.status == 0, describe(done)
    assert report["available"] is True, report
    assert report["cuda"].startswith("13.")
    assert report["device_count"] == 1
    assert report["capability"] == [9, 0]
    assert report["multi_processor_count"] == 132
    assert report["total_memory"] == 16 * GiB
    assert report["total"] == 16 * GiB


@pytest.mark.parametrize("backend,conf", ALLOCATORS, ids=[c or "default" for _, c in ALLOCATORS])
def test_mem_get_info_shows_the_cap(suite, machine, server, backend, conf):
    extra = {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}

    done, report = run_tenant(suite, machine, server, ["--mem", "2G"],
                              [suite.python, job("probe.py")], extra)

    assert done.status == 0, describe(done)
    assert report["available"] is True, report
    assert report["backend"] == backend
    assert report["total"] == 2 * GiB
    assert report["total_memory"] == 2 * GiB
    # The context (256 MiB here) counts against the cap before any tensor.
    assert 2 * GiB - 256 * MiB - 16 * MiB <= report["free"] <= 2 * GiB - 256 * MiB
    # The first tensor's segment is charged: free drops by at least its size.
    assert report["free"] - report["free_after"] >= report["tensor_bytes"]
    assert report["total_after"] == 2 * GiB
