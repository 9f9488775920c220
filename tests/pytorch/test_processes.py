"""The processes a PyTorch job starts are one tenant: torch.multiprocessing
(spawn) children share the job's cap, CUDA tensors pass between them (CUDA
IPC), and a SIGKILLed child's memory comes back; DataLoader workers (spawn)
feed pinned batches under the tenant."""

from conftest import GiB, MiB, describe, job, run_tenant

CAP = 2 * GiB
STEP = 16 * MiB


def test_spawned_children_share_the_cap_and_a_cuda_tensor(suite, machine, server):
    done, report = run_tenant(suite, machine, server, ["--mem", "2G"],
                              [suite.python, job("share_cap.py"), "spawn", str(CAP)])

    assert done.status == 0, describe(done)
    # Each child wrote into the parent's tensor through its IPC mapping.
    assert report["written_by_children"] == [1, 2]
    held = report["parent_bytes"] + sum(c["held"] for c in report["children"])
    held += report["parent_more_bytes"]
    # Three contexts of 256 MiB count too: the tensors hold at most the rest
    # of the cap, and all of it but a few of the allocator's steps.
    assert held <= CAP - 3 * 256 * MiB
    assert held >= CAP - 3 * 256 * MiB - 8 * STEP
    # The first child to fill took what was left; the second got (almost) nothing.
    first, second = report["children"]
    assert first["held"] >= CAP // 4
    assert second["held"] <= 2 * STEP


def test_a_killed_childs_memory_comes_back(suite, machine, server):
    done, report = run_tenant(suite, machine, server, ["--mem", "2G"],
                              [suite.python, job("share_cap.py"), "kill", str(CAP)])

    assert done.status == 0, describe(done)
    assert report["total"] == CAP
    assert report["refused_while_held"] is True
    assert report["child_exit"] == -9
    assert report["got_half_after_kill"] is True


def test_dataloader_workers_run_under_the_tenant(suite, machine, server):
    done, report = run_tenant(suite, machine, server, ["--mem", "2G"],
                              [suite.python, job("share_cap.py"), "loader"])

    assert done.status == 0, describe(done)
    assert report["batches"] == 8
