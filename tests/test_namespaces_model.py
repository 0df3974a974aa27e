"""courselib.model.namespaces: the inside of a new PID namespace, and the real kernel agreeing with it."""
from __future__ import annotations

import os
import shutil

import pytest

from courselib.live import unshare
from courselib.model.namespaces import unshare_pid


def test_the_first_process_is_pid_1_with_parent_0_and_the_rest_follow_in_order():
    view = unshare_pid(3)
    assert view.pids == (1, 2, 3) and view.first == 1 and view.first_ppid == 0
    assert view.listed == 3 and view.nspid_extra == 1 and view.same_kernel
    assert unshare_pid(1, mount_proc=False).listed is None          # /proc is still the host's
    assert unshare_pid(2, levels=2).nspid_extra == 2


def test_children_that_ended_used_up_their_pids():
    """Lab 1 question 1: serve.py runs short commands to their end, then forks workers. PIDs are handed out
    cyclically, so the workers come after the ended commands' numbers, and /proc lists only the living."""
    view = unshare_pid(3, exited=4)
    assert view.pids == (1, 6, 7) and view.listed == 3 and view.first_ppid == 0
    assert unshare_pid(1, exited=5).pids == (1,)
    with pytest.raises(ValueError):
        unshare_pid(2, exited=-1)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_a_namespace_holds_at_least_one_process(bad):
    with pytest.raises(ValueError):
        unshare_pid(bad)


def test_the_recorded_run_agrees_with_the_model():
    run = unshare.recorded_run()
    view = unshare_pid(1)
    assert (run["pid"], run["ppid"], len(run["visible_processes"])) == (view.first, view.first_ppid, view.listed)
    assert len(run["nspid_outside"]) - len(run["nspid_inside"]) == view.nspid_extra


@pytest.mark.real
@pytest.mark.parametrize("workers, setup_runs", [(0, 0), (2, 0), (3, 4)])
def test_the_real_kernel_agrees_with_the_model(workers, setup_runs):
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("creating a PID namespace needs unshare (util-linux) and root here")
    run = unshare.run_in_new_pid_namespace(workers=workers, setup_runs=setup_runs)
    view = unshare_pid(1 + workers, exited=setup_runs)
    assert run["pid"] == view.first and run["ppid"] == view.first_ppid
    assert tuple(sorted(p["pid"] for p in run["visible_processes"])) == view.pids
    assert tuple(run["workers"]) == view.pids[1:]
    assert run["setup_runs"] == list(range(2, 2 + setup_runs))
    with open("/proc/self/status") as f:
        mine = next(len(line.split()) - 1 for line in f if line.startswith("NSpid"))
    assert len(run["nspid_outside"]) - mine == view.nspid_extra
    assert (run["kernel"] == run["host_kernel"]) is view.same_kernel
