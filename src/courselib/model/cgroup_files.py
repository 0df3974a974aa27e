"""The same knob under cgroup v1 and v2: one table, used by the chapters, the live readers and the tests.

Sources: Documentation/admin-guide/cgroup-v2.rst (v2 names and semantics) and
Documentation/admin-guide/cgroup-v1/memory.rst, cgroup-v1/cpu bandwidth (sched-bwc.rst) for v1.
Where the two are not the same knob, ``note`` says how they differ.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Knob:
    what: str
    v1: str
    v2: str
    note: str = ""


KNOBS: tuple[Knob, ...] = (
    Knob("processes in the cgroup", "cgroup.procs (tasks: threads)", "cgroup.procs", ""),
    Knob("memory hard limit", "memory.limit_in_bytes", "memory.max",
         "reaching it and failing to reclaim invokes the OOM killer inside the cgroup"),
    Knob("memory throttle limit", "(none; memory.soft_limit_in_bytes is only a reclaim target)", "memory.high",
         "v2 throttles and reclaims above memory.high and never OOM-kills for it"),
    Knob("memory in use", "memory.usage_in_bytes", "memory.current", ""),
    Knob("swap limit", "memory.memsw.limit_in_bytes (memory + swap together)", "memory.swap.max (swap alone)",
         "v1 limits the sum, v2 limits swap on its own"),
    Knob("OOM kills counted", "memory.oom_control (oom_kill line)", "memory.events (oom, oom_kill, oom_group_kill)", ""),
    Knob("kill the whole group on OOM", "(none)", "memory.oom.group", "cgroup v2 only"),
    Knob("CPU hard ceiling", "cpu.cfs_quota_us + cpu.cfs_period_us", "cpu.max (\"QUOTA PERIOD\")",
         "quota microseconds of CPU time per period, summed over all CPUs"),
    Knob("CPU share under contention", "cpu.shares (2..262144, default 1024)", "cpu.weight (1..10000, default 100)",
         "relative only: it matters when CPUs are contended, never as a ceiling"),
    Knob("CPU throttling counters", "cpu.stat (nr_periods, nr_throttled, throttled_time ns)",
         "cpu.stat (nr_periods, nr_throttled, throttled_usec)", ""),
    Knob("block I/O limit", "blkio.throttle.read_bps_device / write_bps_device / *_iops_device", "io.max",
         "per device, MAJ:MIN"),
    Knob("process count limit", "pids.max", "pids.max", ""),
)


def knob(what: str) -> Knob:
    for k in KNOBS:
        if k.what == what:
            return k
    raise KeyError(what)
