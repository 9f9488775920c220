"""A barrier between the workload processes of one share or priority run, so
that they start their measured phase together. Standard library only.
"""

import os
import time


def wait_for_parties(directory, name, parties, timeout_s):
    """Each party leaves a file in `directory`, then waits until `parties`
    files are there; exits the process after `timeout_s`."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "%s.%d" % (name, os.getpid())), "w"):
        pass
    deadline = time.monotonic() + timeout_s
    while len(os.listdir(directory)) < parties:
        if time.monotonic() > deadline:
            raise SystemExit("barrier: %d of %d parties after %.0f s" % (
                len(os.listdir(directory)), parties, timeout_s))
        time.sleep(0.005)
