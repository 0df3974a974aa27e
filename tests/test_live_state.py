"""courselib.live.state: the private state directory, owner-checked records, process stamps and
owned work directories."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from courselib.errors import CourseError
from courselib.live import state


@pytest.fixture
def private(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv(state.STATE_DIR_ENV, str(d))
    return d


def test_private_dir_is_created_0700_and_reused(private):
    assert state.private_dir() == private
    assert private.stat().st_mode & 0o777 == 0o700
    assert state.private_dir() == private


def test_default_private_dir_is_per_user(monkeypatch, tmp_path):
    monkeypatch.delenv(state.STATE_DIR_ENV, raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert state.private_dir() == tmp_path / f"courselib-{os.geteuid()}"


def test_private_dir_open_to_others_is_refused(private):
    private.mkdir(mode=0o700)
    os.chmod(private, 0o755)
    with pytest.raises(CourseError, match=r"mode 0755.*chmod 700"):
        state.private_dir()


def test_private_dir_symlink_is_refused(private, tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    private.symlink_to(real)
    with pytest.raises(CourseError, match="symbolic link"):
        state.private_dir()


def test_private_dir_that_is_a_file_is_refused(private):
    private.write_text("x")
    with pytest.raises(CourseError, match="not a directory"):
        state.private_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory someone else owns needs root")
def test_private_dir_of_another_user_is_refused(private):
    private.mkdir(mode=0o700)
    os.chown(private, 65534, 65534)
    with pytest.raises(CourseError, match="belongs to uid 65534"):
        state.private_dir()


def test_state_file_round_trip_is_0600(private):
    rec = state.StateFile("demo")
    assert rec.load() is None
    rec.save({"a": 1})
    assert rec.load() == {"a": 1}
    assert rec.path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in private.iterdir()] == ["demo.json"]  # no temporary left behind
    rec.remove()
    assert rec.load() is None


@pytest.mark.parametrize("text,why", [("{", "not JSON"), ("[1]", "not a JSON object"),
                                      ("\xff", "not JSON")])
def test_malformed_state_file_is_one_line(private, text, why):
    rec = state.StateFile("demo")
    state.private_dir()
    rec.path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CourseError) as err:
        rec.load()
    assert why in str(err.value) and "\n" not in str(err.value) and str(rec.path) in str(err.value)


def test_parse_errors_become_one_line(private):
    rec = state.StateFile("demo")
    rec.save({"procs": [{"pid": "abc", "start_ticks": 1, "boot_id": ""}]})
    with pytest.raises(CourseError, match=r"demo.json: .*pid 'abc' is not a process ID"):
        rec.load(lambda d: [state.ProcessStamp.from_json(p) for p in d["procs"]])
    with pytest.raises(CourseError, match="missing 'nope'"):
        rec.load(lambda d: d["nope"])


def test_state_file_that_is_a_symlink_or_fifo_is_refused(private, tmp_path):
    rec = state.StateFile("demo")
    target = tmp_path / "t.json"
    target.write_text("{}")
    state.private_dir()
    rec.path.symlink_to(target)
    with pytest.raises(CourseError):
        rec.load()
    rec.path.unlink()
    os.mkfifo(rec.path)
    with pytest.raises(CourseError, match="not a regular file"):
        rec.load()  # and does not block


def test_huge_state_file_is_refused(private):
    rec = state.StateFile("demo")
    state.private_dir()
    rec.path.write_bytes(b" " * (state.MAX_STATE_BYTES + 10))
    with pytest.raises(CourseError, match="larger than"):
        rec.load()


def test_process_stamp_tells_a_reused_pid_apart():
    me = state.ProcessStamp.of(os.getpid())
    assert me.matches()
    assert not state.ProcessStamp(me.pid, me.start_ticks + 1, me.boot_id).matches()
    assert not state.ProcessStamp(me.pid, me.start_ticks, "another-boot").matches()
    assert state.ProcessStamp.from_json(me.to_json()) == me
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stamp = state.ProcessStamp.of(child.pid)
    child.wait()
    assert stamp is None or not stamp.matches()


@pytest.mark.parametrize("bad", [{"pid": "abc", "start_ticks": 1, "boot_id": ""},
                                 {"pid": 1, "start_ticks": 1, "boot_id": ""},
                                 {"pid": True, "start_ticks": 1, "boot_id": ""},
                                 {"pid": 10 ** 30, "start_ticks": 1, "boot_id": ""},
                                 {"pid": 100, "start_ticks": -1, "boot_id": ""},
                                 {"pid": 100, "start_ticks": 1, "boot_id": 3}])
def test_process_stamp_from_json_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        state.ProcessStamp.from_json(bad)


def test_owned_dir_is_removed_only_with_its_token(tmp_path):
    token = state.new_token()
    d = state.make_owned_dir("t-", token, parent=tmp_path)
    (d / "inside").write_text("x")
    assert not state.remove_owned_dir(d, state.new_token())
    assert d.exists()
    link = tmp_path / "link"
    link.symlink_to(d)
    assert not state.remove_owned_dir(link, token)  # a link to our directory is not our directory
    assert d.exists()
    assert state.remove_owned_dir(d, token)
    assert not d.exists()


def test_a_directory_we_did_not_make_is_never_removed(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    assert not state.remove_owned_dir(victim, "")
    assert not state.remove_owned_dir(victim, "anything")
    assert (victim / "precious").exists()
