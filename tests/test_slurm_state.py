"""`courselib slurm down/status` trust only what this user's courselib recorded (issue 23): the
record lives in a private, owner-checked directory; a PID is signalled only if its start time
matches; the state directory is removed only if it holds our token; a malformed record is one
line. No real Slurm is needed: these run everywhere."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from courselib.cli.main import main
from courselib.live import slurm, state


@pytest.fixture
def private(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "private"
    monkeypatch.setenv(state.STATE_DIR_ENV, str(d))
    monkeypatch.delenv(slurm.STATE_ENV, raising=False)
    return d


@pytest.fixture
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    p.kill()
    p.wait()


def _record(private: Path, data: dict) -> Path:
    state.private_dir()
    path = private / "slurm.json"
    path.write_text(json.dumps(data))
    return path


def _cluster(state_dir: Path, procs: list[dict], token: str = "t" * 32) -> dict:
    return {"shape": {"nodes": 1, "gpus_per_node": 0}, "state_dir": str(state_dir), "token": token,
            "started_at": 0, "procs": procs}


def test_the_record_lives_in_the_private_directory(private):
    assert slurm.state_file() == private / "slurm.json"
    assert private.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("procs,why", [
    ([{"role": "munged", "pid": "abc", "argv": [], "start_ticks": 1, "boot_id": "x"}], "pid 'abc'"),
    ([{"role": "munged", "pid": 123, "argv": []}], "missing 'start_ticks'"),  # an old record: argv only
    ("lots", "procs is not a list"),
    ([7], "not an object"),
])
def test_a_malformed_record_is_one_line_and_stops_nothing(private, capsys, procs, why):
    path = _record(private, _cluster(Path("/"), procs))
    assert main(["slurm", "down"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and why in err and "nothing was stopped" in err
    assert "Traceback" not in err
    assert main(["slurm", "status"]) == 2


def test_a_pid_whose_start_time_differs_is_never_signalled(private, sleeper, tmp_path, capsys):
    me = state.ProcessStamp.of(sleeper.pid)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep")
    # The command line matches exactly (what the old check compared); the start time does not.
    cmd = Path(f"/proc/{sleeper.pid}/cmdline").read_bytes().split(b"\0")
    _record(private, _cluster(victim, [{"role": "munged", "pid": sleeper.pid,
                                        "argv": [a.decode() for a in cmd if a],
                                        "start_ticks": me.start_ticks + 1, "boot_id": me.boot_id}]))
    assert main(["slurm", "down"]) == 0
    out = capsys.readouterr()
    assert sleeper.poll() is None, "a process we did not start was killed"
    assert (victim / "precious").read_text() == "keep", "a directory we did not make was removed"
    assert "not the directory this cluster made" in out.err


def test_a_process_we_started_is_stopped_and_our_directory_removed(private, sleeper, capsys):
    token = state.new_token()
    work = state.make_owned_dir("courselib-slurm-test-", token)
    me = state.ProcessStamp.of(sleeper.pid)
    _record(private, _cluster(work, [{"role": "munged", "pid": sleeper.pid, "argv": [],
                                      "start_ticks": me.start_ticks, "boot_id": me.boot_id}], token))
    assert main(["slurm", "down"]) == 0
    assert f"stopped munged (PID {sleeper.pid})" in capsys.readouterr().out
    assert sleeper.wait(timeout=10) is not None
    assert not work.exists()
    assert not (private / "slurm.json").exists()


def test_a_record_in_a_directory_others_can_write_is_refused(tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    (shared / "state.json").write_text(json.dumps(_cluster(Path("/"), [])))
    monkeypatch.setenv(slurm.STATE_ENV, str(shared / "state.json"))
    assert main(["slurm", "down"]) == 2
    err = capsys.readouterr().err
    assert "mode 0777" in err and "nothing in it is trusted" in err


@pytest.mark.skipif(os.geteuid() != 0, reason="a file owned by someone else needs root to make")
def test_a_record_owned_by_someone_else_is_refused(private, capsys):
    path = _record(private, _cluster(Path("/"), []))
    os.chown(path, 65534, 65534)
    assert main(["slurm", "down"]) == 2
    assert "belongs to uid 65534" in capsys.readouterr().err


def test_up_spawn_records_start_times(tmp_path, private):
    """What `up` records for each daemon is a stamp that matches the live process."""
    token = state.new_token()
    work = state.make_owned_dir("courselib-slurm-test-", token)
    (work / "log").mkdir()
    cluster = slurm.Cluster(slurm.ClusterShape(nodes=1, gpus_per_node=0), work, token=token)
    proc = cluster.spawn("munged", [sys.executable, "-c", "import time; time.sleep(60)"], env=dict(os.environ))
    try:
        assert slurm.is_ours(proc)
        loaded = slurm.load_cluster()
        assert loaded.token == token and slurm.is_ours(loaded.procs[0])
    finally:
        out = slurm.down(cluster)
    assert out["left"] == [] and not slurm.is_ours(proc) and not work.exists()


# ----------------------------------------------------------------------------- the Slurm root

def test_the_root_launcher_wraps_every_command_and_round_trips(tmp_path):
    from courselib.live.daemons import Launcher
    from courselib.live.slurm.root import RootLauncher
    root = tmp_path / "root"
    (root / "usr" / "sbin").mkdir(parents=True)
    (root / "usr" / "sbin" / "slurmctld").write_text("#!/bin/sh\n")
    (root / "usr" / "sbin" / "slurmctld").chmod(0o755)
    launcher = RootLauncher(root, "/tmp/courselib-slurm-x")
    assert launcher.which("slurmctld") == "/usr/sbin/slurmctld" and launcher.which("sbatch") is None
    argv = launcher.command(["/usr/sbin/slurmctld", "-D"])
    assert argv[1:5] == ["--mount", "--propagation", "private", "--"]  # a private mount namespace
    assert argv[-4:] == [str(root), "/tmp/courselib-slurm-x", "/usr/sbin/slurmctld", "-D"]
    assert "exec chroot" in argv[7]
    back = Launcher.from_json(launcher.to_json())
    assert isinstance(back, RootLauncher) and (back.root, back.work) == (launcher.root, launcher.work)
    for bad in ({"kind": "chroot", "root": "relative"}, {"kind": "chroot", "root": "/r", "work": 3}):
        with pytest.raises(ValueError):
            Launcher.from_json(bad)


def test_the_course_says_how_to_build_its_slurm_when_it_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSELIB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv(slurm.STATE_ENV, str(tmp_path / "none.json"))
    assert main(["slurm", "up"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not built" in err and "make setup-slurm" in err
    assert not (tmp_path / "none.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
def test_undo_refuses_while_a_process_holds_a_mount_and_cleans_up_after(tmp_path):
    """The launcher's undo names the process that still holds the cluster's mount (nothing is
    removed then), and once it is gone removes the mount point it made."""
    from courselib.live.slurm.root import RootLauncher, host_mounts_under, mounts_under
    root, work = tmp_path / "root", tmp_path / "work"
    (root / "tmp").mkdir(parents=True)
    work.mkdir()
    launcher = RootLauncher(root)
    launcher.setup(work)
    point = root / str(work).lstrip("/")
    assert point.is_dir()
    holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                               f'mount --bind "{work}" "{point}" && echo ok && exec sleep 60'],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        assert [pid for pid, _ in mounts_under(point, exact=True)] == [holder.pid]
        assert host_mounts_under(root) == []          # never visible on the host
        left = launcher.undo()
        assert len(left) == 1 and f"PID {holder.pid}" in left[0] and point.is_dir()
    finally:
        holder.kill()
        holder.wait()
    assert launcher.undo() == [] and not point.exists() and (root / "tmp").is_dir()
