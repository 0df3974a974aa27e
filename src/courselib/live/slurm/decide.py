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
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from courselib.live.slurm.replay import ReplayResult
from courselib.live.slurm.result import run_on_real_nodes
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


def decisions(result: ReplayResult, *, slack: float = 2.0) -> list[Decision]:
    """Each second at which the real Slurm started jobs, checked (see the module's docstring). The
    decision agrees if every job Slurm started in that second is one the model starts, and every
    other job the model starts there Slurm started within ``slack`` seconds (its next pass). A job
    that ended in the same second as the starts may have ended before or after them, and the starts
    may have come at either end of their second (:data:`CLOCK`): each reading is tried."""
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
        for k in range(len(ambiguous) + 1):
            for gone in itertools.combinations(ambiguous, k):
                for now in (t, t + CLOCK):
                    m = _model_starts(plan_w, real, t, now, ended | set(gone))
                    if m not in options:
                        options.append(m)
        ok = any(set(started) <= set(m) and set(m) - set(started) <= soon for m in options)
        out.append(Decision(t, started, options, ambiguous, ok))
    return out


def _model_starts(workload: Workload, real: dict, t: float, now: float, ended: set) -> list[str]:
    """The jobs the reference ``slurm`` policy starts at ``now`` (within the second ``t``) from the
    real state just before."""
    state = SchedState(workload, reference=True)
    state.now = now
    policy = Slurm(workload)
    policy.reference = True
    waiting = {}
    for job in workload.jobs:
        rj = real[job.name]
        if job.submit >= t + 1.0 or job.name in ended or rj.rejected:  # (submits exact; starts floored)
            continue
        run = state.submit(job)
        policy.jobs.append(run)
        if rj.start is not None and rj.start < t:
            run_on_real_nodes(state, policy, run, rj.nodes, rj.start)
        else:
            waiting[job.name] = run
    policy.schedule(state)
    return sorted(n for n, run in waiting.items() if state.bound(run) > 0)


def format_decisions(ds: list[Decision]) -> str:
    lines = [f"t={d.t:g}s real {' '.join(d.real)}; model "
             + " | ".join(" ".join(m) or "-" for m in d.model)
             + (f" (ended that second: {' '.join(d.ambiguous)})" if d.ambiguous else "")
             + ("" if d.agrees else "  NO") for d in ds]
    lines.append(f"decisions: {sum(d.agrees for d in ds)}/{len(ds)} agree")
    return "\n".join(lines)
