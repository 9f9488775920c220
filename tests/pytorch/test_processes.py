"""The processes a PyTorch job starts are one tenant: a torch.multiprocessing
(spawn) child shares the job's cap and its memory comes back when it is
SIGKILLed; DataLoader workers (spawn) feed pinned batches under the tenant.

Not here yet: a CUDA tensor handed to a spawned child through a queue
(CUDA IPC). Under gpulimit the child's cudaIpcOpenMemHandle fails with
"out of memory" on the simulator; not yet explained."""

from conftest import GiB, describe, job, run_tenant

CAP = 2 * GiB


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
