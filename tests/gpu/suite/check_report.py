"""Checks a simulated run's report (the ctest `gpusuite_simulated`): both
files are there and well formed, every section has a known status, every
figure has its fields, the PyTorch sections say why they were skipped, the
workloads passed every case, and the shares were measured from the
simulator's trace. Share accuracy is left to the timeslice tests; here a
share only has to be in the right region (±10 points), so that a loaded
machine cannot fail this test while a broken scheduler still does.

    check_report.py OUTDIR
"""

import json
import os
import sys

SECTIONS = ["overhead", "memcap", "shares", "priority", "workloads"]
STATUSES = {"pass", "fail", "partial", "info", "skipped", "timeout", "error"}
FIGURE_STATUSES = {"pass", "fail", "info", "unavailable"}
FIGURE_KEYS = {"id", "figure", "goal", "value", "unit", "display", "status"}


def problems_of(out):
    problems = []

    def expect(condition, what):
        if not condition:
            problems.append(what)
        return condition

    try:
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
    except (OSError, ValueError) as error:
        return ["report.json: %s" % error]
    try:
        with open(os.path.join(out, "summary.md")) as f:
            summary = f.read()
    except OSError as error:
        return ["summary.md: %s" % error]

    expect(report.get("mode") == "simulated", "mode is %r" % report.get("mode"))
    expect(str(report.get("date", "")).endswith("Z"), "no UTC date")
    machine = report.get("machine", {})
    for key in ("gpu", "driver", "cuda", "source"):
        expect(machine.get(key) not in (None, "", "unknown"), "machine.%s missing" % key)
    sections = {s.get("section"): s for s in report.get("sections", [])}
    expect(list(sections) == SECTIONS, "sections %s, expected %s" % (list(sections), SECTIONS))
    for name, section in sections.items():
        expect(section.get("status") in STATUSES, "%s: status %r" % (name, section.get("status")))
        for f in section.get("figures", []):
            expect(set(f) == FIGURE_KEYS, "%s: figure keys %s" % (name, sorted(f)))
            expect(f.get("status") in FIGURE_STATUSES, "%s: figure status %r" % (
                name, f.get("status")))
            expect(f.get("figure", "") in summary, "%s: %r not in summary.md" % (
                name, f.get("figure")))

    for name in ("overhead", "memcap", "priority"):
        section = sections.get(name, {})
        expect(section.get("status") == "skipped" and
               section.get("message", "").startswith("skipped: no GPU / no torch"),
               "%s: %s, %r" % (name, section.get("status"), section.get("message")))

    workloads = sections.get("workloads", {})
    expect(workloads.get("status") == "pass", "workloads: %s: %s %s" % (
        workloads.get("status"), workloads.get("message"),
        json.dumps(workloads.get("details", {}).get("not_passed", []))[:2000]))
    expect(len(workloads.get("figures", [])) >= 5, "workloads: fewer than 5 groups of cases")

    shares = sections.get("shares", {})
    expect(shares.get("status") in ("pass", "fail"), "shares: %s: %s" % (
        shares.get("status"), shares.get("message")))
    measured = [f for f in shares.get("figures", []) if f["id"].endswith(".trace")]
    expect(len(measured) >= 9, "shares: %d tenants measured from the trace" % len(measured))
    for f in measured:
        if expect(isinstance(f.get("value"), (int, float)), "%s: no value" % f["id"]):
            target = next(t["target"] for s in shares["details"]["scenarios"]
                          for n, t in s["tenants"].items() if f["id"].endswith(".%s.trace" % n)
                          and f["id"].startswith("shares.%s." % s["scenario"]))
            expect(abs(f["value"] - target) <= 0.10, "%s: %.3f, target %.3f" % (
                f["id"], f["value"], target))
    for f in shares.get("figures", []):
        if f["id"].endswith(".overlaps"):
            expect(f.get("value") == 0, "%s: %s" % (f["id"], f.get("display")))
    return problems


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    problems = problems_of(argv[0])
    for problem in problems:
        print("check_report: " + problem)
    print("check_report: %s" % ("ok" if not problems else "%d problems" % len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
