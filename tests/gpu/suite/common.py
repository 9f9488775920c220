"""What every section of the GPU suite shares: where the programs are, how a
process runs under gpulimit on this machine (the real driver, or the
simulated one), a private gpulimitd, and the one JSON line a section prints.

run.sh describes the run through GPUSUITE_* variables; a section reads them
with Suite.from_environment(). Standard library only: the GPU machine has
Python and PyTorch and nothing else can be installed there.
"""

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time

GiB = 1 << 30
MiB = 1 << 20


class Suite:
    """The run as run.sh set it up."""

    def __init__(self, env):
        self.mode = env["GPUSUITE_MODE"]  # "real" or "simulated"
        self.root = env["GPUSUITE_ROOT"]
        self.out = env["GPUSUITE_OUT"]
        self.work = env["GPUSUITE_WORK"]
        self.gpulimit = env["GPUSUITE_GPULIMIT"]
        self.gpulimitd = env["GPUSUITE_GPULIMITD"]
        self.library = env["GPUSUITE_LIBRARY"]
        self.allocator = env["GPUSUITE_ALLOCATOR"]
        self.spinner = env["GPUSUITE_SPINNER"]
        self.trace_cli = env["GPUSUITE_TRACE_CLI"]
        self.cupti_trace = env.get("GPUSUITE_CUPTI_TRACE", "")
        self.fakecuda_lib = env.get("GPUSUITE_FAKECUDA_LIB", "")
        self.python = env.get("GPUSUITE_PYTHON", sys.executable)
        self.workloads_dir = os.path.join(self.root, "tests", "gpu", "workloads")

    @staticmethod
    def from_environment():
        return Suite(os.environ)

    @property
    def simulated(self):
        return self.mode == "simulated"

    def scratch(self, *parts):
        """A fresh directory under the run's work directory."""
        path = os.path.join(self.work, *parts)
        os.makedirs(path, exist_ok=True)
        return path

    def torch_script(self, name):
        return os.path.join(self.workloads_dir, name)


class Machine:
    """The GPU a scenario runs on. Simulated: a state file and trace of the
    scenario's own, so that scenarios never share device memory or a device
    timeline. Real: the machine's GPU, as it is."""

    def __init__(self, suite, name, memory="8G", context_memory="0", kernel_ns=None):
        self.suite = suite
        self.dir = suite.scratch(name)
        self.memory = memory
        self.context_memory = context_memory
        # Simulated: the base duration of a kernel (FAKECUDA_KERNEL_NS); None
        # keeps the simulator's default (tests/fakecuda/README.md).
        self.kernel_ns = kernel_ns
        self.trace_path = os.path.join(self.dir, "kernels.trace")

    def environment(self, extra=None):
        env = dict(os.environ)
        # The suite's own variables and any preload of the caller's shell are
        # not the workload's business.
        for key in list(env):
            if key.startswith("GPUSUITE_") or key.startswith("GPULIMIT_") or key == "LD_PRELOAD":
                del env[key]
        if self.suite.simulated:
            env["LD_LIBRARY_PATH"] = self.suite.fakecuda_lib
            env["FAKECUDA_STATE"] = os.path.join(self.dir, "state")
            env["FAKECUDA_TRACE"] = self.trace_path
            env["FAKECUDA_DEVICES"] = "1"
            env["FAKECUDA_MEM"] = self.memory
            env["FAKECUDA_CTX_MEM"] = self.context_memory
            if self.kernel_ns is not None:
                env["FAKECUDA_KERNEL_NS"] = str(self.kernel_ns)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(extra or {})
        return env

    def tenant_environment(self, ledgers, socket_path=None, extra=None):
        """What `gpulimit` needs to start a tenant here: the library of this
        build, private ledgers, and the suite's own server when given."""
        env = self.environment(extra)
        os.makedirs(ledgers, exist_ok=True)
        env["GPULIMIT_LIBRARY"] = self.suite.library
        env["GPULIMIT_LEDGER_DIR"] = ledgers
        if socket_path:
            env["GPULIMIT_SOCKET"] = socket_path
        return env


def gpulimit_command(suite, flags, command):
    return [suite.gpulimit] + list(flags) + ["--"] + list(command)


def traced_command(suite, trace_path, command):
    """`command` under the CUPTI tracer when one was built (real GPU only):
    the tracer outside, so that gpulimit puts libgpulimit.so first in the
    preload list it passes on; --append, since every tenant of a scenario
    writes to the one file (without it each start would empty it)."""
    if suite.simulated or not suite.cupti_trace:
        return list(command)
    return [suite.cupti_trace, "-o", trace_path, "--append", "--"] + list(command)


class Finished:
    """A process that ran to its end (or was stopped at its deadline)."""

    def __init__(self, argv, status, out, err, seconds, timed_out):
        self.argv = argv
        self.status = status
        self.out = out
        self.err = err
        self.seconds = seconds
        self.timed_out = timed_out

    def describe(self, limit=600):
        text = "exit %s%s: %s" % (self.status, " (timed out)" if self.timed_out else "",
                                  shlex.join(self.argv))
        if self.err.strip():
            text += " | stderr: " + self.err.strip()[-limit:]
        return text


class Running:
    """A process started in a process group of its own, so that a deadline
    can stop it and everything it started."""

    def __init__(self, argv, env, cwd=None):
        self.argv = list(argv)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)

    @property
    def pid(self):
        return self.proc.pid

    def wait(self, timeout):
        timed_out = False
        try:
            out, err = self.proc.communicate(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            self.stop()
            out, err = self.proc.communicate()
        return Finished(self.argv, self.proc.returncode, out, err,
                        time.monotonic() - self.started, timed_out)

    def stop(self):
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def run(argv, env, timeout):
    return Running(argv, env).wait(timeout)


def keep_output(finished, directory, name):
    """A process's stdout and stderr, kept under the run's work directory
    (the JSON line alone says little about a run that went wrong)."""
    os.makedirs(directory, exist_ok=True)
    for suffix, text in (("out", finished.out), ("err", finished.err)):
        with open(os.path.join(directory, "%s.%s" % (name.replace(" ", "_"), suffix)), "w") as f:
            f.write(text)


def key_values(line):
    """A workload's report line, `key=value key=value`, as a dict."""
    values = {}
    for field in line.split():
        key, sep, value = field.partition("=")
        if sep:
            values[key] = value
    return values


def last_report(text, prefix="workload="):
    """The last line of `text` that is a workload's report."""
    for line in reversed(text.splitlines()):
        if line.startswith(prefix):
            return key_values(line)
    return None


def last_json(text):
    """The last line of `text` that parses as a JSON object."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


class Server:
    """A gpulimitd of the suite's own, on a private socket, in the
    foreground so that the suite owns the process and stops it."""

    def __init__(self, suite, machine, name="server", quantum_ms=20, args=()):
        self.dir = suite.scratch(machine.dir, name)
        self.socket = os.path.join(self.dir, "gpulimitd.sock")
        self.log = os.path.join(self.dir, "gpulimitd.log")
        self.log_file = open(self.log, "w")
        argv = [suite.gpulimitd, "--foreground", "--socket", self.socket, "--quantum-ms",
                str(quantum_ms), "--idle-exit-s", "600"] + list(args)
        self.proc = subprocess.Popen(argv, env=machine.environment(), stdout=self.log_file,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.error = self._wait_listening(20.0)

    def _wait_listening(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "gpulimitd exited with %s (log: %s)" % (self.proc.returncode, self.log)
            # gpulimitd's socket carries packets (protocol/).
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                probe.connect(self.socket)
                return None
            except OSError:
                time.sleep(0.02)
            finally:
                probe.close()
        return "gpulimitd did not listen within %.0f s (log: %s)" % (seconds, self.log)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Deadline:
    """A section's own time budget, so that it reports what it did instead
    of being killed by run.sh's timeout."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()

    def allows(self, seconds):
        return self.left() >= seconds


def figure(ident, name, goal, value, display, status, unit=""):
    """One measured figure with its goal. `status`: pass, fail, info (a
    figure without a goal), unavailable (could not be measured)."""
    return {"id": ident, "figure": name, "goal": goal, "value": value, "unit": unit,
            "display": display, "status": status}


def section_result(section, title, status, message="", figures=(), details=None):
    return {"section": section, "title": title, "status": status, "message": message,
            "figures": list(figures), "details": details or {}}


def performance_status(suite, met):
    """The status of a figure whose goal is a real GPU's speed (overhead,
    latency): judged on a real GPU; on the simulated one, whose driver calls
    cost a fraction of a real driver's and whose host is the bottleneck,
    measured and reported, not judged."""
    if suite.simulated:
        return "info"
    return "pass" if met else "fail"


def overall_status(figures, errors=()):
    """fail when a figure missed its goal or something broke; pass when at
    least one figure passed and nothing failed."""
    if errors or any(f["status"] == "fail" for f in figures):
        return "fail"
    if any(f["status"] == "pass" for f in figures):
        return "pass"
    return "info"


def emit(result):
    """The section's one JSON line on stdout: what run.sh collects."""
    sys.stdout.write(json.dumps(result, sort_keys=False) + "\n")
    sys.stdout.flush()


def percent(value):
    return "%.2f %%" % (100.0 * value)


def share_targets(tenants):
    """The share of a fully wanted device each tenant is to get: weights
    divide the time, no tenant above its cap, and what a capped tenant
    leaves goes to the others by their weights (gpulimitd's scheduling
    rules, without priorities). `tenants`: name -> (weight, cap fraction or None)."""
    targets = {}
    remaining = 1.0
    active = dict(tenants)
    while active:
        total = sum(weight for weight, _ in active.values())
        over = {name: cap for name, (weight, cap) in active.items()
                if cap is not None and remaining * weight / total > cap}
        if not over:
            for name, (weight, _) in active.items():
                targets[name] = remaining * weight / total
            break
        for name, cap in over.items():
            targets[name] = cap
            remaining -= cap
            del active[name]
    return targets
