"""Section 2: the memory cap as PyTorch sees it. fill_memory.py runs under
`gpulimit --mem 10G` with PyTorch's three allocators (the default caching
allocator, expandable segments, cudaMallocAsync): torch.cuda.mem_get_info()
must report 10 GiB, filling memory must end in PyTorch's out-of-memory
error with the process holding the cap to within 1 % (as NVML counts it:
context included), and the process must free it all and carry on.
nvidia-smi is sampled while each run lasts.
"""

import argparse
import subprocess
import sys
import threading
import time

from common import (GiB, Deadline, Machine, Server, Suite, emit, figure, gpulimit_command,
                    keep_output, last_json, overall_status, run, section_result)

CAP = 10 * GiB
VARIANTS = [
    ("default", ""),
    ("expandable_segments", "expandable_segments:True"),
    ("cudaMallocAsync", "backend:cudaMallocAsync"),
]


class SmiSampler:
    """nvidia-smi's view of the GPU's memory, twice a second, to a file."""

    def __init__(self, path):
        self.path = path
        self.peak_used_mib = 0
        self.samples = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        with open(self.path, "w") as out:
            while not self.stopping.is_set():
                try:
                    line = subprocess.run(
                        ["nvidia-smi", "--query-gpu=timestamp,memory.used,memory.total",
                         "--format=csv,noheader,nounits"], capture_output=True, text=True,
                        timeout=10).stdout.strip()
                except (OSError, subprocess.TimeoutExpired):
                    line = ""
                if line:
                    out.write(line + "\n")
                    out.flush()
                    self.samples += 1
                    try:
                        used = int(line.splitlines()[0].split(",")[1])
                        self.peak_used_mib = max(self.peak_used_mib, used)
                    except (IndexError, ValueError):
                        pass
                self.stopping.wait(0.5)

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=15)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline-s", type=float, default=60)
    args = parser.parse_args()
    suite = Suite.from_environment()
    deadline = Deadline(args.deadline_s)
    machine = Machine(suite, "memcap", memory="16G")
    figures = []
    errors = []
    details = {"cap_bytes": CAP, "runs": {}}
    with Server(suite, machine) as server:
        if server.error:
            errors.append(server.error)
        for name, conf in VARIANTS:
            if server.error:
                break
            if not deadline.allows(20):
                errors.append("%s: not run, out of time" % name)
                continue
            extra = {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}
            env = machine.tenant_environment(machine.dir + "/ledgers-" + name, server.socket,
                                             extra)
            sampler = SmiSampler("%s/nvidia-smi-%s.csv" % (suite.scratch("memcap"), name))
            started = time.monotonic()
            done = run(gpulimit_command(suite, ["--mem", "10G"],
                                        [suite.python, suite.torch_script("fill_memory.py")]),
                       env, min(deadline.left(), 120))
            sampler.stop()
            keep_output(done, machine.dir, name)
            result = last_json(done.out)
            if done.status != 0 or result is None:
                errors.append("%s: %s" % (name, done.describe()))
                continue
            result["nvidia_smi_samples"] = sampler.samples
            result["nvidia_smi_peak_used_bytes"] = sampler.peak_used_mib << 20
            result["nvidia_smi_samples_file"] = sampler.path
            result["run_seconds"] = time.monotonic() - started
            details["runs"][name] = result
            label = "--mem 10G, %s allocator" % name
            figures.append(figure(
                "memcap.%s.total" % name, label + ": torch.cuda.mem_get_info() total",
                "10 GiB (%d bytes)" % CAP, result["total"], "%d bytes" % result["total"],
                "pass" if result["total"] == CAP else "fail"))
            raised = result.get("raised") or ""
            figures.append(figure(
                "memcap.%s.oom" % name, label + ": filling memory raises", "torch.OutOfMemoryError",
                raised, raised or "nothing raised",
                "pass" if raised.endswith("OutOfMemoryError") else "fail"))
            held = result.get("nvml_process_bytes")
            if held is None:
                figures.append(figure("memcap.%s.held" % name, label + ": what the process "
                                      "holds at the error (NVML)", "within 1 % of 10 GiB", None,
                                      "unavailable: NVML: %s"
                                      % result.get("nvml_process_match"), "unavailable"))
            else:
                error = (held - CAP) / CAP
                figures.append(figure(
                    "memcap.%s.held" % name, label + ": what the process holds at the error "
                    "(NVML, context included)", "within 1 % of 10 GiB", held,
                    "%.3f GiB (%+.2f %%; PyTorch reserved %.3f GiB; found %s)" % (
                        held / GiB, 100 * error, result["reserved_bytes"] / GiB,
                        result.get("nvml_process_match")),
                    "pass" if abs(error) <= 0.01 else "fail"))
            # The simulated GPU does no arithmetic: a matmul's result is
            # judged on a real GPU only.
            carried_on = result.get("carried_on") and (suite.simulated or
                                                       result.get("matmul_finite"))
            figures.append(figure(
                "memcap.%s.continues" % name, label + ": frees everything and carries on",
                "half the cap allocated again, a matmul runs" +
                ("" if suite.simulated else " to a finite result"), carried_on,
                "yes" if carried_on else "no: %s" % (result.get("again_error") or
                                                    "the matmul's result is not finite"),
                "pass" if carried_on else "fail"))
    emit(section_result("memcap", "Memory cap under PyTorch", overall_status(figures, errors),
                        "; ".join(errors), figures, details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
