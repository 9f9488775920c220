"""Two PyTorch jobs under a user's memory_total (policy): together they
hold no more than the total on the device, as the device itself counts it
(NVML, asked without the preload), each one ending in PyTorch's own
out-of-memory error; and the memory of a SIGKILLed one goes to the next."""

import os
import signal
import time

import pytest

from conftest import GiB, MiB, describe, job, nvml_process_bytes, status_json, wait_for

import common

TOTAL = 3 * GiB
FIRST_CAP = 1 * GiB
# The caching allocator's smallest segments are 2 MiB; fill_and_hold's last
# refusal is within two of them of the end.
GRANULARITY = 4 * MiB


@pytest.fixture
def totals_server(suite, machine, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('[users.%d]\nmemory_total = "3G"\n' % os.getuid())
    with common.Server(suite, machine, name="totals", args=["--policy", str(policy)]) as running:
        if running.error:
            pytest.fail(running.error)
        yield running


def start_filler(suite, machine, server, tmp_path, name, flags):
    held, release = str(tmp_path / (name + ".held")), str(tmp_path / (name + ".release"))
    env = machine.tenant_environment(os.path.join(machine.dir, "ledgers"), server.socket)
    argv = common.gpulimit_command(suite, flags,
                                   [suite.python, job("fill_and_hold.py"), held, release])
    return common.Running(argv, env), held, release


def test_two_jobs_hold_no_more_than_their_users_total(suite, machine, totals_server, tmp_path):
    first, first_held, first_release = start_filler(suite, machine, totals_server, tmp_path,
                                                    "first", ["--mem", "1G"])
    second = None
    try:
        first_pid = wait_for(first_held, first)
        second, second_held, second_release = start_filler(suite, machine, totals_server,
                                                           tmp_path, "second", [])
        second_pid = wait_for(second_held, second)
        device = nvml_process_bytes(suite, machine)
    finally:
        open(first_release, "w").close()
        if second:
            open(second_release, "w").close()
    first_done, second_done = first.wait(120), second.wait(120)
    assert first_done.status == 0, describe(first_done)
    assert second_done.status == 0, describe(second_done)
    first_report = common.last_json(first_done.out)
    second_report = common.last_json(second_done.out)

    # Each ended in PyTorch's own error; the second sees the total as its
    # device, and got what the first left of it.
    assert first_report["oom_message"].startswith("CUDA out of memory."), first_report
    assert second_report["oom_message"].startswith("CUDA out of memory."), second_report
    assert second_report["total"] == TOTAL
    # Its free memory at the start is what the total had left (less its own
    # context's 256 MiB), not the whole total.
    least = TOTAL - FIRST_CAP - 256 * MiB - GRANULARITY
    assert least <= second_report["free_start"], second_report
    assert second_report["free_start"] <= TOTAL - device[first_pid], (second_report, device)
    assert FIRST_CAP - GRANULARITY <= device[first_pid] <= FIRST_CAP, device
    assert device[first_pid] + device[second_pid] <= TOTAL, device
    assert device[second_pid] >= TOTAL - device[first_pid] - GRANULARITY, device


def test_a_killed_jobs_share_of_the_total_goes_to_the_next(suite, machine, totals_server,
                                                            tmp_path):
    first, first_held, _ = start_filler(suite, machine, totals_server, tmp_path, "first", [])
    first_pid = wait_for(first_held, first)
    assert nvml_process_bytes(suite, machine)[first_pid] >= TOTAL - GRANULARITY
    os.kill(first_pid, signal.SIGKILL)
    first.wait(60)
    # Its lease comes back once gpulimitd has seen it exit: then no total
    # binds a running tenant.
    deadline = time.monotonic() + 60
    while status_json(suite, machine, totals_server).get("memory_totals"):
        assert time.monotonic() < deadline, "gpulimitd still counts the killed job"
        time.sleep(0.05)

    second, second_held, second_release = start_filler(suite, machine, totals_server, tmp_path,
                                                       "second", [])
    try:
        second_pid = wait_for(second_held, second)
        device = nvml_process_bytes(suite, machine)
    finally:
        open(second_release, "w").close()
    done = second.wait(120)
    assert done.status == 0, describe(done)
    assert first_pid not in device, device
    assert TOTAL - GRANULARITY <= device[second_pid] <= TOTAL, device
