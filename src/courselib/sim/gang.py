"""The mini gang scheduler in time (simpy): arrivals, scheduling cycles, the barrier, completion.

Public API (stable; the Slurm replay of issue 7 compares against it)::

    simulate(workload, policy, horizon=None, seed=0, **policy_options) -> Result

``policy`` is ``kube-default``, ``volcano``, ``kueue`` or ``slurm`` (options: see each module in
``courselib.model.policies``). The result holds, per job (:class:`JobResult`): ``submit``,
``first_bound`` (first pod bound), ``start`` (training began: ``min_member`` ranks placed, the
NCCL init barrier passed), ``end``, ``state`` (PENDING, HOLDING, RUNNING, COMPLETED, TIMEOUT),
``gpus_held_max``, ``gpus_held`` (at the end), ``wasted_gpu_hours`` (GPUs held while not
training) and ``pending_reason`` (for ``slurm``: ``Resources``, ``Priority``,
``PartitionNodeLimit``, ``BadConstraints``); overall ``utilisation`` (training GPU-time /
all GPU-time in the window), ``wasted_gpu_hours``, mean/p95 wait (start − submit) and JCT
(end − submit), ``deadlock``; and ``trace``, the concrete allocation sequence as
:class:`~courselib.model.gang.TraceEvent` (time, job, what, held).

**Deadlock** means: the event queue is empty — nothing can ever change — and some job holds
GPUs without training. Without a ``horizon`` the run stops when nothing is left to happen or
at the default horizon, ``last submit + max(1 day, 2 × Σ durations)``; a deadlocked cluster's
held GPUs count as wasted up to that horizon (GPUs held forever would be infinite waste).

Processes read like the story: :func:`arrivals` (jobs submitted at one instant arrive
together), :func:`scheduler` (one cycle after everything else at that instant),
:func:`train` (the barrier has passed: train for the remaining time, or until preempted).
Everything is deterministic: no wall clock, no unseeded randomness.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import groupby

import simpy

from courselib.model.gang import (COMPLETED, HOLDING, PENDING, RUNNING, TIMEOUT, JobRun, SchedState,
                                  TraceEvent, integrate, percentile, verdict)
from courselib.model.policies import Policy, make_policy
from courselib.model.workload import Workload


@dataclass(frozen=True)
class JobResult:
    name: str
    state: str
    submit: float
    first_bound: float | None
    start: float | None
    end: float | None
    gpus: int
    gpus_held_max: int
    gpus_held: int
    wasted_gpu_hours: float
    pending_reason: str | None
    restarts: int = 0
    evictions: int = 0


@dataclass(frozen=True)
class Result:
    policy: str
    horizon: float
    end_time: float
    total_gpus: int
    deadlock: bool
    utilisation: float
    wasted_gpu_hours: float
    mean_wait: float | None
    p95_wait: float | None
    mean_jct: float | None
    p95_jct: float | None
    jobs: tuple[JobResult, ...]
    trace: tuple[TraceEvent, ...]
    histories: dict = field(repr=False, default_factory=dict)  # name -> [(t, held, training)]
    verdict: str = ""

    def job(self, name: str) -> JobResult:
        return next(j for j in self.jobs if j.name == name)

    def to_dict(self, trace: bool = True) -> dict:
        """Plain data for ``--json``: the fields above, ``jobs`` as dicts, ``trace`` as dicts."""
        out = {k: getattr(self, k) for k in ("policy", "deadlock", "wasted_gpu_hours", "utilisation",
                                              "mean_wait", "p95_wait", "mean_jct", "p95_jct",
                                              "horizon", "end_time", "total_gpus", "verdict")}
        out["jobs"] = [asdict(j) for j in self.jobs]
        if trace:
            out["trace"] = [asdict(e) for e in self.trace]
        return out


class Simulation:
    """Glue between simpy's clock and a policy's decisions."""

    def __init__(self, workload: Workload, policy: Policy, check: bool = False, reference: bool = False):
        self.env = simpy.Environment()
        self.workload = workload
        self.policy = policy
        self.reference = reference
        self.state = SchedState(workload, reference=reference)
        self.check = check
        self.wake = self.env.event()
        self.training: dict[str, simpy.Process] = {}
        self.timers: set[float] = set()

    def request_cycle(self) -> None:
        if not self.wake.triggered:
            self.wake.succeed()

    def sync(self) -> None:
        self.state.now = self.env.now


def arrivals(env: simpy.Environment, sim: Simulation):
    """Jobs submitted at the same instant arrive together (their pods are created round-robin)."""
    jobs = sorted(sim.workload.jobs, key=lambda j: j.submit)
    for t, batch in groupby(jobs, key=lambda j: j.submit):
        yield env.timeout(t - env.now)
        sim.sync()
        runs = [sim.state.submit(job) for job in batch]
        sim.policy.submit(sim.state, runs)
        sim.request_cycle()


def scheduler(env: simpy.Environment, sim: Simulation):
    """Wait for a change; let everything else at this instant happen; run one cycle."""
    while True:
        yield sim.wake
        sim.wake = env.event()
        yield env.timeout(0)
        sim.sync()
        for t in sim.policy.schedule(sim.state):
            if t > env.now and t not in sim.timers:
                sim.timers.add(t)
                env.process(timer(env, sim, t))
        sim.state.flush_binds()
        for run in sim.state.stopped:
            proc = sim.training.pop(run.name, None)
            if proc is not None and proc.is_alive:
                proc.interrupt("preempted")
        sim.state.stopped.clear()
        for run in (sim.state.active() if sim.reference else sim.state.take_touched()):
            if run.state in (PENDING, HOLDING) and sim.state.bound(run) >= run.job.min_member:
                barrier_passed(sim, run)
        if sim.check:
            sim.state.check()


def timer(env: simpy.Environment, sim: Simulation, t: float):
    yield env.timeout(t - env.now)
    sim.timers.discard(t)
    sim.request_cycle()


def barrier_passed(sim: Simulation, run: JobRun) -> None:
    """``min_member`` ranks are placed: NCCL init returns on every rank and training begins."""
    state = sim.state
    run.state = RUNNING
    if run.start is None:
        run.start = state.now
    state.log(run.name, f"barrier passed: training on {state.held(run)} GPUs")
    state.note(run)
    sim.training[run.name] = sim.env.process(train(sim.env, sim, run))


def train(env: simpy.Environment, sim: Simulation, run: JobRun):
    """Every placed rank trains until the job is done (or until it loses a rank)."""
    state = sim.state
    limit = run.job.time_limit if sim.policy.enforces_time_limit else None
    span = run.remaining if limit is None else min(run.remaining, limit - (env.now - run.start))
    began = env.now
    try:
        yield env.timeout(max(0.0, span))
    except simpy.Interrupt:
        return  # SchedState.stop_training already reset the run
    sim.sync()
    run.remaining -= env.now - began
    run.end = env.now
    run.state = COMPLETED if run.remaining <= 1e-9 else TIMEOUT
    sim.training.pop(run.name, None)
    state.release(run, "completed" if run.state == COMPLETED else "TIMEOUT at --time limit")
    sim.policy.on_finish(state, run)
    sim.request_cycle()


def default_horizon(workload: Workload) -> float:
    last = max((j.submit for j in workload.jobs), default=0.0)
    return last + max(86400.0, 2 * sum(j.duration for j in workload.jobs))


def simulate(workload: Workload, policy: str, horizon: float | None = None, seed: int = 0,
             check: bool = False, reference: bool = False, **policy_options) -> Result:
    """Run ``workload`` under ``policy`` until nothing can change or ``horizon`` (seconds).

    ``reference=True`` runs the straightforward path (every cycle rescans every job and pod) that
    the default fast path (incremental indexes and counters) must reproduce exactly: same trace,
    same per-job results (``tests/test_gang_fastpath.py``). It is slower, never different.
    """
    pol = make_policy(policy, workload, seed=seed, **policy_options)
    pol.reference = reference
    sim = Simulation(workload, pol, check=check, reference=reference)
    env = sim.env
    env.process(arrivals(env, sim))
    env.process(scheduler(env, sim))
    h = default_horizon(workload) if horizon is None else float(horizon)
    while env.peek() <= h:  # step, so that "nothing left to happen" is visible afterwards
        env.step()
    quiescent = env.peek() == float("inf")
    state = sim.state
    state.now = env.now if quiescent else h
    runs = list(state.runs.values())
    deadlock = quiescent and any(r.state == HOLDING and state.held(r) > 0 for r in runs)
    # the accounting window: to the last event, but a deadlock holds its GPUs until the horizon
    last_event = max([e.time for e in state.trace] + [0.0])
    end_time = h if (deadlock or not quiescent) else last_event
    return _result(pol.name, state, runs, h, end_time, deadlock)


def _result(policy: str, state: SchedState, runs: list[JobRun], horizon: float, end_time: float,
            deadlock: bool) -> Result:
    jobs, train_total, idle_total = [], 0.0, 0.0
    for r in runs:
        tr, idle = integrate(r.history, end_time)
        train_total += tr
        idle_total += idle
        jobs.append(JobResult(r.name, r.state, r.job.submit, r.first_bound, r.start, r.end, r.job.gpus,
                              r.gpus_held_max, state.held(r), idle / 3600.0,
                              None if r.finished or r.state == RUNNING else r.pending_reason,
                              r.restarts, r.evictions))
    t0 = min((r.job.submit for r in runs), default=0.0)
    window = max(0.0, end_time - t0) * state.cluster.total_gpus
    waits = [r.start - r.job.submit for r in runs if r.start is not None]
    jcts = [r.end - r.job.submit for r in runs if r.end is not None]
    wasted = idle_total / 3600.0
    rows = [{"name": j.name, "start": j.start, "gpus_held": j.gpus_held} for j in jobs]
    return Result(policy, horizon, end_time, state.cluster.total_gpus, deadlock,
                  train_total / window if window else 0.0, wasted,
                  sum(waits) / len(waits) if waits else None, percentile(waits, 95),
                  sum(jcts) / len(jcts) if jcts else None, percentile(jcts, 95),
                  tuple(jobs), tuple(state.trace), {r.name: list(r.history) for r in runs},
                  verdict(policy, rows, deadlock, wasted))

