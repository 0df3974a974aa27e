"""The mini gang scheduler in time: arrivals, scheduling cycles, the barrier, completion.

Public API (stable; the Slurm replay of issue 7 compares against it)::

    simulate(workload, policy, horizon=None, seed=0, **policy_options) -> Result

``policy`` is ``kube-default``, ``kube-gang``, ``volcano``, ``kueue`` or ``slurm`` (options: see each module in
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

Two engines, one behaviour. ``simulate(..., reference=True)`` runs these processes on simpy with
the policies' straightforward reference paths (every cycle rescans every job). The default runs
the same functions (:func:`cycle`, :func:`end_training`) from :class:`EventLoop`, a plain heap that
orders events exactly as simpy does, with the policies' fast paths (ordered lists, running
totals, free-GPU buckets): 100,000 jobs on 6,250 nodes in seconds. ``tests/test_gang_fastpath.py``
checks on random workloads that both give the same trace and the same result for every job.
"""
from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, field
from itertools import groupby

import simpy

from courselib.model import jobset
from courselib.model.gang import (COMPLETED, FAILED, HOLDING, PENDING, POD_FAILED, PREEMPTED, RUNNING,
                                  TIMEOUT, JobRun, SchedState, TraceEvent, integrate, percentile, verdict)
from courselib.model.policies import Policy, make_policy
from courselib.model.topology import Stretch, placement_domains
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
    pods_lost: int = 0               # pods preempted or failed while the job held them
    #: [lost at, every pod running again at (None: never)] for each loss the job recovered from
    recoveries: tuple = ()
    end_reason: str | None = None    # FAILED: BackoffLimitExceeded, FailedJobs, ReachedMaxRestarts
    #: on a cluster with a topology: per level, the domains its pods landed in when it started
    domains: dict | None = None
    #: what the policy did with the job's topology request, when it did not honour it
    topology_note: str | None = None
    #: on a cluster with a topology: ((node index, GPUs), ...) when it started (the cost of a split)
    placement: tuple | None = None
    #: what the policy could have chosen where its scheduler draws among equals (kube-gang: the
    #: tied domains of a PodGroup's placement, the pending messages a failed search may show);
    #: not compared: the fast path looks at a waiting gang less often than the reference
    choices: dict | None = field(default=None, compare=False)


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
    #: one entry per workload event: what it did (``preempt``: the victims the scheduler chose)
    events: tuple = ()
    #: every bind behind the trace's ``bound k pods`` lines (:class:`~courselib.model.gang.BindGroup`),
    #: when ``simulate(..., binds=True)`` asked for them (the steppers); () otherwise
    binds: tuple = field(repr=False, default=())

    def job(self, name: str) -> JobResult:
        return next(j for j in self.jobs if j.name == name)

    def to_dict(self, trace: bool = True) -> dict:
        """Plain data for ``--json``: the fields above, ``jobs`` as dicts, ``trace`` as dicts."""
        out = {k: getattr(self, k) for k in ("policy", "deadlock", "wasted_gpu_hours", "utilisation",
                                              "mean_wait", "p95_wait", "mean_jct", "p95_jct",
                                              "horizon", "end_time", "total_gpus", "verdict")}
        out["jobs"] = [asdict(j) for j in self.jobs]
        if self.events:
            out["events"] = [dict(e) for e in self.events]
        if trace:
            out["trace"] = [asdict(e) for e in self.trace]
        return out


class Simulation:
    """Glue between simpy's clock and a policy's decisions."""

    def __init__(self, workload: Workload, policy: Policy, check: bool = False, reference: bool = False,
                 stretch: Stretch | None = None):
        self.env = simpy.Environment()
        self.workload = workload
        self.policy = policy
        self.stretch = stretch
        self.reference = reference
        self.state = SchedState(workload, reference=reference)
        self.check = check
        self.wake = self.env.event()
        self.training: dict[str, simpy.Process] = {}
        self.timers: set[float] = set()
        self.deferred: list = []   # controller actions that wait for the end of a scheduling cycle
        self._instant = (-1.0, 0)   # (time, scheduling cycles run at it): see ``_count_cycle``
        self._cycle_limit = 1000 + 20 * sum(j.pods for j in workload.jobs)

    @property
    def now(self) -> float:
        return self.env.now

    def request_cycle(self) -> None:
        if not self.wake.triggered:
            self.wake.succeed()

    def sync(self) -> None:
        self.state.now = self.now

    def add_timer(self, t: float) -> None:
        self.env.process(timer(self.env, self, t))

    def start_training(self, run: JobRun) -> None:
        self.training[run.name] = self.env.process(train(self.env, self, run))

    def interrupt(self, run: JobRun) -> None:
        proc = self.training.pop(run.name, None)
        if proc is not None and proc.is_alive:
            proc.interrupt("preempted")

    def run(self, horizon: float) -> bool:
        """Step until the next event lies beyond ``horizon``; True if nothing is left to happen."""
        env = self.env
        env.process(arrivals(env, self))
        env.process(scheduler(env, self))
        for event in self.workload.events:
            if hasattr(event, "pod"):
                env.process(failure(env, self, event))
        while env.peek() <= horizon:  # step, so that "nothing left to happen" is visible afterwards
            env.step()
        return env.peek() == float("inf")


class EventLoop(Simulation):
    """The same story without simpy's processes: a heap of (time, order, what) entries.

    Entries are pushed in the order simpy would schedule the matching events (an arrival batch,
    a training's end, a timer, the wake-up and the zero-delay step that starts a cycle), and equal
    times pop in push order, as simpy's event ids do; so the runs are identical (tested), at a
    fraction of the cost per event. A preempted training's end stays in the heap, cancelled, as
    an interrupted simpy process leaves its timeout behind.
    """

    ARRIVE, WAKE, CYCLE, TIMER, END = range(5)

    def __init__(self, workload: Workload, policy: Policy, check: bool = False, stretch: Stretch | None = None):
        super().__init__(workload, policy, check=check, reference=False, stretch=stretch)
        self._now = 0.0
        self._heap: list[tuple] = []
        self._order = 0
        self._woken = False
        #: called with 1 each time a job ends (a progress bar's ``update``), or None
        self.progress = None

    @property
    def now(self) -> float:
        return self._now

    def _push(self, t: float, what: int, payload=None) -> None:
        self._order += 1
        heapq.heappush(self._heap, (t, self._order, what, payload))

    def request_cycle(self) -> None:
        if not self._woken:
            self._woken = True
            self._push(self._now, self.WAKE)

    def add_timer(self, t: float) -> None:
        self._push(self._now + (t - self._now), self.TIMER, t)

    def start_training(self, run: JobRun) -> None:
        token = [False, self._now]  # [cancelled, began]
        self.training[run.name] = token
        self._push(self._now + max(0.0, training_span(self, run)), self.END, (run, token))

    def interrupt(self, run: JobRun) -> None:
        token = self.training.pop(run.name, None)
        if token is not None:
            token[0] = True

    def run(self, horizon: float) -> bool:
        batches = [list(b) for _, b in groupby(sorted(self.workload.jobs, key=lambda j: j.submit),
                                               key=lambda j: j.submit)]
        nxt = 0
        if batches:
            self._push(batches[0][0].submit, self.ARRIVE)
        heap = self._heap
        while heap and heap[0][0] <= horizon:
            self._now, _, what, payload = heapq.heappop(heap)
            if what == self.END:
                run, (cancelled, began) = payload[0], payload[1]
                if not cancelled:
                    end_training(self, run, began)
                    if self.progress is not None:
                        self.progress(1)
            elif what == self.CYCLE:
                cycle(self)
            elif what == self.WAKE:
                self._woken = False
                self._push(self._now, self.CYCLE)
            elif what == self.TIMER:
                self.timers.discard(payload)
                self.request_cycle()
            else:  # ARRIVE
                self.sync()
                runs = [self.state.submit(job) for job in batches[nxt]]
                self.policy.submit(self.state, runs)
                self.request_cycle()
                nxt += 1
                if nxt < len(batches):
                    t = batches[nxt][0].submit
                    self._push(self._now + (t - self._now), self.ARRIVE)
        return not heap


def arrivals(env: simpy.Environment, sim: Simulation):
    """Jobs submitted at the same instant arrive together (their pods are created round-robin)."""
    jobs = sorted(sim.workload.jobs, key=lambda j: j.submit)
    for t, batch in groupby(jobs, key=lambda j: j.submit):
        yield env.timeout(t - env.now)
        sim.sync()
        runs = [sim.state.submit(job) for job in batch]
        sim.policy.submit(sim.state, runs)
        sim.request_cycle()


def failure(env: simpy.Environment, sim: Simulation, event):
    """A ``fail`` event: at its time one pod of the job fails (its container exits non-zero)."""
    yield env.timeout(event.at - env.now)
    sim.sync()
    state = sim.state
    run = state.runs.get(event.job)
    nodes = [] if run is None or run.finished else \
        [i for i, b in sorted(state.cluster.alloc.get(event.job, {}).items()) for _ in range(b.pods)]
    if not nodes:
        state.log(event.job, f"pod {event.pod} would fail now, but the job holds no pod: no effect")
        return
    state.lose_pod(run, nodes[min(event.pod, len(nodes) - 1)], POD_FAILED)
    react(sim)
    sim.request_cycle()


def react(sim: Simulation) -> None:
    """What the controllers of the pods lost this cycle do (``SchedState.lost``).

    - ``kind: jobset`` — a lost pod fails its child Job (``backoffLimit: 0``); the JobSet
      controller restarts the whole JobSet (every child Job deleted with its pods, then created
      again) or fails it at ``maxRestarts`` (:func:`courselib.model.jobset.on_child_job_failed`).
    - ``kind: job`` (``batch/v1``) — a *preempted* pod is replaced by the Job controller: the replay's
      Jobs say ``podFailurePolicy`` Ignore on the ``DisruptionTarget`` condition, which the scheduler
      sets on its victims, so preemption does not count against ``backoffLimit``; the other ranks
      keep their pods and GPUs but stop training ("if k<=n workers fail all workers are stopped and
      restarted", FACTS §4.3) until the replacement is placed. A *failed* pod exceeds
      ``backoffLimit: 0``: the Job fails and its other pods are deleted (reason ``BackoffLimitExceeded``).
    """
    state, policy = sim.state, sim.policy
    lost, state.lost = state.lost, []
    by_run: dict[str, list] = {}
    for item in lost:
        by_run.setdefault(item[0].name, []).append(item)
    for name, items in by_run.items():
        run = items[0][0]
        if run.finished:
            continue
        causes = {c for _, _, c, _ in items}
        was_training = run.state == RUNNING
        if was_training:
            sim.interrupt(run)
            run.remaining = run.job.duration   # the ranks restart from the job's start (no checkpoint)
        if run.job.kind == "jobset":
            r = jobset.on_child_job_failed(run.job.max_restarts, run.restarts)
            policy.forget_pods(state, run)
            run.state = HOLDING if state.held(run) else PENDING
            state.release(run, f"JobSet: child Job failed ({len(items)} pod{'s' if len(items) > 1 else ''} "
                               f"lost); {r.reason}: every child Job and pod deleted")
            if r.action == jobset.FAIL:
                _fail(sim, run, r.reason)
                continue
            run.restarts = r.restarts
            run.remaining = run.job.duration
            run.recoveries.append([state.now, None])
            # the new child Job (same name) is created only once the old one and its pods are gone
            # (foreground deletion): the scheduler sees the freed GPUs one cycle before the new pods
            sim.deferred.append(lambda run=run, r=r: _recreate(sim, run, r))
        elif POD_FAILED in causes:
            policy.forget_pods(state, run)
            state.release(run, "Job failed: BackoffLimitExceeded (backoffLimit 0); its other pods deleted")
            _fail(sim, run, "BackoffLimitExceeded")
            continue
        else:
            if was_training:
                run.state = HOLDING
                run.restarts += 1
                state.log(run.name, "training stopped: a rank was preempted: all ranks restart")
            run.recoveries.append([state.now, None])
            state.log(run.name, f"{len(items)} preempted pod{'s' if len(items) > 1 else ''} replaced by the "
                                "Job controller (podFailurePolicy Ignore on DisruptionTarget)")
            policy.requeue_pods(state, run, len(items), restart=False)
        state.touched[run.name] = run
        state.note(run)
    sim.request_cycle()   # pods created again: the scheduler looks at them at once


def _recreate(sim: Simulation, run: JobRun, r) -> None:
    state = sim.state
    if run.finished:
        return
    state.log(run.name, f"JobSet restart {r.restarts}"
                        + (f" of at most {run.job.max_restarts}" if run.job.max_restarts is not None else "")
                        + f": every child Job created again, {run.job.pods} new pods")
    sim.policy.requeue_pods(state, run, run.job.pods, restart=True)
    state.touched[run.name] = run


def _fail(sim: Simulation, run: JobRun, reason: str) -> None:
    state = sim.state
    run.state, run.end, run.end_reason = FAILED, state.now, reason
    state.log(run.name, f"FAILED: {reason}")
    state.note(run)
    sim.policy.on_finish(state, run)


def scheduler(env: simpy.Environment, sim: Simulation):
    """Wait for a change; let everything else at this instant happen; run one cycle."""
    while True:
        yield sim.wake
        sim.wake = env.event()
        yield env.timeout(0)
        cycle(sim)


def cycle(sim: Simulation) -> None:
    """One scheduling cycle: the policy binds; preempted trainings stop; full barriers pass.

    When a barrier passing can change the policy's decisions (Kueue's blockAdmission waits for the
    admitted workload's PodsReady), the policy runs again at once, until no further barrier passes.
    """
    while True:
        sim.sync()
        _count_cycle(sim)
        for t in sim.policy.schedule(sim.state):
            if t > sim.now and t not in sim.timers:
                sim.timers.add(t)
                sim.add_timer(t)
        sim.state.flush_binds()
        if sim.state.lost:
            react(sim)
        for run in sim.state.stopped:
            sim.interrupt(run)
        sim.state.stopped.clear()
        ready = False
        for run in (sim.state.active() if sim.reference else sim.state.take_touched()):
            if run.state in (PENDING, HOLDING) and sim.state.bound(run) >= run.job.min_member:
                barrier_passed(sim, run)
                ready = True
        if sim.check:
            sim.state.check()
        if sim.deferred:   # what the controllers do once the scheduler has seen this cycle
            later, sim.deferred = sim.deferred, []
            for action in later:
                action()
            sim.request_cycle()
            return
        if not (ready and sim.policy.cycle_when_ready()):
            return


class NoProgress(RuntimeError):
    """The simulated clock stopped: cycle after cycle at one instant, a policy's livelock."""


def _count_cycle(sim: Simulation) -> None:
    """Count the cycles run at this instant; raise :class:`NoProgress` past a bound.

    A cycle at the same instant is run again only when something changed (pods lost and created
    again, a barrier passed, a controller acted), and each of those is bounded by the pods of the
    workload, so a run that needs more than ``1,000 + 20 × pods`` cycles at one instant is not
    making progress: it fails with the time and the policy instead of hanging.
    """
    t, n = sim._instant
    n = n + 1 if t == sim.now else 1
    sim._instant = (sim.now, n)
    if n > sim._cycle_limit:
        raise NoProgress(f"no progress: {n - 1:,} scheduling cycles at t = {sim.now:g} s without the clock "
                         f"moving (policy {sim.policy.name}); this is a bug in the model, please report it "
                         f"with the workload")


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
        if state.workload.cluster.topology:   # where it landed, for the result's domains
            run.placed = tuple((i, b.gpus) for i, b in sorted(state.cluster.alloc.get(run.name, {}).items()))
    if run.recoveries and run.recoveries[-1][1] is None:
        run.recoveries[-1][1] = state.now
    state.log(run.name, f"barrier passed: training on {state.held(run)} GPUs")
    if sim.stretch is not None:   # opt-in: a split TP group paces every step from now on
        here = [(i, b.gpus) for i, b in sorted(state.cluster.alloc.get(run.name, {}).items())]
        run.slowdown = sim.stretch.slowdown(state.workload.cluster, here)
        if run.slowdown != 1.0:
            state.log(run.name, f"TP {sim.stretch.tp} split over a slow link: every step x{run.slowdown:.3f}, "
                                f"{run.remaining * run.slowdown:g} s of training left")
    state.note(run)
    sim.start_training(run)


def training_span(sim: Simulation, run: JobRun) -> float:
    """How long ``run`` trains from now: what remains (stretched by its ``slowdown``), or up to its
    ``--time`` limit (Slurm)."""
    limit = run.job.time_limit if sim.policy.enforces_time_limit else None
    wall = run.remaining if run.slowdown == 1.0 else run.remaining * run.slowdown
    return wall if limit is None else min(wall, limit - (sim.now - run.start))


def train(env: simpy.Environment, sim: Simulation, run: JobRun):
    """Every placed rank trains until the job is done (or until it loses a rank)."""
    span = training_span(sim, run)
    began = env.now
    try:
        yield env.timeout(max(0.0, span))
    except simpy.Interrupt:
        return  # SchedState.stop_training already reset the run
    end_training(sim, run, began)


def end_training(sim: Simulation, run: JobRun, began: float) -> None:
    """The job trained to its end (COMPLETED) or to its time limit (TIMEOUT): release its GPUs."""
    state = sim.state
    sim.sync()
    run.remaining -= (sim.now - began) if run.slowdown == 1.0 else (sim.now - began) / run.slowdown
    run.end = sim.now
    run.state = COMPLETED if run.remaining <= 1e-9 else TIMEOUT
    sim.training.pop(run.name, None)
    state.release(run, "completed" if run.state == COMPLETED else "TIMEOUT at --time limit")
    sim.policy.on_finish(state, run)
    sim.request_cycle()


#: the policies whose models say what happens to a running job's pods (preemption, failures)
EVENT_POLICIES = ("kube-default", "kube-gang", "kueue")


def default_horizon(workload: Workload) -> float:
    last = max((j.submit for j in workload.jobs), default=0.0)
    return last + max(86400.0, 2 * sum(j.duration for j in workload.jobs))


def simulate(workload: Workload, policy: str, horizon: float | None = None, seed: int = 0,
             check: bool = False, reference: bool = False, progress=None, stretch: Stretch | None = None,
             binds: bool = False,
             **policy_options) -> Result:
    """Run ``workload`` under ``policy`` until nothing can change or ``horizon`` (seconds).

    ``reference=True`` runs the straightforward path (every cycle rescans every job and pod) that
    the default fast path (incremental indexes and counters) must reproduce exactly: same trace,
    same per-job results (``tests/test_gang_fastpath.py``). It is slower, never different.
    ``progress``, if given, is called with 1 each time a job ends (the default path only).
    ``binds=True`` also records every bind the policy made, in order (``Result.binds``: a pod at a
    time where the policy binds pod by pod), for :func:`courselib.sim.steps.gang_steps`.

    ``stretch`` (opt-in, a :class:`courselib.model.topology.Stretch`, e.g. ``Stretch(tp=8,
    comm_fraction=0.1, nvlink_level="block")``): each job that starts training trains
    ``(1 − f) + f·r`` times as long where its tensor-parallel groups cross a slow link, so a split
    gang ends later and holds its GPUs longer (the trace says so at its start). Off by default:
    a workload's durations are what its jobs took where they ran, the real schedulers the course
    replays against run pods that sleep that long wherever they land, and the communication
    fraction is an assumption the workload does not carry.

    ``policy`` is one of :func:`courselib.model.policies.policy_names`, and ``policy_options`` are that
    policy's options (an unknown one is a ``ValueError`` that lists the right ones):

    - ``kube-default``: ``preemption`` (False), ``pod_order`` (None: the Job controllers' interleaving);
    - ``volcano``: ``enqueue`` (True), ``overcommit_factor`` (1.2), ``min_resources`` (True);
    - ``kueue``: ``wait_for_pods_ready`` (True), ``timeout`` (seconds; None: the release's default),
      ``block_admission``, ``backoff_base`` (60 s), ``backoff_max`` (3600 s), ``backoff_limit``,
      ``requeuing_timestamp`` ("Eviction"), ``queue_order``, ``version``, ``config_api``, ``disable_gate``;
    - ``slurm``: ``backfill`` (True), ``bf_window`` (86400 s), ``bf_max_job_test`` (500),
      ``bf_job_part_count_reserve`` (0), ``max_switch_wait`` (300 s: how long a ``--switches=1`` job waits for one leaf),
      ``bf_interval`` (30 s, slurm.conf's default: a backfill pass at most every 30 s; 0: every cycle);
    - ``kube-gang``: ``pod_group_cycle`` (True), ``permit_timeout`` (300 s), ``requeue_after`` (300 s),
      ``group_order``, ``domains`` and ``nodes`` (a replay's record of what a real run drew where the
      scheduler picks among equal placements: job -> domain, job -> {node: pods}; None: a seeded draw).

    e.g. ``simulate(w, "kueue", timeout=300.0)``, ``simulate(w, "slurm", backfill=False)``.
    """
    if workload.events or any(j.preemption_policy for j in workload.jobs) \
            or any(q.within_cluster_queue != "Never" for q in workload.queues):
        if policy not in EVENT_POLICIES:
            raise ValueError(f"events and preempting jobs are modelled for {', '.join(EVENT_POLICIES)}, "
                             f"not {policy}")
        reference = True   # small by nature; the policies' fast paths do not model losses
    pol = make_policy(policy, workload, seed=seed, reference=reference, **policy_options)
    if stretch is not None:
        stretch.check(workload.cluster)
    sim = Simulation(workload, pol, check=check, reference=True, stretch=stretch) if reference else \
        EventLoop(workload, pol, check=check, stretch=stretch)
    if binds:
        sim.state.bind_groups = []
    if not reference:
        sim.progress = progress
    h = default_horizon(workload) if horizon is None else float(horizon)
    quiescent = sim.run(h)
    state = sim.state
    state.now = sim.now if quiescent else h
    runs = list(state.runs.values())
    deadlock = quiescent and any(r.state == HOLDING and state.held(r) > 0 for r in runs)
    # the accounting window: to the last event, but a deadlock holds its GPUs until the horizon
    last_event = max([e.time for e in state.trace] + [0.0])
    end_time = h if (deadlock or not quiescent) else last_event
    return _result(pol.name, state, runs, h, end_time, deadlock, event_outcomes(workload, state), pol)


def event_outcomes(workload: Workload, state: SchedState) -> tuple:
    """Each event of the workload and what it did: a ``preempt`` names the pods the scheduler took
    from each job for the preempting job (``victims``) and whether ``job`` was among them."""
    out = []
    for e in workload.events:
        if hasattr(e, "by"):
            victims: dict[str, int] = {}
            for t, victim, by in state.preemptions:
                if by == e.by:
                    victims[victim] = victims.get(victim, 0) + 1
            out.append({"at": e.at, "preempt": e.by, "job": e.job, "victims": victims,
                        "as_expected": e.job in victims})
        else:
            out.append({"at": e.at, "fail": e.job, "pod": e.pod})
    return tuple(out)


def _result(policy: str, state: SchedState, runs: list[JobRun], horizon: float, end_time: float,
            deadlock: bool, events: tuple = (), policy_obj=None) -> Result:
    jobs, train_total, idle_total = [], 0.0, 0.0
    for r in runs:
        tr, idle = integrate(r.history, end_time)
        train_total += tr
        idle_total += idle
        jobs.append(JobResult(r.name, r.state, r.job.submit, r.first_bound, r.start, r.end, r.job.gpus,
                              r.gpus_held_max, state.held(r), idle / 3600.0,
                              None if r.finished or r.state == RUNNING else r.pending_reason,
                              r.restarts, r.evictions, r.pods_lost,
                              tuple(tuple(x) for x in r.recoveries), r.end_reason,
                              placement_domains(state.workload.cluster, [i for i, _ in r.placed])
                              if r.placed else None,
                              getattr(policy_obj, "topology_note", lambda job: None)(r.job),
                              r.placed or None,
                              getattr(policy_obj, "choices", {}).get(r.name)))
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
                  verdict(policy, rows, deadlock, wasted), events,
                  tuple(state.bind_groups) if state.bind_groups is not None else ())

