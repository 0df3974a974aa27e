"""The kernel enforcing a CPU limit, for real: a busy process in a temporary cgroup with a CFS quota.

A process that would use a whole CPU is put in a child cgroup whose ``cpu.max`` (v2) or
``cpu.cfs_quota_us``/``cpu.cfs_period_us`` (v1) allows a fraction of one CPU; we sample the CPU time
it gets (``/proc/PID/stat`` utime+stime) and the cgroup's throttling counters. The same busy loop
without a limit runs beside it as the control. Both processes and the cgroup are always removed,
also on error, Ctrl-C, SIGTERM and SIGHUP (:func:`courselib.live.cleanup.cleanup_on_signals`).
Without the privilege: :class:`PrivilegeError`, nothing touched.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.errors import CourseError, PrivilegeError
from courselib.live import recorded
from courselib.live.cleanup import cleanup_on_signals, signals_held
from courselib.live.proc import cgroup_mode, own_dir, parse_proc_cgroup, remove_cgroup
from courselib.model.cpu import CpuLimit, milli_cpu_to_quota, parse_cfs, parse_cpu_max

BUSY = "while True:\n    pass\n"
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class ThrottleRun:
    """What the kernel did: CPU used per sampling interval, with and without the limit."""

    milli_cpu: int
    limit: dict                     # {"quota_us", "period_us", "cpus"}
    cgroup_version: str
    files_written: dict
    interval_s: float
    limited_cpus: list[float] = field(default_factory=list)     # CPUs used by the limited process, per interval
    unlimited_cpus: list[float] = field(default_factory=list)   # the control, per interval
    nr_periods: int = 0
    nr_throttled: int = 0
    recorded: bool = False
    recorded_on: str | None = None
    recorded_at: str = ""           # the date a recorded run was made (empty: not known)

    @property
    def mean_limited(self) -> float:
        return sum(self.limited_cpus) / len(self.limited_cpus) if self.limited_cpus else 0.0

    @property
    def mean_unlimited(self) -> float:
        return sum(self.unlimited_cpus) / len(self.unlimited_cpus) if self.unlimited_cpus else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["mean_limited"] = round(self.mean_limited, 3)
        d["mean_unlimited"] = round(self.mean_unlimited, 3)
        return d



def find_cpu_place(*, proc="/proc", cgroupfs="/sys/fs/cgroup") -> tuple[str, Path]:
    """(version, parent directory) where a child CPU cgroup may be created, or PrivilegeError."""
    root = Path(cgroupfs)
    entries = parse_proc_cgroup((Path(proc) / "self" / "cgroup").read_text())
    mode = cgroup_mode(root)
    reasons = []
    if mode == "v2":
        entry = next((e for e in entries if e.hierarchy == 0), None)
        parent = own_dir(root, entry.path if entry else "/")
        try:
            enabled = "cpu" in (parent / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = False
        if enabled and os.access(parent, os.W_OK):
            return "v2", parent
        reasons.append(f"cgroup v2: cpu is not enabled for children of {parent}" if not enabled
                       else f"cgroup v2: {parent} is not writable")
    else:
        entry = next((e for e in entries if "cpu" in e.controllers), None)
        base = root / "cpu"
        if entry is not None and (base / "cpu.cfs_quota_us").exists():
            parent = own_dir(base, entry.path)
            if os.access(parent, os.W_OK):
                return "v1", parent
            reasons.append(f"cgroup v1: {parent} is not writable")
    raise PrivilegeError("the CPU-limit experiment needs to create a cgroup, and it cannot here ("
                         + ("; ".join(reasons) or "no cpu controller found") + "); nothing was touched",
                         hint="run it as root; the chapter shows a recorded run")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime (fields 14, 15 of proc(5))


def _read_stat(path: Path) -> dict[str, int]:
    out = {}
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            out[k] = int(v)
    except (OSError, ValueError):
        pass
    return out


def run_throttle(milli_cpu: int = 250, *, seconds: float = 2.0, interval: float = 0.25,
                 proc="/proc", cgroupfs="/sys/fs/cgroup") -> ThrottleRun:
    """Run the experiment: a busy loop limited to ``milli_cpu`` beside an unlimited one."""
    if milli_cpu <= 0:
        raise CourseError("the CPU limit must be positive", field="cpu", hint="try 250m")
    version, parent = find_cpu_place(proc=proc, cgroupfs=cgroupfs)
    limit = CpuLimit(milli_cpu_to_quota(milli_cpu))
    files = limit.v2_files() if version == "v2" else limit.v1_files()
    path = parent / f"courselib-cpu-{os.getpid()}-{time.monotonic_ns() % 10 ** 9}"
    procs: list[subprocess.Popen] = []
    with cleanup_on_signals():
        os.mkdir(path)
        try:
            return _measure(path, files, limit, milli_cpu, version, seconds, interval, procs)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            remove_cgroup(path)


def _measure(path, files, limit, milli_cpu, version, seconds, interval, procs) -> ThrottleRun:
    """Start the two busy loops (appended to ``procs`` at once, for the caller to stop) and sample."""
    for name, value in files.items():
        (path / name).write_text(value)
    procs_file = str(path / "cgroup.procs")

    def enter():  # in the child, before exec: join the limited cgroup
        with open(procs_file, "w") as fh:
            fh.write(str(os.getpid()))

    with signals_held():  # a signal now would leave a busy loop that is not in procs
        limited = subprocess.Popen([sys.executable, "-I", "-S", "-c", BUSY], preexec_fn=enter,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True)
        procs.append(limited)
        control = subprocess.Popen([sys.executable, "-I", "-S", "-c", BUSY],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True)
        procs.append(control)
    run = ThrottleRun(milli_cpu=milli_cpu, limit={"quota_us": limit.quota_us, "period_us": limit.period_us,
                                                  "cpus": limit.cpus},
                      cgroup_version=version, files_written=files, interval_s=interval)
    time.sleep(interval)  # let both start
    before = (_cpu_seconds(limited.pid), _cpu_seconds(control.pid), time.monotonic())
    for _ in range(max(1, int(round(seconds / interval)))):
        time.sleep(interval)
        now = (_cpu_seconds(limited.pid), _cpu_seconds(control.pid), time.monotonic())
        dt = now[2] - before[2]
        run.limited_cpus.append(round((now[0] - before[0]) / dt, 3))
        run.unlimited_cpus.append(round((now[1] - before[1]) / dt, 3))
        before = now
    stat = _read_stat(path / "cpu.stat")
    run.nr_periods, run.nr_throttled = stat.get("nr_periods", 0), stat.get("nr_throttled", 0)
    return run


def own_cpu_limit(*, proc="/proc", cgroupfs="/sys/fs/cgroup") -> CpuLimit | None:
    """The CPU ceiling on this process's own cgroup (None where the cpu controller is not visible)."""
    entries = parse_proc_cgroup((Path(proc) / "self" / "cgroup").read_text())
    root = Path(cgroupfs)
    try:
        if cgroup_mode(root) == "v2":
            entry = next(e for e in entries if e.hierarchy == 0)
            return parse_cpu_max((own_dir(root, entry.path) / "cpu.max").read_text())
        entry = next(e for e in entries if "cpu" in e.controllers)
        d = own_dir(root / "cpu", entry.path)
        return parse_cfs((d / "cpu.cfs_quota_us").read_text(), (d / "cpu.cfs_period_us").read_text())
    except (StopIteration, OSError):
        return None


# Lab 1 question 5's limits: 150m to 900m in steps of 5m (its variant draws one); one run recorded at each.
LAB1_LIMITS = tuple(range(150, 901, 5))
LAB1_RECORDING = "cpu_throttle_lab1.json"


#: A recorded run counts as quiet where both busy loops got what an otherwise idle machine gives them: the
#: unlimited control loop at least the limit plus this much CPU (or a whole CPU less half of it), and the limited
#: loop its quota to within half of it. On a busier machine the limited loop can fall short of its quota for want
#: of a CPU, not because of the limit, and a learner would read that as the limit's doing.
QUIET_MARGIN = 0.1


def quiet(run: dict) -> bool:
    """Whether a run (:meth:`ThrottleRun.as_dict`, or a recording's entry) was made on an otherwise idle machine."""
    control = sum(run["unlimited_cpus"]) / len(run["unlimited_cpus"])
    limited = sum(run["limited_cpus"]) / len(run["limited_cpus"])
    cpus = run["limit"]["cpus"]
    return control >= min(1 - QUIET_MARGIN / 2, cpus + QUIET_MARGIN) and abs(limited - cpus) < QUIET_MARGIN / 2


def record_runs(path, limits=LAB1_LIMITS, *, seconds: float = 2.0, interval: float = 0.5, recorded_at: str = "",
                attempts: int = 5, earlier=()) -> Path:
    """Run Lab 1's live cell's experiment (``source(m, seconds=…, interval=…).run``, the call the cell makes
    where it may) at each limit of ``limits`` and write the runs as one recording at ``path`` (never
    overwritten), with the machine, the date and the call that made them. Needs root, like the cell.

    A limit whose run was not :func:`quiet` (a loop got less than an idle machine gives it) is run again, at most
    ``attempts`` times; the last run is kept and its limit listed under ``not_quiet``. ``earlier``: paths of
    recordings this function wrote on the same machine, whose quiet runs are kept as they are."""
    kept = {}
    for one in earlier:
        old = recorded.read(one, "")
        if old.get("recorded_on") == recorded.machine_note():
            kept.update({r["milli_cpu"]: r for r in old["runs"] if quiet(r)})
    runs, noisy = [], []
    for milli in limits:
        run = kept.get(milli)
        for _ in range(attempts if run is None else 0):
            run = source(milli, seconds=seconds, interval=interval).run().as_dict()
            if quiet(run):
                break
        else:
            if milli not in kept:
                noisy.append(milli)
        for k in ("mean_limited", "mean_unlimited", "recorded", "recorded_on", "recorded_at"):
            run.pop(k, None)
        runs.append(run)
    head = {"recorded_on": recorded.machine_note(), "recorded_at": recorded_at,
            "made_by": f"courselib.live.cpu.source(milli_cpu, seconds={seconds:g}, interval={interval:g}).run()",
            "quiet_margin": QUIET_MARGIN, "not_quiet": noisy}
    return recorded.write(path, {**head, "runs": runs}, rows="runs")


def _lab1_runs() -> tuple[dict, list[dict]]:
    data = recorded.load(LAB1_RECORDING)
    return data, data["runs"]


def recorded_run(milli_cpu: int | None = None) -> ThrottleRun:
    """The run recorded on the course's CI machine under ``milli_cpu``: the run recorded at that limit with
    the call Lab 1's and chapter 2's cells make (``cpu_throttle_lab1.json``: one for each of 150m to 900m in
    steps of 5m), else the one whose limit is nearest (the lower of two); with no limit, chapter 2's first
    250m run (``cpu_throttle.json``). ``run.milli_cpu`` is the limit it was recorded under: a caller that
    asked for another says what differs."""
    if milli_cpu is None:
        data = recorded.load("cpu_throttle.json")
        recorded_at = ""
    else:
        table, runs = _lab1_runs()
        data = dict(min(runs, key=lambda r: (abs(r["milli_cpu"] - milli_cpu), r["milli_cpu"])),
                    recorded_on=table["recorded_on"])
        recorded_at = table.get("recorded_at", "")
    for k in ("mean_limited", "mean_unlimited", "recorded"):
        data.pop(k, None)
    run = ThrottleRun(**data)
    run.recorded = True
    run.recorded_at = recorded_at
    return run


def source(milli_cpu: int = 250, **kw) -> recorded.Source[ThrottleRun]:
    """A busy loop under a CPU limit of ``milli_cpu``, live where permitted (``kw``: of
    :func:`run_throttle`), else the run recorded under that limit, or the nearest recorded one where none
    was (:func:`recorded_run`; :func:`courselib.live.recorded.live_or_recorded`)."""
    def recording() -> recorded.Recording[ThrottleRun]:
        run = recorded_run(milli_cpu)
        return recorded.Recording(run, run.recorded_on, run.recorded_at)
    return recorded.Source(lambda: run_throttle(milli_cpu, **kw), recording)
