"""Fixtures of the PyTorch tests: a CUDA build of PyTorch from PyPI, run
under this build's gpulimit on the simulated GPU (tests/fakecuda).

ctest runs each test file with the project venv's Python and
GPULIMIT_BUILD_DIR set (tests/pytorch/CMakeLists.txt). The machine, the
private gpulimitd and the way a tenant is started are the real-GPU suite's
own (tests/gpu/suite/common.py), so that what passes here is what that
suite runs on a GPU.
"""

import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu", "suite"))

import common  # noqa: E402  (the suite's module, found through the path above)

GiB = common.GiB
MiB = common.MiB


def build_dir():
    path = os.environ.get("GPULIMIT_BUILD_DIR")
    if not path:
        pytest.fail("GPULIMIT_BUILD_DIR is not set: run these tests through ctest -L pytorch")
    return path


@pytest.fixture
def suite(tmp_path):
    build = build_dir()
    env = {
        "GPUSUITE_MODE": "simulated",
        "GPUSUITE_ROOT": ROOT,
        "GPUSUITE_OUT": str(tmp_path),
        "GPUSUITE_WORK": str(tmp_path / "work"),
        "GPUSUITE_GPULIMIT": os.path.join(build, "tools", "cli", "gpulimit"),
        "GPUSUITE_GPULIMITD": os.path.join(build, "limiter-server", "gpulimitd"),
        "GPUSUITE_LIBRARY": os.path.join(build, "libintercept", "libgpulimit.so"),
        "GPUSUITE_ALLOCATOR": os.path.join(build, "tests", "workloads", "allocator"),
        "GPUSUITE_SPINNER": os.path.join(build, "tests", "workloads", "spinner"),
        "GPUSUITE_TRACE_CLI": os.path.join(build, "tools", "trace", "gpulimit-trace"),
        "GPUSUITE_FAKECUDA_LIB": os.path.join(build, "fakecuda", "lib"),
        "GPUSUITE_PYTHON": sys.executable,
    }
    return common.Suite(env)


@pytest.fixture
def machine(suite):
    """One simulated 16 GiB GPU of the test's own; contexts take 256 MiB."""
    return common.Machine(suite, "machine", memory="16G", context_memory="256M")


@pytest.fixture
def server(suite, machine):
    with common.Server(suite, machine) as running:
        if running.error:
            pytest.fail(running.error)
        yield running


def job(name):
    return os.path.join(HERE, "jobs", name)


def run_tenant(suite, machine, server, flags, argv, extra=None, timeout=180, name="tenant"):
    """`gpulimit FLAGS -- ARGV` on the machine, served by `server`; returns
    the finished process and its last JSON line."""
    env = machine.tenant_environment(os.path.join(machine.dir, "ledgers-" + name), server.socket,
                                     extra)
    done = common.run(common.gpulimit_command(suite, flags, argv), env, timeout)
    return done, common.last_json(done.out)


def run_bare(machine, argv, extra=None, timeout=180):
    """ARGV on the simulated GPU without gpulimit: what the job does alone."""
    done = common.run(argv, machine.environment(extra), timeout)
    return done, common.last_json(done.out)


def nvml_process_bytes(suite, machine):
    """What the simulated NVML says each process holds on device 0, asked
    without gpulimit's preload (the GPU suite's nvml_query.py): the
    device's own account."""
    done = subprocess.run([sys.executable, os.path.join(suite.workloads_dir, "nvml_query.py")],
                          env=machine.environment(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert "error" not in view, view["error"]
    return {int(pid): used for pid, used in view["processes"].items()}


def kernels_of(trace_path, pid):
    """The names of the kernels the simulator ran for `pid`, from its trace."""
    names = []
    with open(trace_path) as trace:
        for line in trace:
            fields = line.split()
            if len(fields) == 6 and not line.startswith("#") and int(fields[0]) == pid:
                names.append(fields[5])
    return names


def wait_for(path, proc, seconds=120):
    """Waits until the job `proc` has written its pid to `path` (it holds
    its memory then); the pid."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert proc.proc.poll() is None, "the job ended before holding its memory: " + \
            describe(proc.wait(1))
        assert time.monotonic() < deadline, "the job did not fill its memory in time"
        time.sleep(0.05)
    with open(path) as f:
        return int(f.read())


def status_json(suite, machine, server):
    """`gpulimit status --json` of `server`."""
    env = machine.environment({"GPULIMIT_SOCKET": server.socket})
    done = subprocess.run([suite.gpulimit, "status", "--json"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def describe(done):
    return done.describe(limit=3000)
