"""A gang's life in the scheduler, and what it cost: per-job state, the trace, the metrics.

A job trains only when ``min_member`` of its ranks are placed — ``ncclCommInitRank``
"implicitly syncronizes with other ranks" (FACTS §4.1, NVIDIA/nccl ``src/nccl.h.in``
L180–186) — so GPUs a job holds before that are *wasted*: ``wasted GPU-hours = Σ GPUs held ×
time held without training`` (DESIGN §3, the cost calculator's N_allocated × T_wait).

Policies (``courselib.model.policies``) change a :class:`SchedState` through its methods
(:meth:`SchedState.bind`, :meth:`SchedState.release`, :meth:`SchedState.log`), so every GPU
that moves is recorded once, in the trace and in the job's held-GPU history.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field

from courselib.model.cluster import Cluster
from courselib.model.workload import Job, Workload

PENDING, HOLDING, RUNNING, COMPLETED, TIMEOUT = "PENDING", "HOLDING", "RUNNING", "COMPLETED", "TIMEOUT"
FAILED = "FAILED"   # a batch/v1 Job past its backoffLimit, or a JobSet that failed (model.jobset)
#: why a running job lost a pod (SchedState.lose_pod)
PREEMPTED, POD_FAILED = "preempted", "failed"


@dataclass(frozen=True, slots=True)  # slots: a run of 100,000 jobs logs millions of these
class TraceEvent:
    """One line of the allocation sequence: at ``time`` (s), ``job`` ``what``; ``held`` GPUs after."""

    time: float
    job: str
    what: str
    held: int = 0


@dataclass(frozen=True, slots=True)
class Bind:
    """One bind as the policy made it: at ``time``, ``pods`` pods of ``job`` (on ``node``, when the
    policy bound one pod to a chosen node; ``None`` for a placement the model makes in one go),
    after which the job has ``placed`` pods bound and holds ``held`` GPUs."""

    time: float
    job: str
    pods: int
    node: str | None
    placed: int
    held: int


@dataclass(frozen=True)
class BindGroup:
    """The binds behind the trace's ``bound k pods`` lines ``first`` to ``first + lines - 1`` (one
    line per job per scheduling cycle, :meth:`SchedState.flush_binds`), in the order they were made."""

    first: int
    lines: int
    binds: tuple


@dataclass
class JobRun:
    """The scheduler's view of one job while the simulation runs."""

    job: Job
    seq: int
    state: str = PENDING
    eligible_at: float = 0.0
    first_bound: float | None = None
    start: float | None = None
    end: float | None = None
    remaining: float = 0.0
    gpus_held_max: int = 0
    pending_reason: str | None = None
    reason_kind: str | None = None  # what holds it (see SchedState.set_reason)
    restarts: int = 0
    evictions: int = 0
    history: list = field(default_factory=list)  # (time, held GPUs, training?) change points
    #: pods lost while the job held them (preempted or failed), and when each recovery began and
    #: ended: [(lost at, every pod running again at or None)]
    pods_lost: int = 0
    recoveries: list = field(default_factory=list)
    end_reason: str | None = None
    #: ((node, GPUs), ...) where it first started training (a topology cluster only)
    placed: tuple = ()
    #: how much longer each step takes where it trains now (1: as the workload says; see
    #: ``courselib.model.topology.Stretch``, opt-in)
    slowdown: float = 1.0

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def finished(self) -> bool:
        return self.state in (COMPLETED, TIMEOUT, FAILED)


class SchedState:
    """The cluster plus every submitted job; the only way policies change the world."""

    def __init__(self, workload: Workload, reference: bool = False):
        self.workload = workload
        #: ``True``: the straightforward reference path (no shortcuts), which the fast path must
        #: match exactly (tests/test_gang_fastpath.py)
        self.reference = reference
        self.cluster = Cluster(workload.cluster)
        self.cluster.fast = not reference
        self.runs: dict[str, JobRun] = {}
        self.trace: list[TraceEvent] = []
        self.now = 0.0
        self._bound_this_cycle: dict[str, int] = {}
        self.stopped: list[JobRun] = []  # runs whose training the simulator must interrupt
        #: pods lost this cycle, for the simulator's controllers: (run, node, cause, by)
        self.lost: list[tuple] = []
        self.preemptions: list[tuple] = []  # (time, victim job, preempting job) per pod
        self.touched: dict[str, JobRun] = {}  # runs bound or stopped since the last barrier check
        #: pods the last place_all_or_nothing placed (all of them, or those a discarded try had)
        self.last_fit = 0
        #: runs whose pending_reason changed, for a policy that asked (set it to a list)
        self.reason_changes: list[JobRun] | None = None
        #: every bind, in order, grouped by the trace lines that sum them up (the steppers ask for
        #: them: ``simulate(..., binds=True)``; None: not recorded, a run of 100,000 jobs stays small)
        self.bind_groups: list[BindGroup] | None = None
        self._binds: list[Bind] = []

    # ---- jobs ----------------------------------------------------------------------------
    def submit(self, job: Job) -> JobRun:
        run = JobRun(job, len(self.runs), remaining=job.duration, eligible_at=job.submit)
        run.history.append((self.now, 0, False))
        self.runs[job.name] = run
        self.log(job.name, f"submitted: {job.pods} pods x {job.gpus_per_pod} GPU "
                           f"(min_member {job.min_member})")
        return run

    def active(self):
        """Submitted, unfinished runs in submission order."""
        return [r for r in self.runs.values() if not r.finished]

    def take_touched(self) -> list[JobRun]:
        """Unfinished runs bound or stopped since the last call, in submission order: the only
        ones whose barrier can have passed (every other run's bound pods did not grow)."""
        touched, self.touched = self.touched, {}
        return sorted((r for r in touched.values() if not r.finished), key=lambda r: r.seq)

    def held(self, run: JobRun) -> int:
        return self.cluster.held(run.name)

    def bound(self, run: JobRun) -> int:
        return self.cluster.bound_pods(run.name)

    # ---- changes -------------------------------------------------------------------------
    def bind(self, run: JobRun, node: int) -> None:
        self.cluster.bind(run.job, node)
        self._after_bind(run, 1, node)

    def bind_plan(self, run: JobRun, plan) -> None:
        """Bind ``k`` pods of ``run`` to node ``i`` for each ``(i, k)`` of ``plan``: what
        :meth:`bind` does pod by pod, with the bookkeeping once (the same history and trace)."""
        n = self.cluster.bind_plan(run.job, plan)
        if n:
            self._after_bind(run, n)

    def place(self, run: JobRun, count: int, *, spread: bool = False) -> int:
        n = self.cluster.place(run.job, count, spread=spread)
        if n:
            self._after_bind(run, n)
        return n

    def place_all_or_nothing(self, run: JobRun, count: int, *, spread: bool = False) -> bool:
        if not self.reference:  # fast path: a gang that cannot fit is not bound and rolled back
            fit = self.cluster.pods_that_fit(run.job)
            if fit is not None and fit < count:
                self.last_fit = fit
                return False
        ok = self.cluster.place_all_or_nothing(run.job, count, spread=spread)
        self.last_fit = self.cluster.last_fit
        if ok and count:
            self._after_bind(run, count)
        return ok

    def _after_bind(self, run: JobRun, n: int, node: int | None = None) -> None:
        if self.bind_groups is not None:
            self._binds.append(Bind(self.now, run.name, n, None if node is None else self.cluster.nodes[node].name,
                                    self.bound(run), self.held(run)))
        if run.first_bound is None:
            run.first_bound = self.now
        self._bound_this_cycle[run.name] = self._bound_this_cycle.get(run.name, 0) + n
        self.touched[run.name] = run
        self.note(run)

    def release(self, run: JobRun, why: str) -> int:
        freed = self.cluster.release(run.name)
        if freed or why:
            self.log(run.name, f"{why}: released {freed} GPUs")
        self.note(run)
        return freed

    def note(self, run: JobRun) -> None:
        """Record the job's held GPUs / training status after a change (for metrics and plots)."""
        held = self.held(run)
        run.gpus_held_max = max(run.gpus_held_max, held)
        training = run.state == RUNNING
        if run.state == PENDING and held:
            run.state = HOLDING
        elif run.state == HOLDING and not held:
            run.state = PENDING
        last = run.history[-1]
        if (last[1], last[2]) != (held, training):
            if last[0] == self.now:
                run.history[-1] = (self.now, held, training)
            else:
                run.history.append((self.now, held, training))

    def set_reason(self, run: JobRun, reason: str | None, kind: str | None = None) -> None:
        """Set why ``run`` waits; the trace records each change (not every cycle's repeat).

        ``kind`` names what holds the job when the text also restates the cluster's momentary
        state (Kueue's "k more needed", the pods a gang would place now, which Volcano plugin
        refused it at enqueue): while the kind stays the same, the reason keeps the text it was
        given when the job began to wait for that cause, and the trace gets no new line. Such
        texts change at every retry of a job that cannot change state; a job's story is when it
        starts waiting, why, and what ends the wait (the real messages: each policy's module).
        Without ``kind`` the text is its own kind.
        """
        if kind is None:
            kind = reason
        if kind == run.reason_kind and reason is not None:
            return
        if reason != run.pending_reason and self.reason_changes is not None:
            self.reason_changes.append(run)
        if reason != run.pending_reason and reason is not None:
            self.log(run.name, f"waiting: {reason}")
        run.pending_reason, run.reason_kind = reason, kind

    def lose_pod(self, run: JobRun, node: int, cause: str, by: str | None = None) -> None:
        """One pod of ``run`` on ``node`` is gone (``PREEMPTED`` by job ``by``, or ``POD_FAILED``):
        its GPUs come back now; what its controller does about it is the simulator's business
        (``courselib.sim.gang.react``)."""
        self.cluster.unbind_one(run.job, node)
        run.pods_lost += 1
        what = (f"pod on {self.cluster.nodes[node].name} preempted by {by}" if cause == PREEMPTED
                else f"pod on {self.cluster.nodes[node].name} failed (its container exited non-zero)")
        self.log(run.name, what)
        self.note(run)
        self.lost.append((run, node, cause, by))
        if cause == PREEMPTED:
            self.preemptions.append((self.now, run.name, by))

    def stop_training(self, run: JobRun, why: str, restart: bool = True) -> None:
        """The barrier broke (a rank was lost): training stops, progress is lost (no checkpoint).
        ``restart`` False: the job was stopped as a whole (evicted), which is not a restart."""
        run.state = HOLDING
        run.remaining = run.job.duration
        run.restarts += restart
        self.stopped.append(run)
        self.touched[run.name] = run
        self.log(run.name, f"training stopped: {why}")
        self.note(run)

    def log(self, job: str, what: str) -> None:
        if self._bound_this_cycle:  # keep the sequence in order: binds so far come first
            self.flush_binds()
        self.trace.append(TraceEvent(self.now, job, what, self.cluster.held(job)))

    def flush_binds(self) -> None:
        """One trace line per job per scheduling cycle: how many pods it bound, how many it holds."""
        bound, self._bound_this_cycle = self._bound_this_cycle, {}
        if self.bind_groups is not None and bound:
            self.bind_groups.append(BindGroup(len(self.trace), len(bound), tuple(self._binds)))
            self._binds = []
        for name, n in bound.items():
            run = self.runs[name]
            self.log(name, f"bound {n} pod{'s' if n != 1 else ''}: {self.bound(run)}/{run.job.pods} "
                           f"placed (min_member {run.job.min_member})")

    def check(self) -> None:
        """GPUs are never double-booked or lost (raises AssertionError otherwise)."""
        self.cluster.check()
        held = sum(self.cluster.held(r.name) for r in self.runs.values())
        assert held + self.cluster.free_gpus == self.cluster.total_gpus, (held, self.cluster.free_gpus)


# ---- metrics (pure functions over histories) ------------------------------------------------
def integrate(history, end: float) -> tuple[float, float]:
    """(training GPU-seconds, held-but-idle GPU-seconds) of one job's history up to ``end``."""
    train = idle = 0.0
    for (t0, held, training), nxt in zip(history, list(history[1:]) + [(end, 0, False)]):
        dt = max(0.0, min(nxt[0], end) - t0)
        if training:
            train += held * dt
        else:
            idle += held * dt
    return train, idle


def free_while_waiting(histories, waits, total_gpus: int, end: float) -> float:
    """GPU-seconds that no job held while some submitted job waited to start: what an all-or-nothing
    guarantee leaves unused unless another job fills it (backfill).

    ``histories``: one ``[(time, held GPUs, training?), ...]`` change list per job (``Result.histories``'
    values); ``waits``: one ``(submit, start)`` per job, ``start`` ``None`` for a job that never starts
    (it waits until ``end``). The cluster's ``total_gpus`` minus the GPUs held, summed over the times up
    to ``end`` at which at least one job waits (``submit <= t < start``)."""
    changes = [([t for t, _, _ in h], [g for _, g, _ in h]) for h in map(list, histories)]   # in time order
    waits = list(waits)
    times = {0.0, end} | {t for ts, _ in changes for t in ts} | {t for w in waits for t in w if t is not None}
    times = sorted(t for t in times if 0.0 <= t <= end)
    free = 0.0
    for t0, t1 in zip(times, times[1:]):
        if any(s <= t0 and (st is None or t0 < st) for s, st in waits):
            held = sum(gs[k - 1] for ts, gs in changes if (k := bisect_right(ts, t0)))   # each job's last change by t0
            free += (total_gpus - held) * (t1 - t0)
    return free


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100); None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = max(1, math.ceil(p / 100 * len(v)))
    return v[k - 1]


def verdict(policy: str, jobs: list[dict], deadlock: bool, wasted_gpu_hours: float) -> str:
    """One sentence a learner can read: what happened under this policy."""
    never = [j["name"] for j in jobs if j["start"] is None]
    if deadlock:
        stuck = [j for j in jobs if j["start"] is None and j["gpus_held"] > 0]
        held = sum(j["gpus_held"] for j in stuck)
        return (f"DEADLOCK under {policy}: {', '.join(j['name'] for j in stuck)} hold {held} GPUs "
                f"without training and nothing can ever change; {wasted_gpu_hours:.2f} GPU-hours wasted.")
    if never:
        return (f"{policy}: no deadlock, but {', '.join(never)} never started training within the "
                f"horizon; {wasted_gpu_hours:.2f} GPU-hours held idle.")
    return (f"{policy}: every job trained; {wasted_gpu_hours:.2f} GPU-hours held idle "
            "while waiting for the barrier.")
