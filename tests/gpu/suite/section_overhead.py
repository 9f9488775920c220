"""Section 1: transparency and overhead on a real GPU. The same PyTorch
training loop (tests/gpu/workloads/train.py, fixed steps, warm-up excluded)
bare, under `gpulimit` with no limits, with only `--mem`, and as a lone
tenant with `--weight`; the bare run is repeated last, so that the run's
own noise is on record beside the slowdowns. Then a launch-bound loop
(launch_bound.py) bare and under gpulimit.

The gpulimit runs find no server and start the user's own gpulimitd on
demand, as a user's first job would; its runtime directory is private to
this run (XDG_RUNTIME_DIR), and the server is stopped at the end.
"""

import argparse
import os
import signal
import sys

from common import (Deadline, Machine, Suite, emit, figure, gpulimit_command, keep_output,
                    last_json, overall_status, performance_status, run, section_result)

GOAL = 0.01  # slowdown below 1 %


def stop_on_demand_server(runtime_dir):
    """The gpulimitd gpulimit started: its lock file holds its pid."""
    lock = os.path.join(runtime_dir, "gpulimit", "gpulimitd.sock.lock")
    try:
        with open(lock) as f:
            pid = int(f.read().split()[0])
        os.kill(pid, signal.SIGTERM)
        return pid
    except (OSError, ValueError, IndexError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline-s", type=float, default=120)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--launches", type=int, default=100000)
    args = parser.parse_args()
    suite = Suite.from_environment()
    deadline = Deadline(args.deadline_s)
    machine = Machine(suite, "overhead")
    runtime_dir = machine.dir + "/runtime"
    os.makedirs(runtime_dir, mode=0o700, exist_ok=True)
    os.chmod(runtime_dir, 0o700)
    env = machine.tenant_environment(machine.dir + "/ledgers",
                                     extra={"XDG_RUNTIME_DIR": runtime_dir})
    train = [suite.python, suite.torch_script("train.py"), "--steps", str(args.steps)]
    variants = [
        ("bare", None),
        ("gpulimit, no limits", []),
        ("gpulimit --mem 64G", ["--mem", "64G"]),
        ("gpulimit --weight 2, alone", ["--weight", "2"]),
        ("bare, again", None),
    ]
    figures = []
    errors = []
    rates = {}
    details = {"runs": {}}
    try:
        for name, flags in variants:
            if not deadline.allows(25):
                errors.append("%s: not run, out of time" % name)
                continue
            argv = train if flags is None else gpulimit_command(suite, flags, train)
            done = run(argv, machine.environment() if flags is None else env,
                       min(deadline.left(), 180))
            keep_output(done, machine.dir, "train " + name)
            result = last_json(done.out)
            if done.status != 0 or result is None:
                errors.append("%s: %s" % (name, done.describe()))
                continue
            rates[name] = result["steps_per_s"]
            details["runs"][name] = {k: result[k] for k in ("steps", "seconds", "steps_per_s",
                                                            "final_loss", "device", "torch")}

        bare = [rates[n] for n in ("bare", "bare, again") if n in rates]
        if bare:
            baseline = sum(bare) / len(bare)
            details["bare_steps_per_s"] = baseline
            if len(bare) == 2:
                noise = abs(bare[0] - bare[1]) / baseline
                figures.append(figure("overhead.train.noise", "Training loop: two bare runs "
                                      "apart (the run's own noise)", "report", noise,
                                      "%.2f %% (%.2f and %.2f steps/s)" % (100 * noise, *bare),
                                      "info"))
            for name, _ in variants[1:4]:
                if name not in rates:
                    figures.append(figure("overhead.train." + name, "Training loop slowdown, "
                                          + name, "< 1 %", None, "not measured", "unavailable"))
                    continue
                slowdown = 1 - rates[name] / baseline
                figures.append(figure(
                    "overhead.train." + name, "Training loop slowdown, " + name, "< 1 %",
                    slowdown, "%.2f %% (%.2f steps/s against %.2f bare)" % (
                        100 * slowdown, rates[name], baseline),
                    performance_status(suite, slowdown < GOAL)))

        launch = [suite.python, suite.torch_script("launch_bound.py"), "--launches",
                  str(args.launches)]
        launch_rates = {}
        for name, argv, run_env in (("bare", launch, machine.environment()),
                                    ("gpulimit", gpulimit_command(suite, [], launch), env)):
            if not deadline.allows(15):
                errors.append("launch-bound %s: not run, out of time" % name)
                continue
            done = run(argv, run_env, min(deadline.left(), 120))
            keep_output(done, machine.dir, "launch_bound " + name)
            result = last_json(done.out)
            # The simulated GPU does no arithmetic: the sum is judged on a
            # real GPU only.
            wrong = result is not None and not (suite.simulated or result.get("result_correct"))
            if done.status != 0 or result is None or wrong:
                errors.append("launch-bound %s: %s" % (name, done.describe()))
                continue
            launch_rates[name] = result["launches_per_s"]
            details["launch_bound_" + name] = result
        if len(launch_rates) == 2:
            slowdown = 1 - launch_rates["gpulimit"] / launch_rates["bare"]
            figures.append(figure(
                "overhead.launch_bound", "Launch-bound loop (1-element adds) under gpulimit, "
                "no limits: slowdown", "report", slowdown,
                "%.2f %% (%.2f us per launch against %.2f bare)" % (
                    100 * slowdown, 1e6 / launch_rates["gpulimit"], 1e6 / launch_rates["bare"]),
                "info"))
    finally:
        details["on_demand_server_pid"] = stop_on_demand_server(runtime_dir)
    emit(section_result("overhead", "Transparency and overhead (PyTorch)",
                        overall_status(figures, errors), "; ".join(errors), figures, details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
