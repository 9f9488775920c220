"""numba-cuda under gpulimit on the simulated GPU: a kernel compiled by
numba (NVVM and PTX, which the simulated driver loads) runs under a memory
cap and the launch gate, and the context reports the cap as the device."""

from conftest import GiB, describe, job, kernels_of, run_tenant


def test_a_numba_kernel_runs_under_a_cap_and_the_gate(suite, machine, server):
    done, report = run_tenant(suite, machine, server, ["--mem", "1G"],
                              [suite.python, job("numba_kernel.py")], timeout=600)
    assert done.status == 0, describe(done)
    assert report["total"] == 1 * GiB
    assert report["free"] <= 1 * GiB - 256 * 2**20, report  # its context takes 256 MiB
    kernels = kernels_of(machine.trace_path, report["pid"])
    print("[ measured ] kernels of the numba job:", kernels)
    assert any("add_one" in name for name in kernels), kernels
