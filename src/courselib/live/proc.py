"""Your own process, seen through /proc: namespaces, PIDs, hostname, and the cgroup you sit in.

Every function takes the roots it reads (``proc``, ``cgroupfs``) so the same code runs on the
reader's machine and on fixture trees in the tests (cgroup v1, v2 and hybrid layouts).
Sources: proc(5), namespaces(7), cgroups(7), Documentation/admin-guide/cgroup-v2.rst.
"""
from __future__ import annotations

import errno
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

# (the kernel's constants live in the model; the book and the tests read them here too)
from courselib.errors import CourseError
from courselib.model.namespaces import (FIXED_SINCE, FIXED_SINCE_6_18, INITIAL_NS_INODES,  # noqa: F401
                                        NS_KINDS, is_initial_namespace)


def kernel_version(release: str | None = None) -> tuple[int, int]:
    """``"6.18.44-fc-v1045"`` -> ``(6, 18)``; ``(0, 0)`` where the release cannot be read."""
    m = re.match(r"^(\d+)\.(\d+)", release if release is not None else os.uname().release)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


UNLIMITED = None  # a memory limit of "max" (v2) or the v1 page-counter maximum

# cgroup v1 reports "no limit" as PAGE_COUNTER_MAX pages rounded to bytes: a huge number
# (9223372036854771712 on 4 KiB pages). Anything this large is no limit at all.
_V1_NO_LIMIT_FLOOR = 1 << 62


@dataclass(frozen=True)
class Namespace:
    kind: str
    inode: int
    kernel: tuple[int, int] | None = None   # the kernel's (major, minor); None: this machine's

    @property
    def is_initial(self) -> bool | None:
        """True if this is the host's initial namespace of its kind; None where it cannot be told
        (:func:`~courselib.model.namespaces.is_initial_namespace`, on this machine's kernel unless
        ``kernel`` says otherwise)."""
        return is_initial_namespace(self.kind, self.inode,
                                    self.kernel if self.kernel is not None else kernel_version())


def namespaces(pid: str | int = "self", *, proc: str | Path = "/proc") -> dict[str, Namespace]:
    """The namespaces of ``pid``, read from the ``/proc/PID/ns/*`` links (``pid:[4026531836]``)."""
    out = {}
    base = Path(proc) / str(pid) / "ns"
    for kind in NS_KINDS:
        try:
            target = os.readlink(base / kind)
        except OSError:
            continue
        m = re.match(r"^(\w+):\[(\d+)\]$", target)
        if m:
            out[kind] = Namespace(kind, int(m.group(2)))
    return out


@dataclass(frozen=True)
class ProcessView:
    """What a process can see of itself: the facts chapter 1 is built on."""

    pid: int
    ppid: int
    nspid: tuple[int, ...]  # this process's PID in each nested PID namespace, outermost first
    hostname: str
    namespaces: dict[str, Namespace]
    pid1_command: str | None

    @property
    def in_initial_pid_namespace(self) -> bool | None:
        ns = self.namespaces.get("pid")
        return None if ns is None else ns.is_initial

    @property
    def pid_depth(self) -> int:
        """How many PID namespaces deep this process is (1 = the host's own)."""
        return len(self.nspid) or 1


def _status_fields(path: Path) -> dict[str, str]:
    out = {}
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            out[key] = value.strip()
    except OSError:
        pass
    return out


def process_view(pid: str | int = "self", *, proc: str | Path = "/proc",
                 hostname: str | None = None) -> ProcessView:
    """Read ``/proc/PID/status`` (Pid, PPid, NSpid), ``/proc/PID/ns`` and PID 1's command line."""
    proc = Path(proc)
    status = _status_fields(proc / str(pid) / "status")
    nspid = tuple(int(x) for x in status.get("NSpid", status.get("Pid", "0")).split())
    try:
        raw = (proc / "1" / "cmdline").read_bytes()
        pid1 = raw.replace(b"\0", b" ").decode(errors="replace").strip() or None
    except OSError:
        pid1 = None
    return ProcessView(
        pid=int(status.get("Pid", os.getpid() if pid == "self" else pid)),
        ppid=int(status.get("PPid", 0)),
        nspid=nspid,
        hostname=hostname if hostname is not None else socket.gethostname(),
        namespaces=namespaces(pid, proc=proc),
        pid1_command=pid1,
    )


@dataclass(frozen=True)
class CgroupEntry:
    """One line of ``/proc/PID/cgroup``: ``hierarchy-ID:controller-list:path``."""

    hierarchy: int
    controllers: tuple[str, ...]
    path: str


def parse_proc_cgroup(text: str) -> list[CgroupEntry]:
    """Parse ``/proc/PID/cgroup``. A v2 (unified) line is ``0::/path``; v1 lines name controllers."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        hid, controllers, path = line.split(":", 2)
        ctl = tuple(c for c in controllers.split(",") if c)
        out.append(CgroupEntry(int(hid), ctl, path))
    return out


def cgroup_mode(cgroupfs: str | Path = "/sys/fs/cgroup") -> str:
    """``"v2"`` (unified), ``"hybrid"`` (v1 controllers plus a v2 tree) or ``"v1"``."""
    root = Path(cgroupfs)
    if (root / "cgroup.controllers").exists():
        return "v2"
    if (root / "unified" / "cgroup.controllers").exists():
        return "hybrid"
    return "v1"


def _read_limit(path: Path) -> int | None | bool:
    """Bytes in a limit file, ``None`` for no limit, ``False`` if the file is not there."""
    try:
        text = path.read_text().strip()
    except OSError:
        return False
    if text == "max":
        return UNLIMITED
    value = int(text)
    return UNLIMITED if value >= _V1_NO_LIMIT_FLOOR else value


@dataclass(frozen=True)
class MemoryLimit:
    """The memory limit that holds a process, and where it comes from."""

    version: str                 # "v1" or "v2"
    cgroup: str                  # the process's own cgroup path, as /proc/PID/cgroup names it
    own_limit: int | None        # bytes in its own cgroup's file (None: no limit)
    effective_limit: int | None  # the smallest limit on the way to the root (None: no limit)
    limited_by: str | None       # the cgroup whose limit is the effective one
    limit_file: str              # memory.max (v2) or memory.limit_in_bytes (v1)
    usage: int | None            # bytes charged to its own cgroup now, if readable


def memory_limit(*, proc: str | Path = "/proc", cgroupfs: str | Path = "/sys/fs/cgroup",
                 pid: str | int = "self") -> MemoryLimit | None:
    """The memory limit of ``pid``'s cgroup, v1 or v2, walking up to the effective (smallest) one.

    A child cgroup can never use more than its ancestors allow, so the limit that bites is the
    smallest on the path to the root (cgroup-v2.rst, "memory.max"; v1 memory.rst, hierarchy).
    Returns None where the memory controller is not visible.
    """
    entries = parse_proc_cgroup((Path(proc) / str(pid) / "cgroup").read_text())
    root = Path(cgroupfs)
    mode = cgroup_mode(root)
    if mode == "v2":
        entry = next((e for e in entries if e.hierarchy == 0), None)
        base, limit_file, usage_file, version = root, "memory.max", "memory.current", "v2"
    else:
        entry = next((e for e in entries if "memory" in e.controllers), None)
        base, limit_file, usage_file, version = root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "v1"
    if entry is None or not base.exists():
        return None

    own = own_dir(base, entry.path)
    own_limit = _read_limit(own / limit_file)
    effective, limited_by = UNLIMITED, None
    d = own
    while True:
        lim = _read_limit(d / limit_file)
        if lim not in (False, UNLIMITED) and (effective is UNLIMITED or lim < effective):
            rel_d = str(d.relative_to(base))
            effective, limited_by = lim, "/" if rel_d == "." else "/" + rel_d
        if d == base:
            break
        d = d.parent
    usage = _read_limit(own / usage_file)
    return MemoryLimit(version=version, cgroup=entry.path, own_limit=None if own_limit is False else own_limit,
                       effective_limit=effective, limited_by=limited_by, limit_file=limit_file,
                       usage=usage if isinstance(usage, int) and usage is not False else None)


def own_dir(base: str | Path, rel: str) -> Path:
    """The directory of cgroup ``rel`` under the mount ``base``.

    Inside a cgroup namespace /proc/self/cgroup says "/" and the mount is already our cgroup, so
    a path that is not there falls back to the mount root itself.
    """
    base = Path(base)
    rel = rel.lstrip("/")
    return base / rel if rel and (base / rel).is_dir() else base


def remove_cgroup(path: Path, *, timeout: float = 10.0) -> None:
    """rmdir a cgroup we created, retrying while the kernel finishes reaping its last tasks."""


    deadline = time.monotonic() + timeout
    while path.exists():
        try:
            os.rmdir(path)
        except OSError as err:
            if err.errno == errno.ENOENT:
                break
            if time.monotonic() > deadline:
                raise CourseError(f"could not remove {path}: {err.strerror}",
                                  hint=f"remove it by hand: rmdir {path}") from None
            time.sleep(0.05)


def cgroup_entries(pid: str | int = "self", *, proc: str | Path = "/proc") -> list[CgroupEntry]:
    """The cgroups ``pid`` sits in, one per hierarchy."""
    return parse_proc_cgroup((Path(proc) / str(pid) / "cgroup").read_text())
