"""PyTorch tenants time-slicing the simulated GPU under gpulimitd, their
shares measured from the simulator's kernel trace (gpulimit-trace) over
the window in which all of them ran: weights 3:1, a lone --sm 30, a
tenant replaying a torch.cuda.CUDAGraph beside an eager one, and
--priority high beside training.

Kernels take 1 ms on the simulated device here, so that the tenants'
Python loops keep it busy and the scheduler, not the host, decides."""

import os
import time

import pytest

from conftest import describe, job

import common
from section_shares import analyse_trace, trace_window

SECONDS = 6
MARGIN_NS = 500_000_000  # start-up and wind-down left out of the window
TOLERANCE = 0.05


@pytest.fixture
def machine(suite):
    return common.Machine(suite, "timeslice", memory="16G", context_memory="256M")


def start_tenant(suite, machine, server, name, flags, args=(), seconds=SECONDS):
    """busy.py for `seconds` as tenant `name`, under `gpulimit FLAGS`."""
    env = machine.tenant_environment(os.path.join(machine.dir, "ledgers-" + name),
                                     server.socket, {"FAKECUDA_KERNEL_NS": "1000000"})
    argv = common.gpulimit_command(suite, flags,
                                   [suite.python, job("busy.py"), str(seconds)] + list(args))
    return common.Running(argv, env)


def measure(suite, machine, running):
    """Waits for the tenants (name -> Running), then their figures over the
    window in which all of them ran: (tenants by name, device, pids)."""
    finished = {name: r.wait(SECONDS + 120) for name, r in running.items()}
    for name, done in finished.items():
        assert done.status == 0, "%s: %s" % (name, describe(done))
    pids = {name: common.last_json(done.out)["pid"] for name, done in finished.items()}
    window = trace_window(machine.trace_path, set(pids.values()), MARGIN_NS)
    assert window and window[1] - window[0] > 2_000_000_000, window
    device, error = analyse_trace(suite, machine.trace_path, pids, window)
    assert device, error
    assert device["overlaps"]["count"] == 0, device["overlaps"]
    named = {t["name"]: t for t in device["tenants"] if t["named"]}
    print("[ measured ] window %.2f s, busy %.4f, %s" % (
        (window[1] - window[0]) / 1e9, device["busy_fraction"],
        ", ".join("%s: %.4f of busy, %.4f of wall" % (
            name, t["busy_ns"] / device["busy_ns"], t["share"]) for name, t in named.items())))
    return named, device, pids


def run_tenants(suite, machine, server, tenants):
    """Starts every tenant at once: name -> (gpulimit flags, busy.py args)."""
    running = {name: start_tenant(suite, machine, server, name, flags, args)
               for name, (flags, args) in tenants.items()}
    named, device, _ = measure(suite, machine, running)
    return named, device


def share_of_busy(tenants, device, name):
    return tenants[name]["busy_ns"] / device["busy_ns"]


def test_weights_three_to_one(suite, machine, server):
    tenants, device = run_tenants(suite, machine, server, {
        "heavy": (["--weight", "3"], []),
        "light": (["--weight", "1"], []),
    })

    assert share_of_busy(tenants, device, "heavy") == pytest.approx(0.75, abs=TOLERANCE)
    assert share_of_busy(tenants, device, "light") == pytest.approx(0.25, abs=TOLERANCE)


def test_a_lone_tenant_capped_at_30_percent(suite, machine, server):
    tenants, device = run_tenants(suite, machine, server, {
        "capped": (["--sm", "30"], []),
    })

    assert tenants["capped"]["share"] == pytest.approx(0.30, abs=TOLERANCE)


def test_a_cuda_graph_tenant_takes_turns_with_an_eager_one(suite, machine, server):
    tenants, device = run_tenants(suite, machine, server, {
        "graph": (["--weight", "1"], ["--graph"]),
        "eager": (["--weight", "1"], []),
    })

    assert share_of_busy(tenants, device, "graph") == pytest.approx(0.5, abs=TOLERANCE)
    assert share_of_busy(tenants, device, "eager") == pytest.approx(0.5, abs=TOLERANCE)


def test_a_high_priority_tenant_goes_first_beside_training(suite, machine, server):
    # Training runs first, and on after inference ends, so that the window
    # (where both ran) is inference's. Priority is strict at quantum
    # boundaries: while inference wants the device, training gets only the
    # handoffs' crumbs.
    training = start_tenant(suite, machine, server, "training", [], seconds=SECONDS + 8)
    deadline = time.monotonic() + 120
    while not os.path.exists(machine.trace_path) or \
            trace_window(machine.trace_path, {training.pid}, 0) is None:
        assert time.monotonic() < deadline, "training never ran a kernel"
        time.sleep(0.05)
    inference = start_tenant(suite, machine, server, "inference", ["--priority", "high"])
    tenants, device, pids = measure(suite, machine,
                                    {"inference": inference, "training": training})

    assert share_of_busy(tenants, device, "inference") >= 0.9
    assert share_of_busy(tenants, device, "training") <= 0.1
    # And training has the device again once inference is done.
    training_end = trace_window(machine.trace_path, {pids["training"]}, 0)[1]
    inference_end = trace_window(machine.trace_path, {pids["inference"]}, 0)[1]
    assert training_end > inference_end + 1_000_000_000, (training_end, inference_end)
