"""`courselib barrier real`: a real MPI collective with a missing participant (issue 31). MPI, not NCCL."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import lane_scope

from courselib.errors import InputError
from courselib.live import mpi


def _ours() -> list[int]:
    """PIDs of rank processes of this course still alive (there must be none after a run)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if b"courselib.live.mpi_rank" in (d / "cmdline").read_bytes() and \
                        not lane_scope.another_lanes(int(d.name)):            # make test's lanes
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("recovery", ["default", "shrink", "none"])
def test_the_recorded_runs_agree_with_the_model(recovery):
    run, data = mpi.recorded(recovery)
    assert data["label"] == mpi.LABEL and "not NCCL" in data["label"]
    rows = mpi.agreement(run)
    assert rows and all(r["agree"] for r in rows), rows


def test_agreement_can_fail():
    """An impossible run (a survivor completed its all-reduce; a shrink to the wrong size) differs."""
    run, _ = mpi.recorded("shrink")
    run.ranks_out[0] = dict(run.ranks_out[0], outcome="completed", shrunk_size=4)
    bad = [r["check"] for r in mpi.agreement(run) if not r["agree"]]
    assert "no survivor completes the collective with a rank missing" in bad
    assert "the survivors go on as N−1 ranks" in bad


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(InputError):
        mpi._check(1, 0, "shrink")
    with pytest.raises(InputError):
        mpi._check(4, 4, "shrink")
    out = subprocess.run([sys.executable, "-m", "courselib", "barrier", "real", "--kill", "7"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "--kill" in out.stderr


needs_mpi = pytest.mark.skipif(mpi.unavailable_reason() is not None, reason=str(mpi.unavailable_reason()))


@pytest.mark.real
@needs_mpi
@pytest.mark.parametrize("recovery", ["default", "shrink"])
def test_a_real_run_agrees_and_leaves_nothing(recovery):
    out = subprocess.run([sys.executable, "-m", "courselib", "barrier", "real", "--ranks", "4", "--kill", "1",
                          *(["--recovery", recovery] if recovery != "default" else []), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["label"] == mpi.LABEL and doc["note"] == "run here, now"
    assert all(r["agree"] for r in doc["agreement"]), doc["agreement"]
    if recovery == "shrink":
        assert {s["shrunk_size"] for s in doc["survivors"].values()} == {3}
    else:
        assert doc["exit_code"] not in (0, None) and doc["ended_after_s"] < 30
    assert _ours() == []


@pytest.mark.real
@needs_mpi
def test_a_run_stopped_at_its_timeout_leaves_nothing():
    run = mpi.run(4, 2, "shrink", timeout=0.3)   # stopped while starting or running
    assert run.timed_out or run.exit_code == 0
    assert _ours() == []
