"""The NCCL barrier in time: one missing rank stalls every rank, then the whole job restarts.

Each rank is a small simpy process that reads like the story:

1. its pod starts (``join_times_s``) and joins the first barrier: under torchrun the agents'
   rendezvous (``init_timeout_s``: its ``join_timeout``, 600 s by default), after which the workers
   start and call ``ncclCommInitRank``, which "implicitly synchronizes with other ranks"
   (bibliography: ``nccl-header``): init completes only when **every** rank has joined;
2. each training step it computes, then enters an all-reduce that completes only when every rank
   takes part; every ``checkpoint_every_s`` of training it writes a checkpoint (a collective too:
   the checkpoint counts only once every rank has written its shard);
3. a rank that is lost (preempted, killed, hung) never arrives; the others block inside the
   collective until one of two clocks ends the wait (:mod:`courselib.model.nccl`):

   - ``RankLoss(kind="silent")`` — nothing reports the loss (a hung GPU, a peer that stopped
     answering): PyTorch's watchdog aborts the work ``timeout_s`` after it was enqueued, 10 min by
     default for NCCL (``pytorch-distributed-init``) — detection takes *up to* the timeout;
   - ``RankLoss(kind="error")`` — the peer's process or node is gone and the transport says so: on
     InfiniBand the send fails after ``NCCL_IB_TIMEOUT``'s retries, ``nccl_error_s`` (about half a
     minute with NCCL's defaults), and the watchdog tears the process down at once
     (``TORCH_NCCL_ASYNC_ERROR_HANDLING=3``), unless the timeout came first;

   torchrun then stops **all** workers and restarts them (``torchrun-elastic``), and they resume from
   the last checkpoint.

Replacing only the lost rank does not help (``strategy="replace-rank"``): the replacement calls
``ncclCommInitRank`` on a new communicator that needs all ranks, while the survivors are still
blocked in the old communicator's all-reduce and never call init. The trace shows it waiting
alone until the watchdog tears the job down anyway.

Event-driven: ranks wake only at step boundaries (``step_s``, 1 min by default, standing for a
block of real steps), so 512 ranks × a few hours run in well under a second.

Hook for the gang scheduler: the simulation takes plain inputs. Pass the pod start times a gang
simulation produced as ``join_times_s`` (one per rank, seconds from the job's first pod) and a
preemption as a :class:`RankLoss`; see :func:`scenario_from_start_times` and
:func:`join_times_from_held` (which reads a ``(t, held, training)`` history row list).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import simpy

from courselib.errors import InputError
from courselib.model import recovery
from courselib.model.cost import SECONDS_PER_HOUR
from courselib.model.nccl import NCCL_ERROR_AFTER_S, PG_NCCL_TIMEOUT_S, RENDEZVOUS_JOIN_TIMEOUT_S

# Rank states drawn by courselib.plots.barrier (held-but-idle states are the warning colours).
WAITING = "waiting"          # joined init, waiting for the other ranks (GPU held, idle)
TRAINING = "training"
CHECKPOINTING = "checkpointing"
STALLED = "stalled"          # blocked in a collective a lost rank never joins (GPU held, idle)
LOST = "lost"                # the rank's process is gone
REPLACEMENT = "replacement waiting"  # a lone replacement in a new communicator's init
RESTARTING = "restarting"    # torchrun stopped every worker; rescheduling and reloading
STATES = (WAITING, TRAINING, CHECKPOINTING, STALLED, LOST, REPLACEMENT, RESTARTING)

STRATEGIES = ("restart-all", "replace-rank")
LOSS_KINDS = ("silent", "error")   # nothing reports the loss / the transport reports an error
HUNG_SHOWN_S = 3600.0   # a run that hangs forever is drawn for this long after its last event


@dataclass(frozen=True)
class RankLoss:
    """Rank ``rank`` disappears ``at_s`` seconds after the job's first pod started.

    ``kind="silent"``: no error reaches the other ranks, so only the watchdog's timeout ends their wait.
    ``kind="error"``: the rank's process or node is gone and the transport reports it (a preempted or
    OOM-killed pod on InfiniBand): the survivors' NCCL error ends the wait after ``nccl_error_s``.
    """

    rank: int
    at_s: float
    kind: str = "silent"


@dataclass(frozen=True)
class BarrierScenario:
    """Plain inputs of one run. Durations in seconds; training durations exclude checkpoints."""

    ranks: int
    work_s: float = 4 * 3600.0
    step_s: float = 60.0
    checkpoint_every_s: float = 3600.0
    checkpoint_cost_s: float = 0.0
    timeout_s: float = PG_NCCL_TIMEOUT_S  # init_process_group(timeout=...); math.inf = never
    init_timeout_s: float | None = None   # the first barrier; None: torchrun's rendezvous join_timeout
    nccl_error_s: float = NCCL_ERROR_AFTER_S   # a vanished peer's send fails this long after it began
    restart_s: float = 300.0
    join_times_s: tuple[float, ...] | None = None   # None: every pod starts at 0
    losses: tuple[RankLoss, ...] = ()
    strategy: str = "restart-all"
    #: a rung of the recovery ladder (``courselib.model.recovery.RUNGS``) timed with the ladder's
    #: figures; None: torchrun's restart with ``restart_s``
    recovery: str | None = None
    #: what the ladder's figures depend on besides the above (model size, bandwidths, spare wait)
    ladder: dict = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self):
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise InputError(f"{self.ranks!r} is not a rank count ≥ 1", field="ranks")
        for name in ("work_s", "step_s", "checkpoint_every_s"):
            _duration(getattr(self, name), name, positive=True)
        for name in ("checkpoint_cost_s", "restart_s"):
            _duration(getattr(self, name), name)
        _duration(self.timeout_s, "timeout", positive=True, allow_inf=True)
        if self.init_timeout_s is not None:
            _duration(self.init_timeout_s, "init-timeout", positive=True, allow_inf=True)
        _duration(self.nccl_error_s, "nccl-error", positive=True)
        for name in ("work_s", "checkpoint_every_s"):
            ratio = getattr(self, name) / self.step_s
            if abs(ratio - round(ratio)) > 1e-9:
                raise InputError(f"{getattr(self, name):g}s is not a whole number of steps of "
                                 f"{self.step_s:g}s", field=name.removesuffix("_s").replace("_", "-"),
                                 hint="make it a multiple of --step")
        if self.join_times_s is not None:
            if len(self.join_times_s) != self.ranks:
                raise InputError(f"{len(self.join_times_s)} join times for {self.ranks} ranks",
                                 field="join_times_s", hint="give one start time per rank")
            for t in self.join_times_s:
                _duration(t, "join_times_s")
        for loss in self.losses:
            if not 0 <= loss.rank < self.ranks:
                raise InputError(f"rank {loss.rank} does not exist in a job of {self.ranks} ranks",
                                 field="lose-rank", hint=f"ranks are numbered 0..{self.ranks - 1}")
            _duration(loss.at_s, "at")
            if loss.kind not in LOSS_KINDS:
                raise InputError(f"unknown kind of loss {loss.kind!r}", field="loss-kind",
                                 hint="use " + " or ".join(LOSS_KINDS))
        if self.strategy not in STRATEGIES:
            raise InputError(f"unknown strategy {self.strategy!r}", field="strategy",
                             hint="use " + " or ".join(STRATEGIES))
        if self.recovery is not None:
            if self.recovery not in recovery.RUNGS:
                raise InputError(f"unknown recovery rung {self.recovery!r}", field="recovery",
                                 hint="use " + ", ".join(recovery.RUNGS))
            if self.strategy != "restart-all":
                raise InputError("--recovery and --strategy replace-rank do not go together",
                                 field="recovery", hint="drop --strategy")
            self.rung()   # checks the ladder's inputs

    def ladder_inputs(self, since_checkpoint_s: float | None = None) -> "recovery.LadderInputs":
        """The recovery ladder's inputs for this scenario (``ladder`` adds model size etc.)."""
        kw = dict(self.ladder)
        kw.setdefault("since_checkpoint_s", self.checkpoint_every_s / 2 if since_checkpoint_s is None
                      else since_checkpoint_s)
        kw.setdefault("loss", next((l.kind for l in self.losses), "error"))
        return recovery.LadderInputs(ranks=self.ranks, step_s=self.step_s, **kw)

    def rung(self, since_checkpoint_s: float | None = None) -> "recovery.Rung | None":
        return None if self.recovery is None else recovery.rung(self.recovery, self.ladder_inputs(since_checkpoint_s))

    @property
    def total_steps(self) -> int:
        return int(round(self.work_s / self.step_s))

    @property
    def checkpoint_every_steps(self) -> int:
        return int(round(self.checkpoint_every_s / self.step_s))

    @property
    def first_barrier_timeout_s(self) -> float:
        """The first barrier's timeout: ``init_timeout_s``, or torchrun's rendezvous ``join_timeout``."""
        return RENDEZVOUS_JOIN_TIMEOUT_S if self.init_timeout_s is None else self.init_timeout_s

    @property
    def joins(self) -> tuple[float, ...]:
        return self.join_times_s if self.join_times_s is not None else (0.0,) * self.ranks


def _duration(value, field_name: str, *, positive: bool = False, allow_inf: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value) \
        and value >= 0 and (value > 0 or not positive) and (allow_inf or math.isfinite(value))
    if not ok:
        raise InputError(f"{value!r} is not a duration {'> 0' if positive else '≥ 0'} in seconds",
                         field=field_name, hint="write a duration with its unit: 30s, 10m, 1h")
    return float(value)


def scenario_from_start_times(start_times_s: Sequence[float], **kwargs) -> BarrierScenario:
    """A scenario whose ranks join when a (gang) scheduler started their pods.

    ``start_times_s`` is one start time per rank, in any time origin: it is shifted so the first
    pod starts at 0. Loss times in ``kwargs["losses"]`` are then relative to that first start.
    """
    if not start_times_s:
        raise InputError("no start times", field="start_times_s", hint="give one per rank")
    t0 = min(start_times_s)
    joins = tuple(float(t) - t0 for t in start_times_s)
    return BarrierScenario(ranks=len(joins), join_times_s=joins, **kwargs)


def join_times_from_held(history: Sequence[Sequence[float]], ranks: int) -> tuple[float, ...]:
    """Per-rank start times from a step history of GPUs held: ``[(t, held, ...), ...]``.

    Each rise of ``held`` at time ``t`` starts that many ranks at ``t`` (one rank per GPU), in rank
    order. This reads a gang simulation's per-job history (``courselib.sim.gang`` ``Result.histories``
    rows ``(t, held, training)``) without importing it; the first ``ranks`` GPUs held are the ranks.
    """
    joins: list[float] = []
    held_before = 0
    for row in history:
        t, held = float(row[0]), int(row[1])
        if held > held_before:
            joins.extend([t] * (held - held_before))
        held_before = held
        if len(joins) >= ranks:
            break
    if len(joins) < ranks:
        raise InputError(f"the history holds only {len(joins)} GPUs for {ranks} ranks", field="history",
                         hint="pass the job's whole history, or fewer ranks")
    return tuple(joins[:ranks])


@dataclass(frozen=True)
class TraceEvent:
    """One line of the trace: at ``t_s``, ``ranks`` ranks entered ``phase``."""

    t_s: float
    phase: str
    ranks: int
    detail: str


@dataclass(frozen=True)
class Failure:
    """One whole-job restart and what it cost."""

    cause: str                     # "rank lost" or "late rank" (init timed out with no loss)
    detected_by: str               # "watchdog timeout", "NCCL error" or "first barrier timeout"
    lost_ranks: tuple[int, ...]
    lost_at_s: float | None
    stalled_in: str                # the collective the survivors were blocked in
    stalled_at_s: float            # when the first survivor entered it
    detected_at_s: float           # the watchdog fired
    restarted_at_s: float          # every rank back, resumed from the checkpoint
    last_checkpoint_at_s: float | None   # when the work kept was saved (None: init never completed)
    resumed_from_step: int
    lost_gpu_hours: float
    recovery: str = "restart"          # the rung that recovered
    ranks_after: int = 0               # ranks training once it recovered

    @property
    def hang_detected_after_s(self) -> float | None:
        return None if self.lost_at_s is None else self.detected_at_s - self.lost_at_s

    @property
    def since_checkpoint_s(self) -> float:
        if self.last_checkpoint_at_s is None or self.lost_at_s is None:
            return 0.0
        return max(0.0, self.lost_at_s - self.last_checkpoint_at_s)


@dataclass(frozen=True)
class BarrierResult:
    scenario: BarrierScenario
    finished: bool                 # False: hung forever (no timeout) or never started
    finished_at_s: float | None
    ended_at_s: float
    restarts: int
    failures: tuple[Failure, ...]
    init_wait_gpu_hours: float     # GPUs held idle in the init barrier, waiting for late ranks
    lost_gpu_hours: float          # Σ failures: ranks × (since checkpoint + detection + restart)
    held_gpu_hours: float          # every rank from its pod start to the end
    collectives: tuple[tuple[int, str, float, int], ...]   # (communicator, op, done at, participants)
    trace: tuple[TraceEvent, ...]
    segments: dict[int, list[tuple[float, float, str]]] = field(repr=False)

    @property
    def hang_detected_after_s(self) -> float | None:
        for f in self.failures:
            if f.hang_detected_after_s is not None:
                return f.hang_detected_after_s
        return None

    def to_dict(self) -> dict:
        """Machine output (``--json``); durations in seconds, GPU-hours rounded to 0.01."""
        sc = self.scenario
        return {
            "ranks": sc.ranks,
            "strategy": sc.strategy,
            "recovery": sc.recovery or "restart",
            "finished": self.finished,
            "finished_at_s": self.finished_at_s,
            "hang_detected_after_s": self.hang_detected_after_s,
            "lost_gpu_hours": round(self.lost_gpu_hours, 2),
            "init_wait_gpu_hours": round(self.init_wait_gpu_hours, 2),
            "held_gpu_hours": round(self.held_gpu_hours, 2),
            "restarts": self.restarts,
            "failures": [
                {"cause": f.cause, "lost_ranks": list(f.lost_ranks), "lost_at_s": f.lost_at_s,
                 "stalled_in": f.stalled_in, "stalled_at_s": f.stalled_at_s,
                 "detected_at_s": f.detected_at_s, "detected_by": f.detected_by, "restarted_at_s": f.restarted_at_s,
                 "last_checkpoint_at_s": f.last_checkpoint_at_s, "since_checkpoint_s": f.since_checkpoint_s,
                 "resumed_from_step": f.resumed_from_step, "lost_gpu_hours": round(f.lost_gpu_hours, 2),
                 "recovery": f.recovery, "ranks_after": f.ranks_after}
                for f in self.failures],
            "trace": [{"t_s": e.t_s, "phase": e.phase, "ranks": e.ranks, "detail": e.detail}
                      for e in self.trace],
        }


# --- the communicator ------------------------------------------------------------------------

class _Op:
    __slots__ = ("key", "event", "arrived", "started")

    def __init__(self, key, event, started):
        self.key, self.event, self.arrived, self.started = key, event, set(), started


INIT_OP = "the first barrier (rendezvous, ncclCommInitRank)"


def op_name(key) -> str:
    kind, step = key
    return INIT_OP if kind == "init" else f"{kind} after step {step}"


class Communicator:
    """One NCCL communicator: init and every collective complete only when all ranks arrive.

    A rank that is lost is withdrawn from every pending operation and can never arrive again, so
    no operation of this communicator can complete after that (``nccl-fault-tolerance``: a failed rank leaves
    the communicator unusable; "all other ranks need to call ncclCommAbort").
    """

    def __init__(self, env: simpy.Environment, nranks: int, index: int, on_start=None):
        self.env, self.nranks, self.index = env, nranks, index
        self.pending: dict = {}
        self.dead: set[int] = set()
        self.aborted = False
        self.completed: list[tuple[int, str, float, int]] = []
        self._on_start = on_start

    def arrive(self, key, rank: int) -> simpy.Event:
        op = self.pending.get(key)
        if op is None:
            op = self.pending[key] = _Op(key, self.env.event(), self.env.now)
            if self._on_start:
                self._on_start(self, op)
        if rank not in self.dead:
            op.arrived.add(rank)
        if len(op.arrived) == self.nranks and not self.aborted:   # every rank, none lost
            del self.pending[key]
            self.completed.append((self.index, op_name(key), self.env.now, len(op.arrived)))
            op.event.succeed(key)
        return op.event

    def abort(self) -> None:
        """``ncclCommAbort``: nothing pending on this communicator will ever complete."""
        self.aborted = True

    def lose(self, rank: int) -> None:
        self.dead.add(rank)
        for op in self.pending.values():
            op.arrived.discard(rank)


# --- the run ---------------------------------------------------------------------------------

class _Run:
    def __init__(self, sc: BarrierScenario):
        self.sc = sc
        self.env = simpy.Environment()
        self.n = sc.ranks
        self.segments: dict[int, list[tuple[float, float, str]]] = {r: [] for r in range(self.n)}
        self.trace: list[TraceEvent] = []
        self.failures: list[Failure] = []
        self.collectives: list = []
        self.step_done = 0             # last checkpointed step (where a restart resumes)
        self.finished_at: float | None = None
        self.attempt = None

    # recording -------------------------------------------------------------------------------
    def seg(self, r: int, start: float, end: float, state: str) -> None:
        if end > start:
            self.segments[r].append((start, end, state))

    def log(self, phase: str, ranks: int, detail: str, t: float | None = None) -> None:
        self.trace.append(TraceEvent(float(self.env.now if t is None else t), phase, ranks, detail))


class _Attempt:
    """One launch of all workers by torchrun: a communicator and one process per rank."""

    def __init__(self, run: _Run, index: int, joins: Sequence[float], resume_step: int,
                 members: Sequence[int] | None = None, step_s: float | None = None,
                 skip_init: bool = False, until: float | None = None):
        self.run, self.index, self.resume_step = run, index, resume_step
        env = run.env
        #: the ranks in this communicator (a shrunk one lacks the lost rank, or a torchft group)
        self.members = tuple(range(run.n)) if members is None else tuple(members)
        self.n = len(self.members)
        self.step_s = run.sc.step_s if step_s is None else step_s
        self.skip_init = skip_init     # a shrunk/regrouped communicator: no rendezvous, no init
        self.until = until             # torchft: regroup at the first step boundary after this
        self.done_step, self.done_at = resume_step, env.now   # the last step all members finished
        self.comm = Communicator(env, self.n, index, on_start=self._watch)
        self.over = env.event()          # value: None (finished) or the op that timed out
        self.init_done_at: float | None = None
        self.last_commit_at: float | None = None
        self.committed_step = resume_step
        self.lost: dict[int, float] = {}
        self.arrived_at_timeout = 0
        self.detected_by = "watchdog timeout"
        self.errored = False               # a rank was lost with kind="error"
        self.replacement = None
        self.state: dict[int, tuple[str, float]] = {}     # rank -> (state, since)
        self.blocked_since: dict[int, float] = {}
        self.procs = {r: env.process(self._rank(r, joins[r])) for r in self.members}

    # the watchdog: PyTorch aborts a collective `timeout` after it was enqueued (``pytorch-distributed-init``)
    def limit(self, op: _Op) -> float:
        sc = self.run.sc
        if op.key[0] == "init":
            return sc.first_barrier_timeout_s
        if sc.recovery == "per-step":   # torchft's Manager times its collectives out itself
            return min(sc.timeout_s, recovery.TORCHFT_TIMEOUT_S)
        return sc.timeout_s

    def _end(self, op: _Op, detected_by: str) -> None:
        if not op.event.triggered and not self.over.triggered:
            self.comm.abort()
            self.arrived_at_timeout = len(op.arrived)
            self.detected_by = detected_by
            self.over.succeed(op)

    def _watch(self, comm: Communicator, op: _Op) -> None:
        limit = self.limit(op)
        if not math.isinf(limit):
            what = "first barrier timeout" if op.key[0] == "init" else "watchdog timeout"
            self.run.env.timeout(limit).callbacks.append(lambda _e, op=op: self._end(op, what))
        if self.errored:              # a peer is already gone with an error: this collective fails too
            self._error_after(op, self.run.sc.nccl_error_s)

    def _error_after(self, op: _Op, delay: float) -> None:
        """The survivors' sends to a vanished peer fail ``delay`` from now (not in the rendezvous, which
        only a timeout ends)."""
        if op.key[0] != "init":
            self.run.env.timeout(delay).callbacks.append(lambda _e, op=op: self._end(op, "NCCL error"))

    # per-rank state, drawn as segments ---------------------------------------------------------
    def enter(self, r: int, state: str) -> None:
        now = self.run.env.now
        prev = self.state.get(r)
        if prev is not None:
            self.run.seg(r, prev[1], now, prev[0])
        self.state[r] = (state, now)

    def close(self, r: int, t: float, stalled_op: _Op | None) -> None:
        """End rank r's open segment at t; time spent blocked in ``stalled_op`` is STALLED."""
        st = self.state.pop(r, None)
        if st is None:
            return
        state, since = st
        blocked = self.blocked_since.get(r)
        if stalled_op is not None and state in (TRAINING, CHECKPOINTING) \
                and r in stalled_op.arrived and blocked is not None and blocked >= since:
            self.run.seg(r, since, blocked, state)
            self.run.seg(r, blocked, t, STALLED)
        else:
            self.run.seg(r, since, t, state)

    def close_all(self, t: float, stalled_op: _Op | None) -> None:
        for r in list(self.state):
            self.close(r, t, stalled_op)

    def _rank(self, r: int, join_at: float):
        run, sc, env = self.run, self.run.sc, self.run.env
        step = self.resume_step
        total, every = sc.total_steps, sc.checkpoint_every_steps   # (the scenario is frozen: read once)
        try:
            if join_at > env.now:
                yield env.timeout(join_at - env.now)         # the pod is not running yet
            if self.skip_init:
                if self.init_done_at is None:
                    self.init_done_at = self.last_commit_at = env.now
            else:
                self.enter(r, WAITING)
                self.blocked_since[r] = env.now
                yield self.comm.arrive(("init", 0), r)           # ncclCommInitRank: waits for all
                if self.init_done_at is None:
                    self.init_done_at = self.last_commit_at = env.now
                    run.log("joined", self.n, f"communicator {self.index}: all {self.n} ranks joined "
                            f"(the rendezvous completed, the workers started, ncclCommInitRank returned)")
                    run.log("training", self.n, f"from step {self.resume_step} of {sc.total_steps}")
            self.enter(r, TRAINING)
            while step < total:
                yield env.timeout(self.step_s)                # forward + backward
                step += 1
                self.blocked_since[r] = env.now
                yield self.comm.arrive(("all-reduce", step), r)
                if step > self.done_step:
                    self.done_step, self.done_at = step, env.now
                if step % every == 0 and step < total:
                    self.enter(r, CHECKPOINTING)
                    if sc.checkpoint_cost_s:
                        yield env.timeout(sc.checkpoint_cost_s)   # write this rank's shard
                    self.blocked_since[r] = env.now
                    yield self.comm.arrive(("checkpoint", step), r)
                    if self.committed_step < step:
                        self.committed_step, self.last_commit_at = step, env.now
                        run.step_done = step
                        run.log("checkpoint", self.n, f"step {step} saved by all {self.n} ranks")
                    self.enter(r, TRAINING)
                if self.until is not None and env.now >= self.until and step < total:
                    self.close(r, env.now, None)               # torchft: the next quorum regroups
                    if not self.over.triggered:
                        self.over.succeed("regroup")
                    return
            self.close(r, env.now, None)
            if not self.over.triggered:
                self.over.succeed(None)
        except simpy.Interrupt:
            return      # lost or torn down: the attempt already closed this rank's segment

    def lose(self, r: int, kind: str = "silent") -> bool:
        proc = self.procs.get(r)
        if proc is None or not proc.is_alive or self.over.triggered:
            return False
        now = self.run.env.now
        self.comm.lose(r)
        self.lost[r] = now
        if kind == "error" and not self.errored:
            self.errored = True
            for op in list(self.comm.pending.values()):
                self._error_after(op, self.run.sc.nccl_error_s)
        if r in self.state:
            self.close(r, now, None)
            self.state[r] = (LOST, now)
        proc.interrupt("lost")
        return True

    def tear_down(self, op: _Op) -> None:
        """torchrun stops every worker (``torchrun-elastic``)."""
        self.close_all(self.run.env.now, op)
        for proc in self.procs.values():
            if proc.is_alive:
                proc.interrupt("torn down")
        if self.replacement is not None and self.replacement.is_alive:
            self.replacement.interrupt("torn down")


def _replacement(run: _Run, att: _Attempt, r: int):
    """strategy="replace-rank": start a new process for rank r only, and watch it wait.

    torchrun may tear the attempt down at any point (the watchdog can fire while the replacement is
    still being scheduled, when ``restart_s`` >= the timeout): the interrupt ends this process quietly.
    """
    env, sc = run.env, run.sc
    try:
        yield env.timeout(sc.restart_s)
        if att.over.triggered:
            return
        where = min(att.comm.pending.values(), key=lambda op: op.started, default=None)
        blocked_in = op_name(where.key) if where else "a collective"
        run.log("replacement waiting", 1,
                f"a new rank {r} called ncclCommInitRank on communicator {att.index + 1}: 1/{run.n} ranks "
                f"joined; the other {run.n - 1} are blocked in {blocked_in} of communicator {att.index} "
                f"and never call init, so replacing one rank cannot complete either barrier")
        att.close(r, env.now, None)
        att.state[r] = (REPLACEMENT, env.now)
        fresh = Communicator(env, run.n, att.index + 1)
        yield fresh.arrive(("init", 0), r)
    except simpy.Interrupt:
        return


def _chaos(run: _Run, loss: RankLoss):
    env = run.env
    yield env.timeout(loss.at_s)
    att = run.attempt
    if run.finished_at is not None:
        run.log("rank lost", 0, f"rank {loss.rank} lost after the job finished: no effect")
        return
    if att is None or not att.lose(loss.rank, loss.kind):
        run.log("rank lost", 0, f"rank {loss.rank} lost while the job was restarting: "
                "the restart replaces it")
        return
    run.log("rank lost", 1, f"rank {loss.rank} preempted/killed; its process is gone" if loss.kind == "error"
            else f"rank {loss.rank} stops answering (hung); no error reaches the other ranks")
    if run.sc.strategy == "replace-rank":
        att.replacement = env.process(_replacement(run, att, loss.rank))


def _torchrun(run: _Run):
    """The launcher: start all workers; on a worker failure recover on the scenario's rung.

    Without a rung (or ``restart``), torchrun stops all workers and restarts all from the last
    checkpoint (``torchrun-elastic``); ``in-place`` and ``requeue`` do the same with their own
    recovery times; ``shrink`` and ``grow`` go on from the step in flight without (or, after the
    spare joins, with) the lost rank; ``per-step`` lets every replica group but the lost rank's go
    on at once, and takes that group back at the first step after it healed. Times come from
    :mod:`courselib.model.recovery`.
    """
    env, sc = run.env, run.sc
    joins = list(sc.joins)
    index = 0
    att = run.attempt = _Attempt(run, index, joins, run.step_done)
    while True:
        op = yield att.over
        if op is None:
            run.finished_at = env.now
            run.log("finished", att.n, f"all {sc.total_steps} steps done")
            return
        if op == "regroup":    # torchft: the healed group rejoins at this step's quorum
            run.collectives.extend(att.comm.completed)
            index += 1
            run.log("regrouped", run.n, f"replica group back: all {run.n} ranks train again from step "
                    f"{att.done_step} (communicator {index})")
            att = run.attempt = _Attempt(run, index, [env.now] * run.n, att.done_step, skip_init=True)
            continue
        detected = env.now
        lost = sorted(att.lost)
        kind = op_name(op.key)
        arrived = att.arrived_at_timeout
        missing = att.n - arrived
        name = sc.recovery or "restart"
        if not lost:
            name = "restart"      # a late rank in the first barrier: nothing to shrink around
        whole = name in ("restart", "in-place", "requeue")
        then = {"restart": "torchrun stops all workers", "in-place": "every container restarts in place",
                "requeue": "the job is requeued (Slurm expedited requeue)",
                "shrink": "the survivors revoke the communicator and shrink it",
                "grow": "the survivors revoke and shrink the communicator, then grow it with a spare",
                "per-step": "torchft drops the lost rank's replica group from this step's quorum"}[name]
        run.log("stalled", arrived,
                f"{arrived} ranks blocked in {kind} (communicator {index}); "
                f"{missing} never arrived" + (f" (rank {', '.join(map(str, lost))} lost)" if lost else ""),
                t=op.started)
        if att.detected_by == "NCCL error":
            run.log("nccl error", att.n, f"NCCL reports an error {detected - op.started:.1f}s into {kind} "
                    "(the sends to the vanished rank ran out of InfiniBand retries)"
                    + ("; the watchdog sees the asynchronous error and tears the process down "
                       "(TORCH_NCCL_ASYNC_ERROR_HANDLING=3)" if whole else "") + f"; {then}")
        elif att.detected_by == "first barrier timeout":
            run.log("timed out", att.n, f"{kind} not complete after {att.limit(op):g}s: torchrun's rendezvous "
                    "times out (RendezvousTimeoutError, which torchrun treats as non-retryable); the job "
                    "fails and its job manager starts every worker again")
        else:
            run.log("timed out", att.n, f"{'torchft' if name == 'per-step' else 'watchdog'}: {kind} not "
                    f"done after {att.limit(op):g}s; {then}")
        att.tear_down(op)
        run.collectives.extend(att.comm.completed)
        rung = sc.rung(None if att.last_commit_at is None or not lost
                       else max(0.0, min(att.lost.values()) - att.last_commit_at))
        index += 1
        if whole:
            joined = [r for r in range(run.n) if joins[r] <= detected]
            wait = sc.restart_s if rung is None else rung.recovery_s
            yield env.timeout(wait)          # rescheduling + reloading the checkpoint
            restarted = env.now
            for r in joined:
                run.seg(r, detected, restarted, RESTARTING)
            anchor = att.last_commit_at       # None: init never completed, nothing to lose but time
            lost_s = (detected - anchor) * len(joined) if anchor is not None else 0.0
            lost_s += wait * len(joined)
            _failure(run, att, op, kind, detected, restarted, anchor, att.committed_step, lost_s, name, run.n)
            why = (f"; rank {lost[0]} alone could not rejoin: communicator {index - 1} is unusable once a "
                   f"rank is lost and a new one needs all {run.n} ranks in its first barrier") if lost else ""
            how = {"restart": "restarted by torchrun", "in-place": "restarted in place",
                   "requeue": "started again by the requeued job"}[name]
            run.log("restarted", run.n, f"all {run.n} workers {how}, resuming from "
                    f"step {att.committed_step}" + (" (the last checkpoint)" if att.committed_step else "")
                    + why)
            joins = [max(j, restarted) for j in joins]
            att = run.attempt = _Attempt(run, index, joins, run.step_done)
            continue
        survivors = [r for r in att.members if r not in att.lost]
        base = sc.step_s
        if name in ("shrink", "grow"):
            yield env.timeout(rung.recovery_s)
            restarted = env.now
            for r in survivors:
                run.seg(r, detected, restarted, RESTARTING)
            members = survivors if name == "shrink" else sorted(set(att.members) | set(lost))
            lost_s = len(survivors) * (restarted - att.done_at)
            _failure(run, att, op, kind, detected, restarted, att.done_at, att.done_step, lost_s, name, len(members))
            run.log("restarted", len(members),
                    f"communicator {index - 1} revoked and shrunk to {len(survivors)} ranks"
                    + (f", then grown back to {len(members)} with a spare in rank {lost[0]}'s place"
                       if name == "grow" else " (the global batch rescaled: each step takes "
                       f"{run.n}/{len(members)} as long)")
                    + f"; training goes on from step {att.done_step} (the step in flight is redone), not "
                    "from the checkpoint")
            joins = [restarted] * run.n
            att = run.attempt = _Attempt(run, index, joins, att.done_step, members=members,
                                         step_s=base * run.n / len(members), skip_init=True)
            continue
        # per-step (torchft): the lost rank's replica group leaves; the others go on at once
        g = run.n // rung_groups(sc)
        group = set(range(lost[0] // g * g, lost[0] // g * g + g))
        rest = [r for r in survivors if r not in group]
        back = rung.recovery_s
        for r in group - set(lost):
            run.seg(r, detected, detected + back, RESTARTING)
        lost_s = len(att.members) * (detected - att.done_at) + len(group) * back
        _failure(run, att, op, kind, detected, detected, att.done_at, att.done_step, lost_s, name, len(rest))
        run.log("restarted", len(rest), f"the {len(rest)} ranks of the other replica groups go on from step "
                f"{att.done_step} (its uncommitted step redone), each step {run.n}/{len(rest)} as long; the "
                f"{g} ranks of rank {lost[0]}'s group restart and heal from a peer replica for "
                f"{back:.0f}s")
        att = run.attempt = _Attempt(run, index, [detected] * run.n, att.done_step, members=rest,
                                     step_s=base * run.n / len(rest), skip_init=True, until=detected + back)


def rung_groups(sc: BarrierScenario) -> int:
    """The torchft replica groups of ``sc``'s ladder inputs."""
    return sc.ladder_inputs().groups


def _failure(run: _Run, att: _Attempt, op: _Op, kind: str, detected: float, restarted: float,
             anchor: float | None, resumed: int, lost_s: float, name: str, ranks_after: int) -> None:
    lost = sorted(att.lost)
    run.failures.append(Failure(
        cause="rank lost" if lost else "late rank", detected_by=att.detected_by,
        lost_ranks=tuple(lost), lost_at_s=min(att.lost.values()) if lost else None,
        stalled_in=kind, stalled_at_s=op.started, detected_at_s=detected,
        restarted_at_s=restarted, last_checkpoint_at_s=anchor,
        resumed_from_step=resumed, lost_gpu_hours=lost_s / SECONDS_PER_HOUR,
        recovery=name, ranks_after=ranks_after))


def simulate(scenario: BarrierScenario) -> BarrierResult:
    """Run one scenario to the end (job finished, or hung forever when no timeout can fire)."""
    run = _Run(scenario)
    env = run.env
    for loss in sorted(scenario.losses, key=lambda l: l.at_s):
        env.process(_chaos(run, loss))       # scheduled first: a loss at a step boundary wins the tie
    env.process(_torchrun(run))
    env.run()
    finished = run.finished_at is not None
    end = run.finished_at if finished else env.now   # stale watchdog timers may run past the finish
    if not finished and run.attempt is not None:
        # hung forever: no watchdog can fire; close every rank's segment where time stopped
        att = run.attempt
        end += HUNG_SHOWN_S
        run.log("hung", run.n, "no watchdog can fire (timeout disabled): the job hangs forever "
                f"(drawn for {HUNG_SHOWN_S / 3600:g} h)")
        att.close_all(end, min(att.comm.pending.values(), key=lambda op: op.started, default=None))
    if run.attempt is not None:       # failed attempts were added by _torchrun
        run.collectives.extend(run.attempt.comm.completed)
    joins = scenario.joins
    held = sum(max(0.0, end - j) for j in joins) / SECONDS_PER_HOUR
    init_wait = sum(e - s for rows in run.segments.values() for s, e, st in rows if st == WAITING)
    trace = tuple(sorted(run.trace, key=lambda e: e.t_s))   # stable: equal times keep their order
    return BarrierResult(
        scenario=scenario, finished=finished, finished_at_s=run.finished_at, ended_at_s=end,
        restarts=len(run.failures), failures=tuple(run.failures),
        init_wait_gpu_hours=init_wait / SECONDS_PER_HOUR,
        lost_gpu_hours=sum(f.lost_gpu_hours for f in run.failures),
        held_gpu_hours=held, collectives=tuple(run.collectives), trace=trace,
        segments=run.segments)
