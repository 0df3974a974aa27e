"""A real cluster trace replayed under the gang policies: what partial allocation costs, and what
each scheduler buys, on a workload nobody made up.

:func:`replay` turns a trace (``courselib.io.traces.read_trace``) into gangs with
:func:`~courselib.io.traces.trace_to_jobs` — **the rule**: a job of G GPUs on nodes of N GPUs
is one pod of G GPUs if G ≤ N, else the fewest equal pods that each fit a node (48 GPUs on
8-GPU nodes: 6 pods × 8); a shared fraction (``gpu_milli`` 460) rounds up to one GPU;
processors count as GPUs where a trace has no GPU column — then simulates them with
:func:`courselib.sim.gang.simulate` and summarises the run as a scheduling paper reports one:
GPU-hours held idle at the barrier, deadlock, queueing delay (submit → training starts) and
job completion time (submit → end) as mean, p50, p90 and p99, utilisation, and the same per
gang-size bucket. :func:`idle_over_time` gives the idle GPU-hours accumulated over time (the
figure), :func:`waits` the queueing delays (their CDF).

**The cluster.** ``cluster=(nodes, gpus_per_node)``; by default :func:`default_cluster` sizes
it to 0.8 of the trace's peak demand (the most GPUs in use at once had every job started at its
submission): the jobs contend at the busiest times, and the largest job fits.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from courselib.errors import InputError
from courselib.io.policy import check_count
from courselib.io.traces import read_trace, trace_to_jobs
from courselib.model.gang import percentile
from courselib.model.policies import policy_names
from courselib.model.workload import ClusterSpec, Workload, topology_problem

#: gang-size buckets (GPUs of the whole job), as cluster-trace studies group jobs
BUCKETS = ((1, 1), (2, 8), (9, 64), (65, 512), (513, math.inf))
TARGET_LOAD = 0.8


@dataclass(frozen=True)
class TraceReplay:
    """One trace under one policy: the run (:class:`courselib.sim.gang.Result`) and its summary."""

    file: str | None
    format: str
    policy: str
    nodes: int
    gpus_per_node: int
    cluster_rule: str
    jobs_in_trace: int
    result: object  # courselib.sim.gang.Result
    topology: tuple = ()          # ((level, size), ...) given with --topology
    topology_text: str = ""       # the --topology SPEC as given

    def summary(self) -> dict:
        """The paper's table for this run (seconds for times, GPU-hours for waste)."""
        r = self.result
        jobs = r.jobs
        out = {"file": self.file, "format": self.format, "policy": self.policy,
               "cluster": f"{self.nodes}x{self.gpus_per_node}", "cluster_rule": self.cluster_rule,
               "jobs_in_trace": self.jobs_in_trace, "jobs": len(jobs),
               "deadlock": r.deadlock, "idle_gpu_hours": round(r.wasted_gpu_hours, 3),
               "utilisation": round(r.utilisation, 4),
               "never_started": sum(1 for j in jobs if j.start is None),
               "queueing_delay_s": _dist([j.start - j.submit for j in jobs if j.start is not None]),
               "jct_s": _dist([j.end - j.submit for j in jobs if j.end is not None])}
        rows = []
        for lo, hi in BUCKETS:
            mine = [j for j in jobs if lo <= j.gpus <= hi]
            if not mine:
                continue
            rows.append({"gpus": f"{lo}" if lo == hi else (f"{lo}+" if hi == math.inf else f"{lo}-{hi}"),
                         "jobs": len(mine), "never_started": sum(1 for j in mine if j.start is None),
                         "queueing_delay_s": _dist([j.start - j.submit for j in mine if j.start is not None]),
                         "idle_gpu_hours": round(sum(j.wasted_gpu_hours for j in mine), 3)})
        out["by_gang_size"] = rows
        levels = [level for level, _ in self.topology]
        if levels:   # how many started jobs landed in more than one domain of each level
            started = [j for j in jobs if j.domains]
            out["topology"] = {"levels": self.topology_text,
                               "spanning": {level: sum(len(j.domains[level]) > 1 for j in started)
                                            for level in levels},
                               "started": len(started)}
        return out


def _dist(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None}
    return {"n": len(values), "mean": round(sum(values) / len(values), 3),
            **{f"p{p}": percentile(values, p) for p in (50, 90, 99)}}


def default_cluster(jobs, gpus_per_node: int = 8) -> tuple[int, str]:
    """Nodes of ``gpus_per_node`` GPUs holding 0.8 of the trace's peak demand (the most GPUs in
    use at once had every job run from its submission), and at least the largest job."""
    events = sorted([(j.submit, j.gpus) for j in jobs] + [(j.submit + j.duration, -j.gpus) for j in jobs],
                    key=lambda e: (e[0], e[1]))
    peak = used = 0
    for _, d in events:
        used += d
        peak = max(peak, used)
    biggest = max(j.gpus for j in jobs)
    nodes = max(1, math.ceil(max(TARGET_LOAD * peak, biggest) / gpus_per_node))
    return nodes, (f"{TARGET_LOAD:g} of the trace's peak demand of {peak:,} GPUs (every job run from "
                   f"its submission), at least its largest job ({biggest} GPUs)")


def parse_cluster(text: str) -> tuple[int, int]:
    """``NODESxGPUS`` (``64x8``) → ``(64, 8)``."""
    parts = str(text).lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise InputError(f"--cluster {text!r} is not NODESxGPUS", field="--cluster",
                         hint="e.g. --cluster 64x8 (64 nodes of 8 GPUs)")
    nodes, gpus = (int(p) for p in parts)
    if nodes < 1 or gpus < 1:
        raise InputError(f"--cluster {text!r}: nodes and GPUs per node must be at least 1",
                         field="--cluster")
    return nodes, gpus


def parse_topology(text: str) -> tuple[tuple, tuple | None]:
    """``rack:8,block:4[@required:block]`` → (``(("rack", 8), ("block", 4))``, ``("required",
    "block")`` or None): the levels outermost first, and the request every job of the trace makes."""
    levels_text, _, request_text = str(text).partition("@")
    levels = []
    for part in levels_text.split(","):
        name, _, size = part.strip().partition(":")
        if not name or not size.strip().isdigit():
            raise InputError(f"{text!r}: {part.strip()!r} is not LEVEL:SIZE", field="--topology",
                             hint="e.g. --topology spine:64,rack:8@preferred:rack (outermost first)")
        check_count("nodes", int(size), field="--topology")
        levels.append((name.strip(), int(size)))
    request = None
    if request_text:
        mode, _, level = request_text.strip().partition(":")
        if mode not in ("required", "preferred") or level not in [n for n, _ in levels]:
            raise InputError(f"{text!r}: {request_text!r} is not required:LEVEL or preferred:LEVEL "
                             "of the levels given", field="--topology", hint="e.g. @preferred:rack")
        request = (mode, level)
    problem = topology_problem(levels[0][1], levels) if levels else "no levels"
    if problem:
        raise InputError(f"{text!r}: {problem}", field="--topology",
                         hint="list levels outermost first, each size dividing the one before")
    return tuple(levels), request


def workload_of(reading, cluster: tuple[int, int] | None = None, limit: int | None = None,
                topology: tuple[tuple, tuple | None] | None = None):
    """(the trace as a :class:`~courselib.model.workload.Workload`, nodes, GPUs/node, rule).
    ``topology`` (:func:`parse_topology`): the cluster gets those levels (its nodes rounded up to
    whole outermost domains) and every job the request."""
    if limit is not None and limit < 1:
        raise InputError(f"--limit {limit}: replay at least one job", field="--limit")
    gpn = cluster[1] if cluster else 8
    jobs = trace_to_jobs(reading, gpus_per_node=gpn, limit=limit)
    if not jobs:
        raise InputError("no job of this trace asks for a GPU and has a run time", file=reading.file)
    if cluster:
        nodes, rule = cluster[0], "given (--cluster)"
    else:
        nodes, rule = default_cluster(jobs, gpn)
    if not topology:
        return Workload(ClusterSpec(nodes, gpn), jobs), nodes, gpn, rule
    levels, request = topology
    top = levels[0][1]
    if nodes % top:
        if cluster:
            raise InputError(f"--topology: the outermost level's {top} nodes do not divide --cluster's {nodes}",
                             field="--topology", hint=f"give a cluster of a multiple of {top} nodes")
        nodes, rule = -(-nodes // top) * top, rule + f", rounded up to whole {levels[0][0]}s of {top} nodes"
        check_count("nodes", nodes, field="--topology")
    if request is not None:
        jobs = [replace(j, topology=request) for j in jobs]
    return Workload(ClusterSpec(nodes, gpn, topology=levels), jobs), nodes, gpn, rule


def replay(reading, policy: str, cluster: tuple[int, int] | None = None, limit: int | None = None,
           progress=None, topology: str | None = None, **policy_options) -> TraceReplay:
    """Replay ``reading`` (a :class:`~courselib.io.traces.TraceReading`) under ``policy``;
    ``topology``: a ``--topology`` SPEC (:func:`parse_topology`)."""
    from courselib.sim.gang import simulate

    topo = parse_topology(topology) if topology else None
    w, nodes, gpn, rule = workload_of(reading, cluster, limit, topo)
    r = simulate(w, policy, progress=progress, **policy_options)
    return TraceReplay(reading.file, reading.format, policy, nodes, gpn, rule, len(reading.jobs), r,
                       topo[0] if topo else (), topology or "")


def waits(result) -> list[float]:
    """Queueing delays (s) of the jobs that started training, sorted (for a CDF)."""
    return sorted(j.start - j.submit for j in result.jobs if j.start is not None)


def idle_over_time(result) -> tuple[list[float], list[float]]:
    """(times in s, GPU-hours held idle at the barrier so far): a step series from the jobs'
    held-GPU histories (``Result.histories``), up to the run's accounting window."""
    deltas: dict[float, float] = {}  # time -> change in GPUs held idle
    end = result.end_time
    for hist in result.histories.values():
        for (t, held, training), nxt in zip(hist, list(hist[1:]) + [(end, 0, False)]):
            if training or not held or t >= end:
                continue
            deltas[t] = deltas.get(t, 0) + held
            t1 = min(nxt[0], end)
            deltas[t1] = deltas.get(t1, 0) - held
    times, total, idle, last = [0.0], [0.0], 0.0, 0.0
    acc = 0.0
    for t in sorted(deltas):
        acc += idle * (t - last) / 3600
        idle += deltas[t]
        last = t
        times.append(t)
        total.append(acc)
    if last < end:
        times.append(end)
        total.append(acc + idle * (end - last) / 3600)
    return times, total


def series(result) -> dict:
    """What the figure draws, as plain data (for a recorded run): the sorted queueing delays, the
    number of jobs, and the idle GPU-hours over time."""
    t, idle = idle_over_time(result)
    return {"jobs": len(result.jobs), "waits": waits(result), "idle_t": t, "idle": idle}


CHAPTER_TRACE = "erangvee__slurm_sim_vanilla__slurm_sim_tools__tutorials__micro_cluster__test_trace.csv"


def chapter_comparison(name: str = CHAPTER_TRACE) -> tuple[list[dict], dict, bool]:
    """(summary rows, figure series, live?) for chapter 9: every policy replaying the corpus trace
    ``name`` when ``../shared/corpus/traces`` is there (from a chapter or the repository root),
    else the recorded run of the same code that courselib ships (``data/recorded``)."""

    for base in (Path("..") / ".." / "shared", Path("..") / "shared"):
        path = base / "corpus" / "traces" / name
        if path.is_file():
            reading = read_trace(path)
            reps = {p: replay(reading, p) for p in policy_names()}
            return [r.summary() for r in reps.values()], {p: series(r.result) for p, r in reps.items()}, True
    rec = json.loads(resources.files("courselib.data").joinpath("recorded", RECORDED).read_text())
    return rec["rows"], rec["series"], False


RECORDED = "trace-replay-slurm-sim.json"


def record_chapter_comparison(corpus_traces, out) -> None:
    """Write the recorded run that :func:`chapter_comparison` falls back to (run from the repository
    root: ``python -c "from courselib.sim.traces import *; record_chapter_comparison(
    '../shared/corpus/traces', 'src/courselib/data/recorded/trace-replay-slurm-sim.json')"``)."""

    reading = read_trace(Path(corpus_traces) / CHAPTER_TRACE)
    rows, ser = [], {}
    for p in policy_names():
        rep = replay(reading, p)
        row = rep.summary()
        row["file"] = f"../shared/corpus/traces/{CHAPTER_TRACE}"
        rows.append(row)
        ser[p] = series(rep.result)
    Path(out).write_text(json.dumps({"recorded_by": "courselib.sim.traces.record_chapter_comparison",
                                     "rows": rows, "series": ser}, separators=(",", ":")) + "\n")
