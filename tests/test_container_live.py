"""Real containers (courselib.live.container): runc runs a command as PID 1 of a container from the
course's own base image; nothing — container, mount, storage root, cgroup — is left behind."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lane_scope

from courselib.errors import PrivilegeError
from courselib.live.container import runtime as container

MiB = 1024 * 1024
REASON = container.unavailable_reason()
real = pytest.mark.skipif(REASON is not None, reason=f"containers cannot run here: {REASON}")


def _ours_left() -> dict:
    """Everything courselib's container code could leave on this machine, named by its prefixes."""
    import tempfile
    tmp = Path(tempfile.gettempdir())
    cg = Path("/sys/fs/cgroup")
    dirs = [d for d in cg.iterdir() if d.is_dir()] if not (cg / "cgroup.controllers").exists() else [cg]
    # make test's lanes: this lane's (tests/lane_scope.py); the temporary directory is the lane's own
    return {
        "dirs": sorted(str(p) for p in tmp.glob("courselib-container-*")),
        "cgroups": sorted(str(p) for p in lane_scope.ours(p for d in dirs for p in d.glob("courselib-ctr-*"))),
        "mounts": lane_scope.our_mounts(ln for ln in Path("/proc/self/mountinfo").read_text().splitlines()
                                        if "courselib-container-" in ln),
    }


def _left_behind(before: dict) -> dict:
    """What is here now and was not ``before`` (another process on the machine may remove its own
    things meanwhile: that is not ours to count)."""
    now = _ours_left()
    return {k: [x for x in v if x not in before[k]] for k, v in now.items() if any(x not in before[k] for x in v)}


@pytest.fixture
def clean_machine():
    before = _ours_left()
    yield
    left = _left_behind(before)
    assert not left, f"left behind: {left}"


def test_busybox_static_check_reads_the_elf_program_headers():
    assert container.is_static_elf(sys.executable) is False        # a dynamically linked interpreter
    assert container.is_static_elf(__file__) is False               # not ELF at all


@pytest.mark.skipif(not container.is_static_elf("/bin/busybox"), reason="busybox-static is not installed")
def test_the_base_image_is_reproducible_and_labelled_as_a_stand_in(tmp_path):
    a = container.write_base_image(tmp_path / "a")
    b = container.write_base_image(tmp_path / "b")
    assert a.manifest_digest == b.manifest_digest and a.layer_digest == b.layer_digest
    index = json.loads((tmp_path / "a" / "index.json").read_text())
    manifest = json.loads((tmp_path / "a" / "blobs" / "sha256" / a.manifest_digest[7:]).read_text())
    config = json.loads((tmp_path / "a" / "blobs" / "sha256" / manifest["config"]["digest"][7:]).read_text())
    assert index["manifests"][0]["digest"] == a.manifest_digest
    labels = config["config"]["Labels"]
    assert "STAND-IN for nvidia/cuda" in labels["org.opencontainers.image.description"]
    assert labels["org.courselib.stand-in-for"].startswith("nvidia/cuda:")


@pytest.mark.parametrize("tmp, safe", [("/tmp", True), ("/tmp/lane-3f2a", True), ("/tmp/a.b_c--d", True),
                                       ("/tmp/Lane", False), ("/tmp/pytest-0/fa4_2qx_", False),
                                       ("/tmp/x.", False), ("/tmp/my dir", False)])
def test_a_workspace_goes_where_the_builder_can_pull_its_base(tmp, safe):
    """Debian 12's buildah names an image pulled from an OCI layout after the layout's path, and refuses
    one with a capital or a component ending in "_" ("invalid reference format"); found when a lane's
    TMPDIR ended in "_". A workspace falls back from such a TMPDIR to /tmp, and every path it makes is
    one the builder accepts."""
    assert container.builder_safe(Path(tmp)) is safe


def test_a_workspace_under_an_unusable_tmpdir_goes_to_tmp_and_is_removed(tmp_path, monkeypatch):
    bad = tmp_path / "Student_"
    bad.mkdir()
    monkeypatch.setenv("TMPDIR", str(bad))
    monkeypatch.setattr(container.tempfile, "tempdir", None)   # gettempdir() reads TMPDIR again
    try:
        ws = container.Workspace()
        try:
            assert ws.root.parent == Path("/tmp") and container.builder_safe(ws.base().layout)
        finally:
            ws.close()
        assert not ws.root.exists()
    finally:
        container.tempfile.tempdir = None
    monkeypatch.setattr(container, "builder_safe", lambda p: False)
    with pytest.raises(container.CourseError, match="TMPDIR") as err:
        container.Workspace()
    assert "\n" not in str(err.value)


def test_the_inside_report_is_parsed():
    d = container._parse_inside(["pid 1", "hostname h", "kernel 6.1", "ns pid pid:[4026532182]",
                                 "cgroup 0::/", "root bin", "link 1: lo: <LOOPBACK,UP> mtu 65536",
                                 "addr 1: lo    inet 127.0.0.1/8 scope host lo"])
    assert d == {"pid": 1, "hostname": "h", "kernel": "6.1", "namespaces": {"pid": 4026532182},
                 "cgroup": ["0::/"], "root": ["bin"], "interfaces": ["lo"], "addresses": ["lo inet 127.0.0.1/8"]}


def test_without_root_it_says_so_in_one_line_and_touches_nothing(tmp_path):
    if os.geteuid() != 0:
        with pytest.raises(PrivilegeError):
            container.run_container(["true"])
        return
    before = _ours_left()
    # as an unprivileged user, through the CLI: exit 2, one line, nothing created
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    env = {**os.environ, "HOME": str(tmp_path)}
    tmp_path.chmod(0o777)
    probe = subprocess.run(nobody + ["-c", "import courselib.cli.main"], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path, env=env)
    if probe.returncode != 0:
        pytest.skip("an unprivileged user cannot run this checkout's Python here: "
                    + (probe.stderr.strip().splitlines() or ["?"])[-1])
    res = subprocess.run(nobody + ["-m", "courselib", "live", "container", "--", "true"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "needs root" in res.stderr and "Traceback" not in res.stderr
    assert not _left_behind(before)


@pytest.mark.real
@real
def test_a_real_container_pid1_sees_its_own_world_and_the_host_sees_an_ordinary_process(clean_machine):
    run = container.run_container(["hostname"])
    assert run.exit_code == 0 and run.stdout.strip() == container.HOSTNAME
    assert run.inside["pid"] == 1 and run.outside["pid"] != 1
    assert run.outside["nspid"] == [run.outside["pid"], 1]
    assert run.inside["interfaces"] == ["lo"]
    assert run.inside["hostname"] == container.HOSTNAME != run.outside["hostname"]
    assert {"pid", "net", "mnt", "uts", "ipc", "cgroup"} <= set(run.outside["new_namespaces"])
    assert "user" not in run.outside["new_namespaces"]               # root in the container is root
    assert run.inside["namespaces"]["pid"] == run.outside["namespaces"]["pid"]   # same process, same ns
    assert run.inside["kernel"] == run.outside["kernel"] == os.uname().release  # no kernel in the image
    assert "bin" in run.inside["root"] and "home" not in run.inside["root"]
    assert any(ln.endswith(":/") for ln in run.inside["cgroup"])    # its own cgroup namespace: it sits at /
    assert any("courselib-ctr-" in ln for ln in run.outside["cgroup"])
    assert run.left_behind == {"directory": False, "mounts": [], "cgroups": []}
    assert run.runtimes_tried[-1]["ran"] and "runc" in run.runtime or "crun" in run.runtime


@pytest.mark.real
@real
def test_pid1_over_its_memory_limit_is_oom_killed_with_137(clean_machine):
    run = container.run_container(["dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"], memory=32 * MiB)
    assert run.exit_code == 137 and run.oom_killed and run.oom_kill_count == 1
    assert any("Killed process" in ln and "(dd)" in ln for ln in run.kernel_log) or not run.kernel_log
    small = container.run_container(["dd", "if=/dev/zero", "of=/dev/null", "bs=4M", "count=1"], memory=32 * MiB)
    assert small.exit_code == 0 and not small.oom_killed


@pytest.mark.real
@real
def test_the_oom_experiments_match_courselibs_prediction(clean_machine):
    pid1, child = container.oom_experiments()
    assert pid1["exit_code"] == pid1["prediction"]["container_exit_code"] == 137
    assert child["exit_code"] == child["prediction"]["container_exit_code"] == 0   # PID 1 survived
    assert child["oom_kill_count"] == child["prediction"]["oom_kill"] == 1
    assert "exited with 137" in child["stdout"]
    assert pid1["prediction"]["victim"] == child["prediction"]["victim"] == "dd"


@pytest.mark.real
@real
@pytest.mark.skipif(container._which("crun") is None, reason="crun is not installed")
def test_crun_is_tried_and_the_one_that_ran_is_named(clean_machine):
    run = container.run_container(["true"], runtimes=("crun", "runc"))
    first = run.runtimes_tried[0]
    assert "crun" in first["runtime"]
    if not first["ran"]:        # Debian's crun 1.8 on a hybrid cgroup host
        assert first["error"] and "runc" in run.runtime
    assert run.exit_code == 0


@pytest.mark.real
@real
def test_sigterm_during_a_run_leaves_nothing_behind(tmp_path):
    before = _ours_left()
    proc = subprocess.Popen([sys.executable, "-m", "courselib", "live", "container", "--", "sleep", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(_ours_left()["cgroups"]) <= len(before["cgroups"]):
        time.sleep(0.05)
    assert len(_ours_left()["cgroups"]) > len(before["cgroups"]), "the container never started"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not _left_behind(before)


def test_the_recorded_runs_show_what_the_chapters_say():
    show = container.recorded("show")["run"]
    assert show["inside"]["pid"] == 1 and show["outside"]["pid"] > 1 and show["inside"]["interfaces"] == ["lo"]
    assert show["inside"]["kernel"] == show["outside"]["kernel"]
    assert "No such file" in show["stdout"]                # no GPU device, no libcuda in the image
    assert show["left_behind"] == {"directory": False, "mounts": [], "cgroups": []}
    pid1, child = container.recorded("oom")["runs"]
    assert pid1["exit_code"] == 137 == pid1["prediction"]["container_exit_code"] and pid1["oom_killed"]
    assert child["exit_code"] == 0 == child["prediction"]["container_exit_code"] and child["oom_kill_count"] == 1
