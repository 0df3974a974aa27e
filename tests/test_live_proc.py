"""courselib.live.proc: the reader's own process on this machine, and v1/v2/hybrid fixture trees."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from courselib.live import proc

GiB = 2 ** 30
V1_NO_LIMIT = "9223372036854771712"


def make_tree(tmp: Path, cgroup_lines: str, files: dict[str, str]) -> tuple[Path, Path]:
    (tmp / "proc" / "self").mkdir(parents=True)
    (tmp / "proc" / "self" / "cgroup").write_text(cgroup_lines)
    cg = tmp / "cgroup"
    cg.mkdir()
    for rel, text in files.items():
        p = cg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp / "proc", cg


def test_parse_proc_cgroup_v1_and_v2_lines():
    entries = proc.parse_proc_cgroup("4:memory:/a/b\n3:cpu,cpuacct:/\n0::/user.slice/x.scope\n")
    assert entries[0] == proc.CgroupEntry(4, ("memory",), "/a/b")
    assert entries[1].controllers == ("cpu", "cpuacct")
    assert entries[2] == proc.CgroupEntry(0, (), "/user.slice/x.scope")


def test_v2_limit_is_smallest_on_path_to_root(tmp_path):
    p, cg = make_tree(tmp_path, "0::/kubepods.slice/pod1.slice/c1.scope\n", {
        "cgroup.controllers": "cpu memory\n",
        "kubepods.slice/memory.max": f"{8 * GiB}\n",
        "kubepods.slice/pod1.slice/memory.max": f"{GiB}\n",
        "kubepods.slice/pod1.slice/c1.scope/memory.max": "max\n",
        "kubepods.slice/pod1.slice/c1.scope/memory.current": "12345\n",
    })
    m = proc.memory_limit(proc=p, cgroupfs=cg)
    assert m.version == "v2" and m.limit_file == "memory.max"
    assert m.own_limit is None
    assert m.effective_limit == GiB
    assert m.limited_by == "/kubepods.slice/pod1.slice"
    assert m.usage == 12345


def test_v1_limit_and_no_limit_sentinel(tmp_path):
    p, cg = make_tree(tmp_path, "9:pids:/\n4:memory:/docker/abc\n", {
        "memory/memory.limit_in_bytes": V1_NO_LIMIT + "\n",
        "memory/docker/memory.limit_in_bytes": V1_NO_LIMIT + "\n",
        "memory/docker/abc/memory.limit_in_bytes": f"{512 * 2**20}\n",
        "memory/docker/abc/memory.usage_in_bytes": "4096\n",
    })
    m = proc.memory_limit(proc=p, cgroupfs=cg)
    assert m.version == "v1" and m.limit_file == "memory.limit_in_bytes"
    assert m.own_limit == m.effective_limit == 512 * 2**20
    assert m.limited_by == "/docker/abc"


def test_v1_unlimited_reads_as_none(tmp_path):
    p, cg = make_tree(tmp_path, "4:memory:/\n", {"memory/memory.limit_in_bytes": V1_NO_LIMIT + "\n"})
    m = proc.memory_limit(proc=p, cgroupfs=cg)
    assert m.effective_limit is None and m.limited_by is None


def test_cgroup_namespace_root_path_reads_mount_root(tmp_path):
    # Inside a cgroup namespace, /proc/self/cgroup says "/" and the mount is the container's cgroup.
    p, cg = make_tree(tmp_path, "0::/\n", {"cgroup.controllers": "memory\n", "memory.max": f"{GiB}\n"})
    m = proc.memory_limit(proc=p, cgroupfs=cg)
    assert m.effective_limit == GiB and m.limited_by == "/"


def test_hybrid_layout_uses_v1_memory_controller(tmp_path):
    p, cg = make_tree(tmp_path, "4:memory:/x\n0::/\n", {
        "unified/cgroup.controllers": "\n",
        "memory/x/memory.limit_in_bytes": "1048576\n",
    })
    assert proc.cgroup_mode(cg) == "hybrid"
    assert proc.memory_limit(proc=p, cgroupfs=cg).effective_limit == 1048576


def test_no_memory_controller_gives_none(tmp_path):
    p, cg = make_tree(tmp_path, "3:cpu:/\n", {"cpu/cpu.shares": "1024\n"})
    assert proc.memory_limit(proc=p, cgroupfs=cg) is None


def test_namespace_initial_inodes():
    assert proc.Namespace("pid", 0xEFFFFFFC).is_initial is True
    assert proc.Namespace("pid", 4026532179).is_initial is False
    # net and mnt: fixed numbers since Linux 6.18 (include/uapi/linux/nsfs.h), dynamic before
    assert proc.Namespace("mnt", 0xEFFFFFF8).is_initial is True          # = 4026531832
    assert proc.Namespace("net", 0xEFFFFFF9, kernel=(6, 18)).is_initial is True
    assert proc.Namespace("mnt", 4026532299, kernel=(6, 18)).is_initial is False
    assert proc.Namespace("net", 4026532008, kernel=(7, 0)).is_initial is False
    assert proc.Namespace("net", 4026531992, kernel=(6, 1)).is_initial is None   # a 6.1 host's own
    assert proc.kernel_version("6.18.44-fc-v1045") == (6, 18) and proc.kernel_version("x") == (0, 0)


def test_the_hosts_own_namespaces_are_initial_and_a_containers_are_not():
    if proc.kernel_version() < proc.FIXED_SINCE:
        pytest.skip("mount and network namespaces have fixed numbers only since Linux 6.18")
    ns = proc.namespaces("self")
    if ns["pid"].is_initial is not True:
        pytest.skip("this test runs inside a PID namespace of its own")
    assert ns["mnt"].is_initial is True and ns["net"].is_initial is True


def test_process_view_of_this_machine():
    view = proc.process_view()
    assert view.pid == os.getpid()
    assert view.nspid[-1] == os.getpid()  # the innermost NSpid is the PID this process sees
    assert set(view.namespaces) >= {"pid", "mnt", "net", "uts"}
    assert view.pid_depth >= 1


def test_memory_limit_of_this_machine_matches_the_files():
    m = proc.memory_limit()
    if m is None:
        pytest.skip("no memory controller visible on this machine")
    assert m.version in ("v1", "v2")
    if m.effective_limit is not None:
        assert m.effective_limit > 0
