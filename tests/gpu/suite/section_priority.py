"""Section 4: priority. A latency-sensitive inference tenant
(`gpulimit --priority high`, small batches at a steady rate; infer.py)
alone, then beside a training tenant (train.py, normal priority): p50 and
p99 latency in both, and how much the p99 grows when shared.
"""

import argparse
import sys

from common import (Deadline, Machine, Running, Server, Suite, emit, figure, gpulimit_command,
                    keep_output, last_json, overall_status, performance_status, run,
                    section_result)

GOAL = 0.10  # p99 at most 10 % above alone


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline-s", type=float, default=60)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rate", type=float, default=100)
    args = parser.parse_args()
    suite = Suite.from_environment()
    deadline = Deadline(args.deadline_s)
    machine = Machine(suite, "priority")
    figures = []
    errors = []
    details = {"rate": args.rate, "seconds": args.seconds}
    infer = [suite.python, suite.torch_script("infer.py"), "--seconds", str(args.seconds),
             "--rate", str(args.rate)]
    with Server(suite, machine) as server:
        if server.error:
            errors.append(server.error)
        else:
            env = machine.tenant_environment(machine.dir + "/ledgers", server.socket)
            high = gpulimit_command(suite, ["--priority", "high"], infer)
            alone = run(high, env, min(deadline.left(), 90))
            keep_output(alone, machine.dir, "infer-alone")
            alone_result = last_json(alone.out)
            if alone.status != 0 or alone_result is None:
                errors.append("alone: " + alone.describe())
            details["alone"] = alone_result

            barrier = machine.dir + "/barrier"
            # The trainer outlasts the measurement: it starts with it (the
            # barrier) and runs a few seconds longer.
            trainer = Running(gpulimit_command(
                suite, ["--priority", "normal"],
                [suite.python, suite.torch_script("train.py"), "--name", "trainer", "--seconds",
                 str(args.seconds + 3), "--barrier", barrier, "--parties", "2"]), env)
            shared = run(high + ["--barrier", barrier, "--parties", "2"], env,
                         min(deadline.left(), 90))
            trained = trainer.wait(max(deadline.left(), 30))
            keep_output(shared, machine.dir, "infer-shared")
            keep_output(trained, machine.dir, "trainer")
            shared_result = last_json(shared.out)
            trained_result = last_json(trained.out)
            if shared.status != 0 or shared_result is None:
                errors.append("shared: " + shared.describe())
            if trained.status != 0 or trained_result is None:
                errors.append("trainer: " + trained.describe())
            details["shared"] = shared_result
            if trained_result:
                trained_result.pop("step_done_ns", None)
                details["trainer"] = trained_result
            if alone_result and shared_result:
                for key in ("p50_ms", "p99_ms"):
                    figures.append(figure(
                        "priority.%s" % key, "High-priority inference latency %s, alone and "
                        "beside a training tenant" % key[:3], "report",
                        shared_result[key], "%.3f ms alone, %.3f ms shared" % (
                            alone_result[key], shared_result[key]), "info", "ms"))
                inflation = shared_result["p99_ms"] / alone_result["p99_ms"] - 1
                figures.append(figure(
                    "priority.p99_inflation", "High-priority inference p99 inflation beside a "
                    "training tenant", "at most 10 %", inflation, "%+.1f %%" % (100 * inflation),
                    performance_status(suite, inflation <= GOAL)))
    emit(section_result("priority", "Priority: inference beside training",
                        overall_status(figures, errors), "; ".join(errors), figures, details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
