"""torch.compile under gpulimit on the simulated GPU: Inductor generates a
Triton kernel, Triton compiles it and launches it through the hooked
driver, under a memory cap and the launch gate."""

from conftest import describe, job, kernels_of, run_tenant


def test_a_compiled_function_runs_under_a_cap_and_the_gate(suite, machine, server):
    done, report = run_tenant(suite, machine, server, ["--mem", "2G"],
                              [suite.python, job("compiled.py")], timeout=600)
    assert done.status == 0, describe(done)
    assert report["stage"] == "ran", report.get("trace", report)
    assert report["elements"] == 4096
    names = kernels_of(machine.trace_path, report["pid"])
    print("[ measured ] kernels of the compiled job:", sorted(set(names)))
    assert any(name.startswith("triton_") for name in names), names
