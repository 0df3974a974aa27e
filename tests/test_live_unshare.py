"""A real PID namespace where permitted; the recorded run is always there and labelled."""
from __future__ import annotations

import os
import shutil

import pytest

from courselib.live import unshare


def test_recorded_run_is_labelled_and_complete():
    run = unshare.recorded_run()
    assert run["recorded"] is True
    assert run["pid"] == 1 and run["nspid_inside"] == [1]
    assert run["nspid_outside"][-1] == 1 and run["nspid_outside"][0] > 1
    assert run["recorded_on"]


@pytest.mark.real
def test_live_pid_namespace_makes_pid_1():
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    if os.geteuid() != 0:
        pytest.skip("creating a PID namespace needs root here")
    run = unshare.run_in_new_pid_namespace()
    assert run["recorded"] is False
    assert run["pid"] == 1
    assert [p["pid"] for p in run["visible_processes"]] == [1]  # --mount-proc: only itself
    assert run["hostname"] == "inside-demo" and run["hostname"] != os.uname().nodename
    assert run["nspid_outside"] == [run["host_pid"], 1]
    assert run["kernel"] == run["host_kernel"] == os.uname().release  # one kernel


def test_live_or_recorded_never_fails():
    from courselib.live import recorded
    run, why = recorded.live_or_recorded(unshare.source())
    assert run["recorded"] is (why is not None)
    assert run["pid"] == 1
