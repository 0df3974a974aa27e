"""A Slurm replay checked decision by decision (issue 35): what the real Slurm started each second,
against what courselib's ``slurm`` policy starts in the real state just before.

On a busy cluster the order of starts over a whole replay depends on sub-second timing that neither
side models: slurmctld starts jobs from a main-scheduler pass and a backfill pass about once a
second each (``sched_interval=1``, ``bf_interval=1`` here), a node is free again only once its
job's epilog has completed, and squeue's times have a resolution of one second; a start a fraction
of a second later changes which job a later end lets in. :func:`decisions` takes the timing from
the real run and checks what the scheduler decides: at each second ``t`` at which the real Slurm
started jobs, the jobs running then (on their real nodes, each expected to end at its real start +
its time limit) and the jobs submitted by then and still waiting (in priority order) are given to
the reference policy, which runs one cycle, main scheduler and backfill, at ``t``.

**Two passes in one second.** The starts squeue shows in one second may come from two passes, with
a job's end between them. Which passes a second can hold, in slurmctld at slurm-26-05-3-1 with this
course's ``SchedulerParameters`` (``cluster.py``: ``sched_interval=1``, ``sched_min_interval=100000``,
``bf_interval=1``, ``bf_continue``; no ``defer``):

- the **main scheduler** runs in its own thread (``job_scheduler.c`` ``_sched_agent`` L914-959) on
  each request :func:`schedule` queues (L900-911), once ``sched_min_interval`` microseconds (0.1 s
  here, L1383-1391) have passed since its last pass ended (L929-948). It places a job only on nodes
  idle at that instant (``node_scheduler.c`` L1797-1813, not even completing ones), starts jobs in
  priority order and stops at the first that cannot start (``job_scheduler.c`` L2081-2093,
  L1630-1650): it backfills nothing. Requests come at each whole second (``controller.c``
  L2672-2676, L2933-2939, L2956: ``sched_interval``) and from the epilog-complete RPC of a job's
  last node (``proc_req.c`` L2008-2012, L2039-2040, without ``defer``; ``job_mgr.c``
  L16751-16759). When a node's slurmd answers the terminate request as already complete instead
  (``agent.c`` L1140-1156), the end only counts a request for the whole-second thread (L891-895),
  which acts on it after ``batch_sched_delay`` (3 s by default: ``controller.c`` L2940-2947,
  ``job_scheduler.c`` L1202-1211): the next pass is the next whole second's. That pass runs in
  the first milliseconds of its second, and a job it starts may be dated to the second before:
  ``select_nodes`` dates a start with ``time(NULL)`` (``node_scheduler.c`` L2503, L2919), which here
  still reads the second before in the first millisecond or two (in six real runs of 2026-12-05,
  each of the 17 of 64 main-scheduler starts logged at X.000 or X.001 shows start X-1 in squeue,
  every other one X);
- the **backfill** pass runs in a thread of its own, at its own phase: it sleeps ``bf_interval``
  after each pass (``backfill.c`` L1155-1161) and runs when that much has passed and something
  changed (L1184-1191), so two passes begin at least a second apart and **a second holds at most
  one** (their starts dated as above, two could share a second only within a tick of the clock). It
  holds the job and node write locks for the whole pass (L1197-1204) and would yield them
  only after ``bf_yield_interval`` (2 s by default, L107, L2478, L2847), far longer than a pass over
  this queue (at most 17 ms in the 263 passes of two real runs of 2026-12-05): no end and no
  main-scheduler pass falls inside it. It tests every job in priority order (L2383, L2427).

A job that ends between two passes is running for the first and gone for the second. So when a job
ended in the same second as the starts and no single reading agrees, the starts are also split into
an earlier and a later group (:func:`_two_passes`): the earlier group must be what the model starts
with that job running (on nodes it did not hold), the later one what the model starts once it has
ended, with the earlier group running on its real nodes. Of the two passes one is the main
scheduler's alone and the other a full cycle (main scheduler, then backfill), either way round:
- the main scheduler's whole-second pass while the job still ran, then the job's end and the
  second's backfill pass (after the main-scheduler pass the end may trigger);
- the second's backfill pass while the job still ran (it may start nothing), then the job's end and a
  main-scheduler pass: the one its epilog triggers, or the next whole second's, dated to this one.
Two full cycles in one second would need two backfill passes; two main-scheduler passes alone, a
second without one. That happens as the backfill thread's phase drifts past a whole second (in a
real run of 2026-12-05 a pass at 92.997 s, the next at 94.002 s; once in each of three runs); it is
not read here, so such a second whose starts differ from what a full cycle would start fails.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from courselib.live.slurm.cluster import REPLAY_BF_INTERVAL
from courselib.live.slurm.replay import ReplayResult
from courselib.live.slurm.result import node_indexes, run_on_real_nodes
from courselib.model.gang import SchedState
from courselib.model.policies.slurm import Slurm
from courselib.model.workload import Workload


#: How far into its second a start may have been: squeue's times are whole seconds from the second
#: the replay released the partition in, the submit times exact from the release itself, so a wait
#: that ends within the second (``--switches=N@WAIT``) is tried at both ends of it.
CLOCK = 0.999


@dataclass
class Decision:
    """What the real Slurm started in one second, and what the model starts in the real state then."""
    t: float
    real: list[str]
    model: list[list[str]]   # the model's starts, under each reading of the same-second ends
    ambiguous: list[str]     # jobs that ended in the same second (before or after the starts)
    agrees: bool
    #: when only two passes in the second explain it: (earlier starts, jobs that ended between the
    #: passes, later starts)
    passes: tuple[list[str], list[str], list[str]] | None = None
    #: and which passes they were, earlier and later: one of :data:`PASS_ORDERS`
    order: tuple[str, str] | None = None


def decisions(result: ReplayResult, *, slack: float = 2.0, seconds=None) -> list[Decision]:
    """Each second at which the real Slurm started jobs, checked (see the module's docstring). The
    decision agrees if every job Slurm started in that second is one the model starts, and every
    other job the model starts there Slurm started within ``slack`` seconds (its next pass). A job
    that ended in the same second as the starts may have ended before or after them, and the starts
    may have come at either end of their second (:data:`CLOCK`): each reading is tried. If none
    agrees, the second's starts may have come from two passes with the end between them (see the
    module's docstring): each such split is tried too. ``seconds``: only those (default: every
    second with a start)."""
    plan_w = result.as_submitted()
    real = {rj.name: rj for rj in result.jobs}
    out = []
    for t in sorted({rj.start for rj in result.jobs if rj.start is not None}):
        if seconds is not None and t not in seconds:
            continue
        started = sorted(n for n, rj in real.items() if rj.start == t)
        before = [n for n, rj in real.items() if rj.start is not None and rj.start < t]
        ended = {n for n in before if real[n].end is not None and real[n].end < t}
        ambiguous = [n for n in before if real[n].end == t]
        soon = {n for n, rj in real.items() if rj.start is not None and t < rj.start <= t + slack}

        options = []
        for gone in _subsets(ambiguous):
            for now in (t, t + CLOCK):
                m = _model_starts(plan_w, real, t, now, ended | gone)
                if m not in options:
                    options.append(m)
        ok = any(set(started) <= set(m) and set(m) - set(started) <= soon for m in options)
        passes = order = None
        if not ok and ambiguous:
            passes, order = _two_passes(plan_w, real, t, started, ended, ambiguous, soon) or (None, None)
        out.append(Decision(t, started, options, ambiguous, ok or passes is not None, passes, order))
    return out


def _subsets(xs, smallest: int = 0):
    return [set(c) for k in range(smallest, len(xs) + 1) for c in itertools.combinations(xs, k)]


#: The passes one second can hold, earlier and later (see the module's docstring): the main
#: scheduler's alone ("main") and a full cycle, main scheduler then backfill ("cycle"), either way
#: round; never two cycles (at most one backfill pass a second) nor two main passes alone.
PASS_ORDERS = (("main", "cycle"), ("cycle", "main"))
PASS_NAMES = {"main": "the main scheduler", "cycle": "main scheduler and backfill"}


def _two_passes(workload: Workload, real: dict, t: float, started: list[str], ended: set,
                ambiguous: list[str], soon: set):
    """A split of the second's starts into an earlier pass, made while the jobs ``between`` still
    ran, and a later one, made once they had ended, each of which the model makes; as
    ``((earlier, between, later), order)``, or None. The earlier starts must lie off the nodes of
    the jobs still running then, and what else the model starts in either pass Slurm started later
    that second or within the slack. One pass is the main scheduler's alone (it starts jobs in
    priority order and stops at the first that cannot start, ``job_scheduler.c`` L2081-2093,
    L1630-1650: it backfills nothing), the other a full cycle (a backfill pass tests every job in
    priority order, ``backfill.c`` L2383, L2427), in either order (:data:`PASS_ORDERS`). The
    earlier pass may have started nothing only if it was the second's backfill pass: a main pass
    alone before the end and another after it would leave the second without one."""
    for first in _subsets(started):
        later = set(started) - first
        held = {i for n in first for i in node_indexes(real[n].nodes)}
        if not later:
            continue
        for between in _subsets(ambiguous, 1):
            if held & {i for n in between for i in node_indexes(real[n].nodes)}:
                continue  # the earlier pass could not place a job on a running job's nodes
            for gone in _subsets([n for n in ambiguous if n not in between]):
                for order in PASS_ORDERS:
                    if not first and order[0] == "main":
                        continue
                    for now1 in (t, t + CLOCK):
                        m1 = set(_model_starts(workload, real, t, now1, ended | gone,
                                               backfill=order[0] == "cycle"))
                        if not (first <= m1 and m1 - first <= soon | later):
                            continue
                        for now2 in sorted({now1, t + CLOCK}):
                            m2 = set(_model_starts(workload, real, t, now2, ended | gone | between, first,
                                                   backfill=order[1] == "cycle"))
                            if later <= m2 and m2 - later <= soon:
                                return (sorted(first), sorted(between), sorted(later)), order
    return None


def _model_starts(workload: Workload, real: dict, t: float, now: float, ended: set,
                  running: set = frozenset(), *, backfill: bool = True) -> list[str]:
    """The jobs the reference ``slurm`` policy starts at ``now`` (within the second ``t``) from the
    real state just before (with the jobs ``running``, started in an earlier pass of that second,
    on their real nodes); with ``backfill=False`` its main scheduler's pass alone."""
    state = SchedState(workload, reference=True)
    state.now = now
    policy = Slurm(workload, backfill=backfill, bf_interval=REPLAY_BF_INTERVAL)
    policy.reference = True
    waiting = {}
    for job in workload.jobs:
        rj = real[job.name]
        if job.submit >= t + 1.0 or job.name in ended or rj.rejected:  # (submits exact; starts floored)
            continue
        run = state.submit(job)
        policy.jobs.append(run)
        if rj.start is not None and (rj.start < t or job.name in running):
            run_on_real_nodes(state, policy, run, rj.nodes, rj.start)
        else:
            waiting[job.name] = run
    policy.schedule(state)
    return sorted(n for n, run in waiting.items() if state.bound(run) > 0)


def format_decisions(ds: list[Decision]) -> str:
    lines = [f"t={d.t:g}s real {' '.join(d.real)}; model "
             + " | ".join(" ".join(m) or "-" for m in d.model)
             + (f" (ended that second: {' '.join(d.ambiguous)})" if d.ambiguous else "")
             + (f"; two passes: {' '.join(d.passes[0]) or 'nothing'} while {' '.join(d.passes[1])} ran, "
                f"then {' '.join(d.passes[2])} ({PASS_NAMES[d.order[0]]}, then {PASS_NAMES[d.order[1]]})"
                if d.passes else "")
             + ("" if d.agrees else "  NO") for d in ds]
    lines.append(f"decisions: {sum(d.agrees for d in ds)}/{len(ds)} agree")
    return "\n".join(lines)
