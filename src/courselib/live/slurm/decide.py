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

**Two passes in one second.** The starts squeue shows in one second may come from two passes:
slurmctld's main scheduler wakes at each whole second (``controller.c`` at slurm-26-05-3-1
L2672-2676) and runs its full-queue pass every ``sched_interval`` (L2933-2939), placing a job only
on nodes idle at that instant (``node_scheduler.c`` L1797-1813, not even completing ones); the
backfill pass runs later in the second, at its own phase (``backfill.c`` L1155-1190, its clock read
at L2286). A job that ends between the two is running for the first pass and gone for the second.
So when a job ended in the same second as two or more starts and no single reading agrees, the
starts are also split into an earlier and a later group: the earlier group must be what the model
starts with that job running (on nodes it did not hold), the later one what the model starts once
it has ended, with the earlier group running on its real nodes (:func:`_two_passes`).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

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


def decisions(result: ReplayResult, *, slack: float = 2.0) -> list[Decision]:
    """Each second at which the real Slurm started jobs, checked (see the module's docstring). The
    decision agrees if every job Slurm started in that second is one the model starts, and every
    other job the model starts there Slurm started within ``slack`` seconds (its next pass). A job
    that ended in the same second as the starts may have ended before or after them, and the starts
    may have come at either end of their second (:data:`CLOCK`): each reading is tried. If none
    agrees, the second's starts may have come from two passes with the end between them (see the
    module's docstring): each such split is tried too."""
    plan_w = result.as_submitted()
    real = {rj.name: rj for rj in result.jobs}
    out = []
    for t in sorted({rj.start for rj in result.jobs if rj.start is not None}):
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
        passes = None
        if not ok and ambiguous and len(started) > 1:
            passes = _two_passes(plan_w, real, t, started, ended, ambiguous, soon)
        out.append(Decision(t, started, options, ambiguous, ok or passes is not None, passes))
    return out


def _subsets(xs, smallest: int = 0):
    return [set(c) for k in range(smallest, len(xs) + 1) for c in itertools.combinations(xs, k)]


def _two_passes(workload: Workload, real: dict, t: float, started: list[str], ended: set,
                ambiguous: list[str], soon: set):
    """A split of the second's starts into an earlier pass, made while the jobs ``between`` still
    ran, and a later one, made once they had ended, each of which the model makes; or None. The
    earlier starts must lie off the nodes of the jobs still running then, and what else the model
    starts in either pass Slurm started later that second or within the slack. The earlier pass
    may be the main scheduler's alone (the whole-second pass starts jobs in priority order and
    stops at the first that cannot start, ``job_scheduler.c`` L2081-2093, L1630-1650: it
    backfills nothing) or a full cycle; the later one is a full cycle (a backfill pass tests every
    job in priority order, ``backfill.c`` L2383, L2427)."""
    for first in _subsets(started, 1):
        later = set(started) - first
        held = {i for n in first for i in node_indexes(real[n].nodes)}
        if not later or not held:
            continue
        for between in _subsets(ambiguous, 1):
            if held & {i for n in between for i in node_indexes(real[n].nodes)}:
                continue  # the earlier pass could not place a job on a running job's nodes
            for gone in _subsets([n for n in ambiguous if n not in between]):
                for now1, backfill in itertools.product((t, t + CLOCK), (False, True)):
                    m1 = set(_model_starts(workload, real, t, now1, ended | gone, backfill=backfill))
                    if not (first <= m1 and m1 - first <= soon | later):
                        continue
                    for now2 in sorted({now1, t + CLOCK}):
                        m2 = set(_model_starts(workload, real, t, now2, ended | gone | between, first))
                        if later <= m2 and m2 - later <= soon:
                            return sorted(first), sorted(between), sorted(later)
    return None


def _model_starts(workload: Workload, real: dict, t: float, now: float, ended: set,
                  running: set = frozenset(), *, backfill: bool = True) -> list[str]:
    """The jobs the reference ``slurm`` policy starts at ``now`` (within the second ``t``) from the
    real state just before (with the jobs ``running``, started in an earlier pass of that second,
    on their real nodes); with ``backfill=False`` its main scheduler's pass alone."""
    state = SchedState(workload, reference=True)
    state.now = now
    policy = Slurm(workload, backfill=backfill)
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
             + (f"; two passes: {' '.join(d.passes[0])} while {' '.join(d.passes[1])} ran, then "
                f"{' '.join(d.passes[2])}" if d.passes else "")
             + ("" if d.agrees else "  NO") for d in ds]
    lines.append(f"decisions: {sum(d.agrees for d in ds)}/{len(ds)} agree")
    return "\n".join(lines)
