"""The suite's report: OUTDIR/report.json and OUTDIR/summary.md from the one
JSON line each section left in OUTDIR/sections/NAME.json, with the machine
(GPU model, driver and CUDA version from nvidia-smi, or the simulator) and
the date.

    write_report.py OUTDIR                      the report
    write_report.py --placeholder NAME STATUS MESSAGE
                                                a section's line for a section
                                                that did not run or left none
"""

import datetime
import json
import os
import re
import subprocess
import sys

# In the order of the suite's brief; run.sh runs them in another order.
SECTIONS = [
    ("overhead", "1. Transparency and overhead (PyTorch)"),
    ("memcap", "2. Memory cap under PyTorch"),
    ("shares", "3. Shares of GPU time"),
    ("priority", "4. Priority: inference beside training"),
    ("workloads", "5. Workloads through every access and launch path"),
]
TITLES = dict(SECTIONS)
STATUSES = ("pass", "fail", "partial", "info", "skipped", "timeout", "error")


def placeholder(name, status, message):
    return {"section": name, "title": TITLES.get(name, name), "status": status,
            "message": message, "figures": [], "details": {}}


def command_output(argv):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return done.stdout if done.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def real_machine():
    """The GPU as nvidia-smi describes it."""
    query = command_output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"])
    header = command_output(["nvidia-smi"])
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", header)
    gpus = [line.strip() for line in query.splitlines() if line.strip()]
    first = [f.strip() for f in gpus[0].split(",")] if gpus else []
    return {"source": "nvidia-smi", "gpu": first[0] if first else "unknown",
            "driver": first[1] if len(first) > 1 else "unknown",
            "cuda": cuda.group(1) if cuda else "unknown",
            "gpu_memory": first[2] if len(first) > 2 else "unknown",
            "gpus": gpus}


def simulated_machine(sections):
    """The simulator, as the workloads' `allocator --info` saw it."""
    info = next((s["details"].get("device") for s in sections
                 if s["section"] == "workloads" and s["details"].get("device")), None) or {}
    version = str(info.get("driver_version", ""))
    # cuDriverGetVersion's 1000 * major + 10 * minor
    cuda = "%d.%d" % (int(version) // 1000, int(version) % 1000 // 10) if version.isdigit() \
        else "unknown"
    return {"source": "simulator (tests/fakecuda)", "gpu": info.get("device_name", "unknown"),
            "driver": "simulated", "cuda": cuda, "gpu_memory": info.get("device_total"),
            "gpus": []}


def load_sections(out):
    sections = []
    for name, title in SECTIONS:
        path = os.path.join(out, "sections", name + ".json")
        try:
            with open(path) as f:
                lines = [line for line in f.read().splitlines() if line.strip()]
            section = json.loads(lines[-1])
            if section.get("section") != name or section.get("status") not in STATUSES:
                raise ValueError("not a section line of %s" % name)
        except (OSError, ValueError, IndexError) as error:
            section = placeholder(name, "error", "no result: %s" % error)
        section["title"] = title
        sections.append(section)
    return sections


def overall(sections):
    statuses = [s["status"] for s in sections]
    if any(s in ("fail", "error", "timeout") for s in statuses):
        return "fail"
    if all(s == "skipped" for s in statuses):
        return "skipped"
    return "pass" if any(s in ("pass", "partial", "info") for s in statuses) else "skipped"


def markdown_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary(report):
    m = report["machine"]
    lines = [
        "# gpulimit GPU suite: %s" % ("real GPU" if report["mode"] == "real"
                                      else "simulated GPU"),
        "",
        "- date: %s" % report["date"],
        "- machine: %s, driver %s, CUDA %s (%s)" % (m["gpu"], m["driver"], m["cuda"], m["source"]),
        "- commit: %s" % report["build"].get("commit", "unknown"),
        "- build: %s" % report["build"].get("status", "unknown"),
        "- result: **%s** (%.0f s)" % (report["status"], report["duration_s"]),
        "",
        "| section | figure | goal | measured | result |",
        "| --- | --- | --- | --- | --- |",
    ]
    for section in report["sections"]:
        number = section["title"].split(".")[0]
        if not section["figures"]:
            message = section["message"]
            if not message.startswith(section["status"]):
                message = "%s: %s" % (section["status"], message)
            lines.append("| %s | %s | | | %s |" % (
                number, markdown_cell(section["title"]), markdown_cell(message)))
        for f in section["figures"]:
            lines.append("| %s | %s | %s | %s | %s |" % (
                number, markdown_cell(f["figure"]), markdown_cell(f["goal"]),
                markdown_cell(f["display"]), f["status"]))
    lines.append("")
    for section in report["sections"]:
        lines.append("## %s: %s" % (section["title"], section["status"]))
        if section["message"]:
            lines.append("")
            lines.append(section["message"])
        lines.append("")
    return "\n".join(lines)


def main(argv):
    if len(argv) == 4 and argv[0] == "--placeholder":
        print(json.dumps(placeholder(argv[1], argv[2], argv[3])))
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[0]
    sections = load_sections(out)
    mode = os.environ.get("GPUSUITE_MODE", "real")
    started = float(os.environ.get("GPUSUITE_STARTED", "0") or 0)
    now = datetime.datetime.now(datetime.timezone.utc)
    report = {
        "schema": 1,
        "suite": "gpulimit GPU suite (tests/gpu/run.sh)",
        "mode": mode,
        "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": simulated_machine(sections) if mode == "simulated" else real_machine(),
        "build": {"status": os.environ.get("GPUSUITE_BUILD_STATUS", "unknown"),
                  "dir": os.environ.get("GPUSUITE_BUILD", ""),
                  "commit": os.environ.get("GPUSUITE_COMMIT", "unknown"),
                  "cupti_tracer": os.environ.get("GPUSUITE_CUPTI_TRACE", "") or None},
        "duration_s": (now.timestamp() - started) if started else 0.0,
        "status": overall(sections),
        "sections": sections,
    }
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(summary(report))
    print("gpusuite: %s; %s" % (report["status"], ", ".join(
        "%s %s" % (s["section"], s["status"]) for s in sections)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
