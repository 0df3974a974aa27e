"""What a Slurm replay submits: the workload's jobs as ``sbatch`` lines, scaled to run in seconds.

**Time scaling.** ``--time`` has a resolution of one minute (FACTS §3.4), and backfill plans
with time limits, so the limits keep their exact proportions: one ``--time`` minute stands for
``unit`` seconds of the workload, the greatest common divisor of the jobs' limits. The jobs
themselves only ``sleep`` — ``seconds_per_minute`` real seconds per ``unit`` of duration (and
of submit time) — so a replay takes seconds, and jobs end well before their limits. The model
is run on the workload *as submitted* (durations in real seconds, limits in ``--time`` minutes
× 60, submit times as measured), the very input the real scheduler saw.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from courselib.errors import InputError
from courselib.live.nodes import features_for
from courselib.live.slurm.cluster import PARTITION, ClusterShape
from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.units import format_duration as _fmt_s

MIN_SLEEP = 2.0  # s: the shortest job, so ~1 s of scheduler latency cannot reorder events
MIN_SUBMIT_GAP = 1.0  # s: between distinct submit times, for the same reason
MAX_JOB_SLEEP = 30.0  # s: the longest job, when spreading submit times would need more
MAX_MINUTES = 1440  # bf_window's default: every reservation must fall inside it


@dataclass(frozen=True)
class Submission:
    """One job as it goes to ``sbatch``: the arguments and the scaled times."""
    name: str
    args: tuple[str, ...]
    time_minutes: int
    sleep: float
    submit_at: float
    priority: int | None


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay submits, and the workload the model must be given to see the same."""
    workload: Workload
    as_submitted: Workload
    shape: ClusterShape
    unit: float  # workload seconds per --time minute
    seconds_per_minute: float  # real seconds of sleep per --time minute of duration
    submissions: tuple[Submission, ...]
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        return (f"1 --time minute = {_fmt_s(self.unit)} of the workload; jobs sleep "
                f"{self.seconds_per_minute:g} s per such minute "
                f"(x{self.unit / self.seconds_per_minute:g} faster than the workload)")


def shape_for(spec: ClusterSpec, base_port: int | None = None) -> ClusterShape:
    """The local cluster that emulates ``spec``: same nodes, GPUs and per-node features."""
    kw = {} if base_port is None else {"base_port": base_port}
    topo = {"topology": spec.topology, "topology_plugin": spec.slurm_topology,
            "block_sizes": spec.block_sizes} if spec.topology else {}
    return ClusterShape(nodes=spec.nodes, gpus_per_node=spec.gpus_per_node, features=features_for(spec),
                        **kw, **topo)


def topology_args(spec: ClusterSpec, job: Job, wait: int | None = None,
                  max_switch_wait: float = 300.0) -> list[str]:
    """What a job asks of the topology plugin: ``--switches=N@WAIT`` for a job that requires the
    innermost level under topology/tree (N its ``max_domains``, default 1; WAIT ``wait``, its own
    wait in real seconds as ``minutes:seconds``, else the model's ``max_switch_wait`` in whole
    minutes), ``--segment=N`` under topology/block. A request above the leaves has no Slurm form
    under tree, nor any level under block: every job is placed by the plugin."""
    if not spec.topology:
        return []
    if spec.slurm_topology == "block":
        return [f"--segment={job.segment}"] if job.segment else []
    if job.topology and job.topology[0] == "required" and job.topology[1] == spec.levels[-1]:
        at = f"{wait // 60}:{wait % 60:02d}" if wait is not None else f"{int(max_switch_wait // 60)}"
        return [f"--switches={job.max_domains or 1}@{at}"]
    return []


def model_order(jobs) -> list[Job]:
    """Slurm's priority order as the model uses it: priority, then submit time, then listing."""
    indexed = list(enumerate(jobs))
    indexed.sort(key=lambda p: (-p[1].priority, p[1].submit, p[0]))
    return [j for _, j in indexed]


def plan_replay(workload: Workload, *, seconds_per_minute: float | None = None,
                file: str | None = None) -> ReplayPlan:
    """Scale ``workload`` for a real replay (see the module docstring) and build the sbatch lines."""
    jobs = workload.jobs
    notes = []
    limits = [Fraction(j.planned_runtime).limit_denominator(1000) for j in jobs]
    if any(lim <= 0 for lim in limits):
        raise InputError("every job needs a duration or time_limit above 0", file=file)
    unit = limits[0]
    for lim in limits[1:]:
        unit = Fraction(math.gcd(unit.numerator * lim.denominator, lim.numerator * unit.denominator),
                        unit.denominator * lim.denominator)
    minutes = [int(lim / unit) for lim in limits]
    if sum(minutes) > MAX_MINUTES:
        # Proportions cannot all be kept inside one bf_window: round to a coarser unit.
        unit = Fraction(math.ceil(sum(limits) / MAX_MINUTES))
        minutes = [max(1, round(lim / unit)) for lim in limits]
        notes.append(f"time limits rounded to whole multiples of {_fmt_s(float(unit))}")
    unit_f = float(unit)
    durations = [j.duration / unit_f for j in jobs]  # in --time minutes
    positive = [d for d in durations if d > 0]
    submits = sorted({j.submit / unit_f for j in jobs})
    gaps = [b - a for a, b in zip(submits, submits[1:]) if b > a]
    if seconds_per_minute is None:
        shortest = min(positive) if positive else 1.0
        longest = max(positive) if positive else 1.0
        seconds_per_minute = min(60.0, max(0.25, MIN_SLEEP / shortest))
        if gaps:
            spread = MIN_SUBMIT_GAP / min(gaps)
            if spread > seconds_per_minute and longest * spread <= MAX_JOB_SLEEP:
                seconds_per_minute = min(60.0, spread)
    if seconds_per_minute <= 0 or seconds_per_minute > 60:
        raise InputError(f"{seconds_per_minute:g} seconds per minute: choose more than 0 and at most 60",
                         field="--seconds-per-minute", hint="60 replays in real time")
    s = float(seconds_per_minute)
    if gaps and min(gaps) * s < MIN_SUBMIT_GAP:
        notes.append(f"submit times {_fmt_s(min(gaps) * unit_f)} apart are {min(gaps) * s:.2f} s "
                     "apart in the replay: those jobs reach the scheduler almost together")
    if positive and min(positive) * s < 1.0:
        notes.append(f"the shortest job sleeps {min(positive) * s:.2f} s: scheduler latency "
                     "(about 1 s) may reorder events; raise --seconds-per-minute")
    order = model_order(jobs)
    explicit = any(j.priority for j in jobs)
    prio = {j.name: 1_000_000 - 10 * k for k, j in enumerate(order)} if explicit else {}
    gpn = workload.cluster.gpus_per_node
    subs = []
    for j, tmin, d in zip(jobs, minutes, durations):
        args = ["-J", j.name, "-p", PARTITION, f"--time={tmin}", "--cpus-per-task=1"]
        if j.gpus_per_pod == gpn and gpn > 0:
            # a pod per whole node: the seed's `--nodes=N --gpus-per-node=8` shape
            args += [f"--nodes={j.pods}", "--ntasks-per-node=1", f"--gpus-per-node={gpn}"]
        else:
            args += [f"--ntasks={j.pods}"]
            if j.gpus_per_pod:
                args += [f"--gpus-per-task={j.gpus_per_pod}"]
        if j.constraint:
            args += [f"--constraint={j.constraint}"]
        if j.exclusive:
            args += ["--exclusive"]
        wait = None if j.topology_wait is None else round(j.topology_wait / unit_f * s)
        args += topology_args(workload.cluster, j, wait)
        if explicit:
            args += [f"--priority={prio[j.name]}"]
        subs.append(Submission(j.name, tuple(args), tmin, round(d * s, 3),
                               round(j.submit / unit_f * s, 3), prio.get(j.name)))
    if any(j.memory_per_pod for j in jobs) or workload.cluster.memory_per_node:
        notes.append("memory is not replayed (the local Slurm counts CPUs and GPUs only)")
    if any(j.min_member != j.pods for j in jobs):
        notes.append("min_member < pods is not a Slurm notion: Slurm allocates every task")
    as_submitted = workload.replace_jobs(
        replace(j, duration=sub.sleep, submit=sub.submit_at, time_limit=sub.time_minutes * 60.0,
                topology_wait=None if j.topology_wait is None else float(round(j.topology_wait / unit_f * s)))
        for j, sub in zip(jobs, subs))
    return ReplayPlan(workload, as_submitted, shape_for(workload.cluster), unit_f, s,
                      tuple(subs), tuple(notes))
