"""The real OOM killer: real processes in a temporary memory cgroup, killed by the kernel.

One run: create a child memory cgroup with a small limit (cgroup v2 ``memory.max`` where the
memory controller is usable, else v1 ``memory.limit_in_bytes``), start a few real processes in
it that allocate and touch memory and then wait, give each its own ``oom_score_adj``, measure
every one of them from ``/proc/PID/status`` (VmRSS, VmSwap, VmPTE), ask the simulator which one
the kernel will kill, and only then let a designated *trigger* process grow past the limit. The
kernel's memcg OOM killer picks a victim over the cgroup's tasks with ``oom_badness`` and
``totalpages`` = the limit (FACTS §1.3); we report its exit status (-9 / 137), the cgroup's
``oom_kill`` counter, the kernel log line, and the prediction beside it.

Everything started is stopped by PID and the cgroup is removed, also on error, Ctrl-C or
SIGTERM. Without the privilege to create a cgroup: :class:`PrivilegeError`, nothing touched.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from courselib.errors import CourseError, PrivilegeError
from courselib.live import recorded
from courselib.live.cleanup import cleanup_on_signals
from courselib.live.proc import cgroup_mode, own_dir, parse_proc_cgroup, remove_cgroup
from courselib.model.badness import Task, proc_oom_score
from courselib.model.memcg import OomScenario, ProcessSpec
from courselib.units import PAGE_SIZE, format_bytes

MiB = 1024 * 1024
MIN_LIMIT = 48 * MiB  # four Python interpreters need room before any hog allocates

# The hog: allocate and touch SIZE bytes, say "ready", then obey "grow N" (touch N more bytes in
# 256 KiB pieces, then say "grown"); exit when stdin closes. -I -S: no site, no user environment.
HOG = r"""
import sys
held = [b"\x01" * int(sys.argv[1])] if int(sys.argv[1]) else []
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    if line.startswith("grow "):
        n = int(line.split()[1])
        while n > 0:
            k = min(n, 262144)
            held.append(b"\x01" * k)
            n -= k
        sys.stdout.write("grown\n"); sys.stdout.flush()
"""


@dataclass(frozen=True)
class Hog:
    """A real process of the experiment: bytes to allocate at start, its ``oom_score_adj``."""

    name: str
    size: float            # fraction of the limit (so a scenario scales with --limit)
    oom_score_adj: int = 0
    trigger: bool = False  # the one that grows past the limit once everyone is measured


@dataclass(frozen=True)
class RealScenario:
    name: str
    hogs: tuple[Hog, ...]
    description: str = ""


def _four(name: str, description: str, adj: tuple[int, int, int, int]) -> RealScenario:
    a, b, c, t = adj
    return RealScenario(name, (Hog("a", 0.125, a), Hog("b", 0.375, b), Hog("c", 0.1875, c),
                               Hog("trigger", 0.0, t, trigger=True)), description)


# a: 1/8 of the limit, b: 3/8, c: 3/16, trigger: nothing until it grows past the limit.
SCENARIOS: dict[str, RealScenario] = {s.name: s for s in (
    _four("largest", "all oom_score_adj 0: the largest process dies, not the one that asked", (0, 0, 0, 0)),
    _four("adj-shifts", "a has oom_score_adj 300: the smallest hog dies (one point = limit/1000 pages)",
          (300, 0, 0, 0)),
    _four("same-adj", "everyone at 500: equal adjustments change nothing, the largest dies",
          (500, 500, 500, 500)),
    _four("trigger-dies", "the growing process has oom_score_adj 1000: it is killed itself", (0, 0, 0, 1000)),
    _four("protected", "b has oom_score_adj -1000 and is never chosen: the next largest dies",
          (0, -1000, 0, 0)),
    _four("last-resort", "every other task is -1000: a -998 task with a negative score still dies",
          (-1000, -1000, -1000, -998)),
)}


def can_lower_adj() -> bool:
    """True if this process may set a negative ``oom_score_adj`` (CAP_SYS_RESOURCE, bit 24).

    Root is not enough: a container may drop the capability (fs/proc/base.c __set_oom_adj()).
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)
    return False


@dataclass(frozen=True)
class Measured:
    """One real process just before the OOM, read from /proc (pages, except pagetables in bytes)."""

    name: str
    pid: int
    rss: int
    swap: int
    pagetables: int
    oom_score_adj: int
    oom_score: int


@dataclass
class RealRun:
    """A real run: what we measured, what the simulator predicted, what the kernel did."""

    scenario: str
    cgroup_version: str
    cgroup_path: str
    limit: int                       # bytes
    usage_before: int                # bytes charged to the cgroup before the trigger grew
    measured: list[Measured] = field(default_factory=list)
    predicted_victim: str | None = None
    predicted_killed: list[str] = field(default_factory=list)
    predicted_points: dict[str, int | None] = field(default_factory=dict)
    predicted_oom_kill: int = 0
    predicted_oom_score: dict[str, int] = field(default_factory=dict)
    killed: list[str] = field(default_factory=list)
    returncodes: dict[str, int | None] = field(default_factory=dict)
    oom_kill: int = 0
    kernel_log: list[str] = field(default_factory=list)
    kernel_table: dict[str, dict[str, int]] = field(default_factory=dict)  # from the OOM report

    @property
    def victim(self) -> str | None:
        return self.killed[0] if self.killed else None

    @property
    def match(self) -> bool:
        return (sorted(self.killed) == sorted(self.predicted_killed)
                and self.oom_kill == self.predicted_oom_kill)

    def as_dict(self) -> dict:
        return {
            "scenario": self.scenario, "cgroup": self.cgroup_version, "path": self.cgroup_path,
            "limit": self.limit, "limit_pages": self.limit // PAGE_SIZE, "usage_before": self.usage_before,
            "measured": [m.__dict__ for m in self.measured],
            "prediction": {"victim": self.predicted_victim, "killed": self.predicted_killed,
                           "points": self.predicted_points, "oom_kill": self.predicted_oom_kill,
                           "oom_score": self.predicted_oom_score},
            "kernel": {"victim": self.victim, "killed": self.killed, "returncodes": self.returncodes,
                       "exit_codes": {n: (128 - rc if rc is not None and rc < 0 else rc)
                                      for n, rc in self.returncodes.items()},
                       "oom_kill": self.oom_kill, "log": self.kernel_log, "table": self.kernel_table},
            "match": self.match,
        }


# ---------------------------------------------------------------------------- finding a cgroup

@dataclass(frozen=True)
class Place:
    """Where we may create the temporary cgroup."""

    version: str   # "v1" or "v2"
    parent: Path   # the directory to mkdir in



def find_place(*, proc: str | Path = "/proc", cgroupfs: str | Path = "/sys/fs/cgroup") -> Place:
    """A writable place for a child memory cgroup: v2 if its memory controller is usable, else v1.

    Raises :class:`PrivilegeError` (having touched nothing) where neither is possible.
    """
    root = Path(cgroupfs)
    entries = parse_proc_cgroup((Path(proc) / "self" / "cgroup").read_text())
    mode = cgroup_mode(root)
    reasons = []
    v2_root = root if mode == "v2" else root / "unified" if mode == "hybrid" else None
    v2_entry = next((e for e in entries if e.hierarchy == 0), None)
    if v2_root is not None and v2_entry is not None:
        own = own_dir(v2_root, v2_entry.path)
        # v2 lets a non-root cgroup enable controllers for children only while it holds no
        # processes, so a delegated subtree usually has memory enabled one level up: try our own
        # cgroup (the root, or a cgroup namespace), then its parent (a sibling of ours).
        for parent in (own, own.parent) if own != v2_root else (own,):
            try:
                subtree = (parent / "cgroup.subtree_control").read_text().split()
            except OSError:
                subtree = []
            if "memory" in subtree and os.access(parent, os.W_OK):
                return Place("v2", parent)
        reasons.append(f"cgroup v2: the memory controller is not enabled for children of {own} "
                       "or its parent, or they are not writable")
    v1_entry = next((e for e in entries if "memory" in e.controllers), None)
    v1_base = root / "memory"
    if v1_entry is not None and (v1_base / "memory.limit_in_bytes").exists():
        parent = own_dir(v1_base, v1_entry.path)
        if os.access(parent, os.W_OK):
            return Place("v1", parent)
        reasons.append(f"cgroup v1: {parent} is not writable")
    raise PrivilegeError(
        "the real OOM experiment needs to create a memory cgroup, and it cannot here ("
        + ("; ".join(reasons) or "no memory controller found") + "); nothing was touched",
        hint="run it as root or in a delegated cgroup v2 subtree; `courselib oom simulate` needs no privilege")


# ---------------------------------------------------------------------------- reading the kernel

def read_status(pid: int, proc: str = "/proc") -> dict[str, int]:
    """VmRSS, VmSwap, VmPTE of ``pid`` in kB (the counters ``oom_badness`` adds up)."""
    out = {}
    for line in Path(f"{proc}/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmSwap", "VmPTE", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0])
    return out


def measure(name: str, pid: int) -> Measured:
    s = read_status(pid)
    return Measured(name, pid, rss=s.get("VmRSS", 0) * 1024 // PAGE_SIZE,
                    swap=s.get("VmSwap", 0) * 1024 // PAGE_SIZE, pagetables=s.get("VmPTE", 0) * 1024,
                    oom_score_adj=int(Path(f"/proc/{pid}/oom_score_adj").read_text()),
                    oom_score=int(Path(f"/proc/{pid}/oom_score").read_text()))


def oom_kill_count(cg: Path, version: str) -> int:
    """The cgroup's ``oom_kill`` counter: v1 ``memory.oom_control``, v2 ``memory.events``."""
    name = "memory.oom_control" if version == "v1" else "memory.events"
    for line in (cg / name).read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0


def node_pages() -> tuple[int, int]:
    """``totalram_pages`` and ``total_swap_pages`` from /proc/meminfo (MemTotal, SwapTotal)."""
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, value = line.partition(":")
        info[key] = int(value.split()[0])
    return info["MemTotal"] * 1024 // PAGE_SIZE, info.get("SwapTotal", 0) * 1024 // PAGE_SIZE


class KernelLog:
    """New ``/dev/kmsg`` records since the experiment began (None where it cannot be read)."""

    def __init__(self):
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.fd = None

    def read(self) -> list[str]:
        out = []
        while self.fd is not None:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno == errno.EPIPE:  # overwritten records: keep reading
                    continue
                break
            if not rec:
                break
            out.append(rec.decode(errors="replace").split(";", 1)[-1].rstrip("\n"))
        return out

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


_TABLE_ROW = re.compile(r"^\[\s*(\d+)\]\s+\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+(?:(\d+)\s+(\d+)\s+(\d+)\s+)?(\d+)\s+(\d+)\s+(-?\d+)\s+(\S+)")


def parse_oom_table(lines: list[str], pids: dict[int, str]) -> dict[str, dict[str, int]]:
    """The kernel's own task table from the OOM report (``vm.oom_dump_tasks``), for our pids.

    Row: ``[pid] uid tgid total_vm rss [rss_anon rss_file rss_shmem] pgtables_bytes swapents
    oom_score_adj name``; ``rss`` is in pages.
    """
    out = {}
    for line in lines:
        m = _TABLE_ROW.match(line.strip())
        if m and int(m.group(2)) in pids:
            out[pids[int(m.group(2))]] = {"rss": int(m.group(4)), "pgtables_bytes": int(m.group(8)),
                                          "swapents": int(m.group(9)), "oom_score_adj": int(m.group(10))}
    return out


# ---------------------------------------------------------------------------- the experiment

def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    """One line from the process's stdout, or '' if it exited or stayed silent too long."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


class Experiment:
    """Owns the temporary cgroup and the processes; :meth:`close` removes them all, always."""

    def __init__(self, place: Place, limit: int):
        self.place = place
        self.limit = limit
        self.procs: dict[str, subprocess.Popen] = {}
        # Every process of the experiment shares one CPU. A victim that exits marks itself
        # MMF_OOM_SKIP *before* its last batch of pages is freed (exit_mmap); a trigger spinning
        # in its charge retry loop on another CPU can hit that window and make the kernel kill a
        # second task. On one CPU the trigger waits while the victim finishes (seen: 1 double
        # kill in 40 runs on two CPUs, none in 60 on one).
        self.cpu = min(os.sched_getaffinity(0))
        self.path = place.parent / f"courselib-oom-{os.getpid()}-{time.monotonic_ns() % 10 ** 9}"
        os.mkdir(self.path)
        try:
            if place.version == "v2":
                _write(self.path / "memory.max", str(limit))
                if (self.path / "memory.swap.max").exists():
                    _write(self.path / "memory.swap.max", "0")
                _write(self.path / "memory.oom.group", "0")
            else:
                _write(self.path / "memory.limit_in_bytes", str(limit))
                if (self.path / "memory.memsw.limit_in_bytes").exists():
                    _write(self.path / "memory.memsw.limit_in_bytes", str(limit))  # no swap: totalpages = limit
                _write(self.path / "memory.oom_control", "0")
        except BaseException:
            self.close()
            raise

    def start(self, hog: Hog, size: int) -> subprocess.Popen:
        procs_file = str(self.path / "cgroup.procs")
        adj = str(hog.oom_score_adj)
        cpu = self.cpu

        def enter():  # runs in the child between fork and exec: join the cgroup, set the adj
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
            with open(procs_file, "w") as fh:
                fh.write(str(os.getpid()))
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write(adj)

        p = subprocess.Popen([sys.executable, "-I", "-S", "-c", HOG, str(size)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             preexec_fn=enter, close_fds=True, env={})
        self.procs[hog.name] = p
        return p

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    p.kill()
                except ProcessLookupError:
                    pass
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (p.stdin, p.stdout):
                try:
                    if stream:
                        stream.close()
                except OSError:
                    pass
        remove_cgroup(self.path)


def _prediction_scenario(run: RealRun, trigger: str, limit_pages: int, usage_pages: int,
                         version: str) -> OomScenario:
    """The simulator's input for this run: measured sizes, the trigger growing past the limit."""
    headroom = max(limit_pages - usage_pages, 0) * PAGE_SIZE
    procs = tuple(ProcessSpec(Task(m.name, m.rss, m.swap, m.pagetables, m.oom_score_adj), "/",
                              grow=(headroom + GROW_EXTRA) * 10 if m.name == trigger else 0,
                              grow_by=(headroom + GROW_EXTRA) if m.name == trigger else None)
                  for m in run.measured)
    ram, swap = node_pages()
    return OomScenario(scope="memcg", limit=limit_pages, processes=procs, swap=0,
                       cgroup=version, node_memory=ram, node_swap=swap, usage=usage_pages,
                       duration=1.0, step=0.01)


GROW_EXTRA = 2 * MiB  # the trigger asks for this much beyond the limit; every non-trigger victim frees more


def run_real(scenario: RealScenario | str = "largest", *, limit: int = 64 * MiB,
             place: Place | None = None, timeout: float = 15.0) -> RealRun:
    """Run one real experiment and return measurement, prediction and the kernel's verdict."""
    from courselib.sim.memcg import simulate, summary

    if isinstance(scenario, str):
        if scenario not in SCENARIOS:
            raise CourseError(f"no real scenario {scenario!r}", hint="choose from " + ", ".join(SCENARIOS))
        scenario = SCENARIOS[scenario]
    if limit < MIN_LIMIT:
        raise CourseError(f"limit {format_bytes(limit)} is too small for four Python processes",
                          field="--limit", hint=f"use at least {MIN_LIMIT // MiB}Mi")
    place = place or find_place()
    if any(h.oom_score_adj < 0 for h in scenario.hogs) and not can_lower_adj():
        raise PrivilegeError(f"scenario {scenario.name} needs a negative oom_score_adj, which needs "
                             "CAP_SYS_RESOURCE; this process lacks it (even root may, in a container); "
                             "nothing was touched",
                             hint="choose a scenario whose oom_score_adj values are all >= 0")

    stack = contextlib.ExitStack()
    stack.enter_context(cleanup_on_signals())
    log = KernelLog()
    exp = None
    try:
        exp = Experiment(place, limit)
        run = RealRun(scenario.name, place.version, str(exp.path), limit, 0)
        trigger = next(h.name for h in scenario.hogs if h.trigger)
        for hog in scenario.hogs:  # one at a time, so no two interpreters start up at once
            p = exp.start(hog, int(hog.size * limit))
            if _readline(p, timeout).strip() != "ready":
                raise CourseError(f"process {hog.name} did not start inside {format_bytes(limit)} "
                                  f"(exit {p.poll()})", hint="use a larger --limit")
        time.sleep(0.1)
        run.measured = [measure(h.name, exp.procs[h.name].pid) for h in scenario.hogs]
        usage_file = "memory.current" if place.version == "v2" else "memory.usage_in_bytes"
        run.usage_before = int((exp.path / usage_file).read_text())
        before = oom_kill_count(exp.path, place.version)

        # the prediction, made before the kernel acts
        limit_pages = limit // PAGE_SIZE
        pred = summary(simulate(_prediction_scenario(run, trigger, limit_pages,
                                                     -(-run.usage_before // PAGE_SIZE), place.version)))
        run.predicted_victim, run.predicted_killed = pred["victim"], pred["killed"]
        run.predicted_points, run.predicted_oom_kill = pred["points"], pred["events"]["oom_kill"]
        ram, swap = node_pages()
        run.predicted_oom_score = {m.name: proc_oom_score(Task(m.name, m.rss, m.swap, m.pagetables,
                                                               m.oom_score_adj), ram + swap)
                                   for m in run.measured}

        # now let the trigger grow past the limit
        t = exp.procs[trigger]
        headroom = max(limit - run.usage_before, 0)
        t.stdin.write(f"grow {headroom + GROW_EXTRA}\n")
        t.stdin.flush()
        if _readline(t, timeout).strip() != "grown":  # EOF: the trigger itself was killed
            try:
                t.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise CourseError("the trigger neither finished growing nor died", hint="try again") from None
        time.sleep(0.2)  # let the kernel finish reaping before we count
        pids = {p.pid: n for n, p in exp.procs.items()}
        lines = log.read()
        for line in lines:  # a victim the log names has exited, or is about to: wait for it
            m = re.search(r"Killed process (\d+) ", line)
            if m and int(m.group(1)) in pids:
                try:
                    exp.procs[pids[int(m.group(1))]].wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    pass
        run.returncodes = {name: p.poll() for name, p in exp.procs.items()}
        run.killed = [n for n, rc in run.returncodes.items() if rc == -signal.SIGKILL]
        run.oom_kill = oom_kill_count(exp.path, place.version) - before
        # only our pids: another experiment (another cgroup) may be OOM-killing at the same time
        run.kernel_log = [ln for ln in lines if any(f"process {pid} " in ln for pid in pids)]
        run.kernel_table = parse_oom_table(lines, pids)
        # the kernel's order is the log's: the victim it names first
        order = [pids[int(m.group(1))] for ln in run.kernel_log
                 for m in [re.search(r"Killed process (\d+)", ln)] if m and int(m.group(1)) in pids]
        run.killed = sorted(run.killed, key=lambda n: order.index(n) if n in order else len(order))
        return run
    finally:
        try:
            if exp is not None:
                exp.close()
        finally:
            log.close()
            stack.close()


RECORDED = "oom_real.json"


def recorded_runs() -> list[dict]:
    """Runs recorded on the course's CI machine (cgroup v1, Linux 6.18), for readers without privilege."""
    return recorded.load(RECORDED)["runs"]


def source(scenarios=("largest", "adj-shifts", "trigger-dies"), *,
           limit: int = 64 * MiB) -> recorded.Source[list[dict]]:
    """The real OOM killer on ``scenarios``, live where permitted, else the recorded runs; each
    run's ``recorded`` says which (:func:`courselib.live.recorded.live_or_recorded`)."""
    def run() -> list[dict]:
        runs = [run_real(name, limit=limit).as_dict() for name in scenarios]
        for r in runs:
            r["recorded"] = False
            r["kernel_release"] = os.uname().release
        return runs

    def recording() -> recorded.Recording[list[dict]]:
        data = recorded.load(RECORDED)
        runs = [r for r in data["runs"] if r["scenario"] in scenarios]
        for r in runs:
            r["recorded"] = True
        return recorded.Recording(runs, data["recorded_on"])
    return recorded.Source(run, recording)
