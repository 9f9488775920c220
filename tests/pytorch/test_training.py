"""A PyTorch training loop (the real-GPU suite's train.py: a transformer
encoder, nn.Linear through cuBLAS, SGD) under a memory cap, eagerly,
replayed as a torch.cuda.CUDAGraph, and under torch.autocast to bfloat16,
each run to its end on the simulated GPU. Kernels do not compute there, so
the loss means nothing; what is checked is that every step of PyTorch's and
cuBLAS's work goes through gpulimit under the cap."""

import pytest

from conftest import describe, run_tenant

SMALL = ["--batch", "4", "--seq", "32", "--width", "64", "--layers", "2"]


@pytest.mark.parametrize("precision,graph", [("fp32", False), ("fp32", True), ("bf16", False)],
                         ids=["fp32_eager", "fp32_cuda_graph", "bf16_autocast"])
def test_training_runs_to_the_end_under_a_cap(suite, machine, server, precision, graph):
    argv = [suite.python, suite.torch_script("train.py"), "--steps", "5", "--warmup", "2",
            "--precision", precision] + SMALL
    if graph:
        argv.append("--graph")

    done, report = run_tenant(suite, machine, server, ["--mem", "3G"], argv)

    assert done.status == 0, describe(done)
    assert report["steps"] == 5
    assert report["graph"] is graph
