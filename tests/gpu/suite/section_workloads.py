"""Section 5: the workloads of tests/workloads (allocator, spinner) through
every access path, stream mode, allocation path and launch path, with the
assertions tests/integration makes on the simulated driver
(allocator_test.cpp, memory_cap_test.cpp, spinner_test.cpp), here on
whichever driver the suite runs on. The workloads' own report lines are
what is checked; their exit status is their own pass/fail.

On a real GPU the device's size is read from the workload itself
(`allocator --info`) instead of being the simulator's 4 GiB, and a capped
tenant is charged its context too (the simulator's contexts take nothing
here), so the cap checks are written as "the cap minus what the tenant
holds before allocating", which is what they assert on the simulator.
"""

import argparse
import concurrent.futures
import sys

from common import (GiB, MiB, Deadline, Machine, Server, Suite, emit, figure,
                    gpulimit_command, last_report, run, section_result, traced_command)

ACCESS_PATHS = ["linked", "dlsym", "proc", "proc-v2"]
STREAM_MODES = ["legacy", "per-thread"]
ALLOCATION_PATHS = ["linear", "pitch", "managed", "async", "pool", "vmm", "array", "array3d",
                    "mipmap"]
DEVICE_MEMORY_PATHS = ["linear", "pitch", "async", "pool", "vmm", "array", "array3d", "mipmap"]
LAUNCH_PATHS = ["kernel", "kernel-ex", "cooperative", "graph-capture", "graph-explicit"]

MILLISECOND = 1_000_000


class Checks:
    """The failed expectations of one case, each one line."""

    def __init__(self):
        self.failures = []

    def expect(self, condition, what):
        if not condition:
            self.failures.append(what)
        return condition

    def equal(self, report, key, expected):
        actual = report.get(key)
        return self.expect(str(actual) == str(expected),
                           "%s=%s, expected %s" % (key, actual, expected))


def number(report, key):
    try:
        return int(report.get(key, ""))
    except ValueError:
        return -1


def numbers(report, key):
    try:
        return [int(v) for v in report.get(key, "").split(",") if v != ""]
    except ValueError:
        return []


class Case:
    def __init__(self, name, group, argv, env, check, timeout=60):
        self.name = name
        self.group = group
        self.argv = argv
        self.env = env
        self.check = check
        self.timeout = timeout

    def execute(self):
        finished = run(self.argv, self.env, self.timeout)
        checks = Checks()
        report = last_report(finished.out)
        if checks.expect(finished.status == 0 and report is not None, finished.describe()):
            self.check(report, checks)
        result = {"case": self.name, "group": self.group,
                  "status": "pass" if not checks.failures else "fail"}
        if checks.failures:
            result["failures"] = checks.failures
            result["output"] = finished.out.strip()[-1500:]
        return result


def traced_spin_kernels(machine):
    """Spin kernels the simulator ran, and how many lasted other than asked."""
    try:
        with open(machine.trace_path) as trace:
            names = [line.split() for line in trace if line.strip() and not line.startswith("#")]
    except OSError:
        return []
    return [(int(f[4]) - int(f[3])) for f in names if len(f) == 6 and f[5].startswith("spin")]


class WorkloadSection:
    def __init__(self, suite, deadline):
        self.suite = suite
        self.deadline = deadline
        self.device_total = None
        self.info_error = None

    def machine(self, name):
        # Every case a machine (a simulator state) of its own, as in the
        # integration tests: cases may run side by side.
        return Machine(self.suite, "workloads/" + name, memory="4G")

    def describe_device(self):
        machine = self.machine("info")
        finished = run([self.suite.allocator, "--info"], machine.environment(), 60)
        report = last_report(finished.out)
        if finished.status != 0 or report is None:
            self.info_error = finished.describe()
            return None
        self.device_total = number(report, "total")
        return report

    # allocator_test.cpp: AllocatorPathTest.ReachesTargetAndGivesMemoryBack
    def allocator_path_cases(self):
        for path in ALLOCATION_PATHS:
            for access in ACCESS_PATHS:
                for mode in STREAM_MODES:
                    name = "allocator/%s/%s/%s" % (path, access, mode)
                    machine = self.machine(name.replace("/", "_"))
                    argv = [self.suite.allocator, "--path", path, "--access", access,
                            "--stream-mode", mode, "--target", "1G", "--chunk", "256M", "--retry"]
                    yield Case(name, "allocator paths", argv, machine.environment(),
                               self.allocator_path_check(path, access, mode))

    def allocator_path_check(self, path, access, mode):
        def check(report, c):
            c.equal(report, "workload", "allocator")
            c.equal(report, "path", path)
            c.equal(report, "access", access)
            c.equal(report, "stream_mode", mode)
            c.equal(report, "error", "none")
            c.equal(report, "error_code", 0)
            c.equal(report, "target", GiB)
            got = number(report, "bytes")
            if path != "mipmap":
                c.expect(got == GiB, "bytes=%d, expected %d" % (got, GiB))
                c.equal(report, "chunks", 4)
            else:
                c.expect(got >= GiB, "bytes=%d below the target" % got)
            c.equal(report, "total", self.device_total)
            before = number(report, "free_before")
            if path != "managed":  # backed on first touch on a real GPU
                c.expect(number(report, "free_after_alloc") + got <= before,
                         "free_after_alloc + bytes above free_before")
            c.equal(report, "free_after_free", before)
            if path == "pool":
                c.equal(report, "pool_reserved_after_trim", 0)
            c.equal(report, "retry_bytes", got)
            c.equal(report, "retry_error", "none")
            c.equal(report, "free_after_retry_free", before)
        return check

    # allocator_test.cpp: AllocatorOutOfMemoryTest (twice the device's memory)
    def out_of_memory_cases(self):
        target = str(2 * (self.device_total or 4 * GiB))
        for path in DEVICE_MEMORY_PATHS:
            machine = self.machine("oom_" + path)
            argv = [self.suite.allocator, "--path", path, "--target", target, "--chunk", "256M",
                    "--retry"]
            yield Case("allocator-oom/" + path, "allocator out of memory", argv,
                       machine.environment(), self.out_of_memory_check(path), timeout=120)

    def out_of_memory_check(self, path):
        def check(report, c):
            c.equal(report, "error", "CUDA_ERROR_OUT_OF_MEMORY")
            c.equal(report, "error_code", 2)
            before = number(report, "free_before")
            got = number(report, "bytes")
            c.expect(got <= before, "bytes=%d above free_before=%d" % (got, before))
            refused = 256 * MiB * 4 // 3 + 1 if path == "mipmap" else 256 * MiB
            c.expect(got + refused > before,
                     "stopped more than one chunk short of free memory: bytes=%d free_before=%d"
                     % (got, before))
            c.equal(report, "free_after_free", before)
            c.equal(report, "retry_bytes", got)
            c.equal(report, "retry_error", "none")
        return check

    # memory_cap_test.cpp: MemoryCapPath.StopsAtTheCapGivesBackAndAllocatesAgain
    def cap_cases(self):
        # The simulator's contexts take nothing, so 1G holds 16 chunks of 64M;
        # a real context takes hundreds of MiB of the cap.
        cap = GiB if self.suite.simulated else 2 * GiB
        cap_text = "%dG" % (cap // GiB)
        for path in ALLOCATION_PATHS:
            for access in ACCESS_PATHS:
                for mode in STREAM_MODES:
                    name = "cap/%s/%s/%s" % (path, access, mode)
                    machine = self.machine(name.replace("/", "_"))
                    env = machine.tenant_environment(machine.dir + "/ledgers")
                    argv = gpulimit_command(
                        self.suite, ["--mem", cap_text, "--no-server"],
                        [self.suite.allocator, "--path", path, "--target", "3G", "--chunk", "64M",
                         "--retry", "--access", access, "--stream-mode", mode])
                    yield Case(name, "memory cap paths", argv, env, self.cap_check(path, cap))

    def cap_check(self, path, cap):
        chunk = 64 * MiB

        def check(report, c):
            c.equal(report, "error", "CUDA_ERROR_OUT_OF_MEMORY")
            c.equal(report, "total", cap)
            before = number(report, "free_before")
            got = number(report, "bytes")
            left = number(report, "free_after_alloc")
            if self.suite.simulated:
                c.equal(report, "free_before", cap)
            else:
                c.expect(0 < before <= cap, "free_before=%d outside (0, cap]" % before)
            if path == "mipmap":
                c.expect(got <= before, "bytes=%d above free_before=%d" % (got, before))
                c.expect(left < 2 * chunk, "free_after_alloc=%d: the cap is not filled" % left)
            else:
                c.expect(got + left == before,
                         "bytes + free_after_alloc = %d, free_before %d" % (got + left, before))
                c.expect(0 <= left < chunk, "free_after_alloc=%d: the cap is not filled" % left)
            c.equal(report, "free_after_free", before)
            c.equal(report, "retry_bytes", got)
        return check

    # memory_cap_test.cpp: PercentOfTheDeviceAndTheHamiAlias
    def percent_cases(self):
        machine = self.machine("cap_percent")
        env = machine.tenant_environment(machine.dir + "/ledgers")
        argv = gpulimit_command(self.suite, ["--mem", "25%", "--no-server"],
                                [self.suite.allocator, "--info"])
        quarter = (self.device_total or 0) // 4

        def check(report, c):
            # gpulimit rounds a percentage of the device down to whole bytes.
            for key in ("total", "device_total"):
                c.expect(abs(number(report, key) - quarter) <= 1,
                         "%s=%s, expected a quarter of %s" % (key, report.get(key),
                                                              self.device_total))
        yield Case("cap/percent-of-device", "memory cap paths", argv, env, check)

    # spinner_test.cpp: SpinnerPathTest.RunsEveryKernelForItsDuration
    def spinner_cases(self):
        kernel_ns = 2 * MILLISECOND
        for launch in LAUNCH_PATHS:
            for access in ACCESS_PATHS:
                for mode in STREAM_MODES:
                    name = "spinner/%s/%s/%s" % (launch, access, mode)
                    machine = self.machine(name.replace("/", "_"))
                    argv = [self.suite.spinner, "--launch", launch, "--access", access,
                            "--stream-mode", mode, "--kernels", "16", "--batch", "4", "--streams",
                            "2", "--kernel-ns", str(kernel_ns)]
                    # On a real GPU the CUPTI tracer, when built, is the
                    # trace the simulator writes by itself.
                    argv = traced_command(self.suite, machine.trace_path, argv)
                    yield Case(name, "spinner paths", argv, machine.environment(),
                               self.spinner_check(machine, launch, access, mode, kernel_ns))

    # The same launches under gpulimit, a lone tenant of a gpulimitd: the
    # launch gate on every launch path (memory_cap_test.cpp compares counts
    # of a hooked spinner with a bare one the same way).
    def gated_spinner_cases(self, server_socket, machine):
        kernel_ns = 2 * MILLISECOND
        for launch in LAUNCH_PATHS:
            env = machine.tenant_environment(machine.dir + "/ledgers", server_socket)
            argv = gpulimit_command(
                self.suite, ["--weight", "1"],
                [self.suite.spinner, "--launch", launch, "--kernels", "16", "--batch", "4",
                 "--streams", "2", "--kernel-ns", str(kernel_ns)])
            yield Case("gated-spinner/" + launch, "spinner under gpulimit", argv, env,
                       self.spinner_check(None, launch, "linked", "legacy", kernel_ns))

    def spinner_check(self, machine, launch, access, mode, kernel_ns):
        graph = launch.startswith("graph")

        def check(report, c):
            c.equal(report, "workload", "spinner")
            c.equal(report, "launch", launch)
            c.equal(report, "access", access)
            c.equal(report, "stream_mode", mode)
            c.equal(report, "kernels", 16)
            c.equal(report, "launches", 4 if graph else 16)
            c.expect(numbers(report, "stream_kernels") == [8, 8],
                     "stream_kernels=%s, expected 8,8" % report.get("stream_kernels"))
            kernel_time = 16 * kernel_ns
            gpu_ns = number(report, "gpu_ns")
            c.expect(gpu_ns >= kernel_time - kernel_time // 100,
                     "gpu_ns=%d below the kernels' own time %d" % (gpu_ns, kernel_time))
            c.expect(gpu_ns <= 2 * (2 * kernel_time + 500 * MILLISECOND),
                     "gpu_ns=%d far above the kernels' time" % gpu_ns)
            per_stream = numbers(report, "stream_gpu_ns")
            c.expect(len(per_stream) == 2 and sum(per_stream) == gpu_ns,
                     "stream_gpu_ns=%s does not add up to gpu_ns" % report.get("stream_gpu_ns"))
            if self.suite.simulated and machine is not None:
                durations = traced_spin_kernels(machine)
                c.expect(len(durations) == 16, "the simulator ran %d spin kernels, expected 16"
                         % len(durations))
                c.expect(all(d == kernel_ns for d in durations),
                         "a traced spin kernel did not last %d ns" % kernel_ns)
            elif self.suite.cupti_trace and machine is not None:
                # A real spin kernel lasts at least its time; other contexts
                # on the GPU may stretch it.
                durations = traced_spin_kernels(machine)
                c.expect(len(durations) == 16, "CUPTI traced %d spin kernels, expected 16"
                         % len(durations))
                c.expect(all(d >= kernel_ns * 99 // 100 for d in durations),
                         "a traced spin kernel lasted less than %d ns" % kernel_ns)
            if not self.suite.simulated:
                # Real kernels count themselves in device memory.
                c.equal(report, "kernel_writes", 16)
        return check


def run_cases(cases, workers, deadline, results):
    """Runs `cases` (at most `workers` at once); a case whose turn comes when
    the deadline no longer allows it is reported as not run."""
    def attempt(case):
        if not deadline.allows(case.timeout / 4):
            return {"case": case.name, "group": case.group, "status": "not run",
                    "failures": ["out of time"]}
        return case.execute()

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        results.extend(pool.map(attempt, list(cases)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline-s", type=float, default=300)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    suite = Suite.from_environment()
    deadline = Deadline(args.deadline_s)
    title = "Workloads through every access and launch path"

    section = WorkloadSection(suite, deadline)
    info = section.describe_device()
    if info is None:
        emit(section_result("workloads", title, "error",
                            "allocator --info failed: " + str(section.info_error)))
        return 0

    results = []
    # Cases that look at the device's free memory run one at a time; capped
    # tenants and spinners may share the device.
    run_cases(section.spinner_cases(), args.workers, deadline, results)
    run_cases(section.cap_cases(), args.workers, deadline, results)
    run_cases(section.percent_cases(), 1, deadline, results)
    gate_machine = Machine(suite, "workloads/gated", memory="4G")
    with Server(suite, gate_machine) as server:
        if server.error:
            results.append({"case": "gated-spinner", "group": "spinner under gpulimit",
                            "status": "fail", "failures": [server.error]})
        else:
            run_cases(section.gated_spinner_cases(server.socket, gate_machine), 1, deadline,
                      results)
    run_cases(section.allocator_path_cases(), 1, deadline, results)
    run_cases(section.out_of_memory_cases(), 1, deadline, results)

    figures = []
    groups = []
    for case in results:
        if case["group"] not in groups:
            groups.append(case["group"])
    for group in groups:
        members = [r for r in results if r["group"] == group]
        passed = sum(1 for r in members if r["status"] == "pass")
        not_run = sum(1 for r in members if r["status"] == "not run")
        failed = len(members) - passed - not_run
        display = "%d of %d passed" % (passed, len(members))
        if not_run:
            display += ", %d not run (out of time)" % not_run
        status = "fail" if failed else ("unavailable" if not passed else "pass")
        figures.append(figure("workloads." + group.replace(" ", "_"), group,
                              "every case passes", passed, display, status, "cases"))
    failed_cases = [r for r in results if r["status"] != "pass"]
    status = "fail" if any(r["status"] == "fail" for r in results) else (
        "partial" if failed_cases else "pass")
    emit(section_result(
        "workloads", title, status,
        "%d cases, %d passed; device: %s, %s bytes" % (
            len(results), len(results) - len(failed_cases), info.get("device_name"),
            section.device_total),
        figures, {"device": info, "not_passed": failed_cases}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
