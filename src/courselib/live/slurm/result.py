"""Compare a Slurm replay with courselib's ``slurm`` policy; print it, record it, read it back.

:func:`compare` runs the model (:func:`courselib.sim.gang.simulate`) on exactly what was
submitted and counts where the two agree: each job started in both or neither, the start order
over pairs the model starts clearly apart, and each job's pending reason as the replay read it,
against the model's in the real states in which Slurm gave it (:func:`reasons_in_real_state`). :func:`source` gives a chapter the live replay where a local Slurm of the right
shape is up, else the recorded one (:func:`courselib.live.recorded.live_or_recorded`).

:func:`courselib.live.slurm.decide.decisions` checks a replay decision by decision instead (a busy
cluster, where the order of starts depends on sub-second timing).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.io.workload import load_workload
from courselib.live import recorded as _recorded
from courselib.live.replays import (Agreement, Recorded, host, max_start_error, model_start_order,
                                    order_lines, order_pairs, read_replay, recorded_from)
from courselib.live.replays import record as _record
from courselib.live.slurm import cluster as slurm
from courselib.live.slurm.cluster import BASE_PORT, REPLAY_BF_INTERVAL, Cluster, version
from courselib.live.slurm.plan import plan_replay
from courselib.live.slurm.replay import FINAL_STATES, RealJob, ReplayResult, run_replay
from courselib.model.gang import SchedState
from courselib.model.policies.slurm import BF_INTERVAL_S, Slurm
from courselib.model.topology import domains_spanned
from courselib.model.workload import Workload


@dataclass
class JobComparison:
    name: str
    real_start: float | None
    model_start: float | None
    real_reason: str | None
    model_reason: str | None
    real_state: str
    started_agrees: bool
    reason_agrees: bool | None  # None: not compared (the model has no reason for it)
    real_nodes: str = ""        # squeue's node list (a topology cluster: where it landed)
    real_domains: list | None = None    # the innermost level's domains of those nodes
    model_domains: list | None = None   # the model's, on the same workload
    placement_agrees: bool | None = None  # None: not compared (no topology, or not started in both)


@dataclass
class Comparison(Agreement):
    """Where the real Slurm and courselib's ``slurm`` policy agree, job by job."""
    started_checks: int
    started_agree: int
    reason_checks: int
    reason_agree: int
    max_start_error: float | None  # s, over jobs both started
    as_written_order: list[str] = field(default_factory=list)
    placement_checks: int = 0   # jobs started in both on a topology cluster: same domains?
    placement_agree: int = 0
    level: str = ""             # the level placements are compared at (the innermost)

    @property
    def checks(self) -> int:
        return self.started_checks + self.order_pairs + self.reason_checks + self.placement_checks

    @property
    def agreed(self) -> int:
        return self.started_agree + self.order_agree + self.reason_agree + self.placement_agree


def model_run(workload: Workload, bf_interval: float = BF_INTERVAL_S):
    """courselib's ``slurm`` policy on ``workload`` (the simulator's :class:`Result`): with
    slurm.conf's ``bf_interval`` (30 s), or another, such as the replay cluster's
    (:data:`~courselib.live.slurm.cluster.REPLAY_BF_INTERVAL`) for a workload as submitted."""
    from courselib.sim.gang import simulate
    return simulate(workload, "slurm", bf_interval=bf_interval)


def model_reasons_at_submit(workload: Workload) -> dict[str, str | None]:
    """The model's pending reason of each job right after the scheduling cycle at its submit time.

    Obtained by running the simulator with ``horizon`` just past that submit time (events at the
    horizon are processed, so the submission's cycle has run; the simulator schedules an arrival
    at ``now + (submit - now)``, as simpy does, which can be a rounding error past ``submit``).
    The workload is one as submitted: backfill runs every ``bf_interval`` of the replay cluster.
    """
    from courselib.sim.gang import simulate
    out: dict[str, str | None] = {}
    for t in sorted({j.submit for j in workload.jobs}):
        res = simulate(workload, "slurm", horizon=t + 1e-6, bf_interval=REPLAY_BF_INTERVAL)
        for j in workload.jobs:
            if j.submit == t:
                jr = res.job(j.name)
                out[j.name] = None if jr.start is not None else jr.pending_reason
    return out


def run_on_real_nodes(state: SchedState, policy: Slurm, run, nodes: str, began: float) -> None:
    """Bind ``run`` to the nodes squeue named (its pods spread evenly: squeue names the nodes, not the
    tasks on each), expected to end at ``began`` + its time limit, as Slurm's backfill expects."""
    idx = node_indexes(nodes)
    each, more = divmod(run.job.pods, len(idx))
    state.bind_plan(run, [(i, each + (k < more)) for k, i in enumerate(idx)])
    policy.expected_end[run.job.name] = began + run.job.planned_runtime


def reasons_in_real_state(workload: Workload, result: ReplayResult, name: str, t: float,
                          polls: list, most: int = 4) -> set[str | None]:
    """The reasons the reference ``slurm`` policy gives job ``name`` after one cycle (main scheduler
    and backfill) at ``t`` in the real states in which Slurm may have given it a reason seen at
    ``t``. The pass that gave it ran between two polls of squeue (``polls``: the one before, the
    one that first showed it; :attr:`RealJob.reason_state`, :attr:`RealJob.verdict_state`); each job that differs between them (started, ended, submitted) is tried both
    ways (up to ``most`` such jobs, else the two polls alone). In each state the jobs squeue showed
    running are on their real nodes (each expected to end at its real start + its time limit) and
    those it showed pending wait in priority order. None in the set: the model starts it there.

    A reason is a verdict on a state. Read against the model's own timeline it also tests timing
    neither side models (an epilog's second, a pass a second later), which on a loaded machine
    swaps ``Resources`` and ``Priority`` between the two jobs at the head of the queue; read against
    the real state it tests the rule alone."""
    before, after = ({k: tuple(v) for k, v in rows.items()} for rows in polls)
    moved = sorted(k for k in set(before) | set(after) if k != name and before.get(k) != after.get(k))
    states = [after, before] if len(moved) > most else [
        {**after, **{k: before.get(k, ("", "")) for k in subset}}
        for n in range(len(moved) + 1) for subset in itertools.combinations(moved, n)]
    out: set[str | None] = set()
    for rows in states:
        state = SchedState(workload, reference=True)
        state.now = t
        policy = Slurm(workload, bf_interval=REPLAY_BF_INTERVAL)
        policy.reference = True
        runs = {}
        try:
            for job in workload.jobs:
                st, nodes = ("PENDING", "") if job.name == name else rows.get(job.name, ("", ""))
                if not st or st in FINAL_STATES:
                    continue  # not submitted yet, or over
                run = runs[job.name] = state.submit(job)
                policy.jobs.append(run)
                if st != "PENDING":
                    began = result.job(job.name).start
                    run_on_real_nodes(state, policy, run, nodes, t if began is None else began)
        except ValueError:
            continue  # two jobs on one node: a mix of the polls that never happened
        policy.schedule(state)
        out.add(None if state.bound(runs[name]) > 0 else runs[name].pending_reason)
    return out


def compare(result: ReplayResult, *, name: str = "", tolerance: float = 1.5) -> Comparison:
    """Compare a real replay with the model run on the same (as-submitted) workload.

    Checks: (1) each job started in both or in neither; (2) for every pair of jobs the model
    starts at clearly different times (more than ``tolerance`` s apart), the real Slurm started
    them in the same order; (3) each job's pending reason: read while it waited, against the
    model's reasons in the real states in which Slurm gave it (:func:`reasons_in_real_state`; a job
    the model would start then that the real Slurm started within ``tolerance`` s is not held
    against either); otherwise (a job that started before its reason was read, a replay recorded
    before that state was kept), against the model's reason right after its submission. A job sbatch refused counts as pending with no reason.
    """
    plan = result.plan
    submitted = result.as_submitted()
    model = model_run(submitted, REPLAY_BF_INTERVAL)  # (the model in the replay's seconds)
    reasons = model_reasons_at_submit(submitted)
    rows = []
    for sub in plan.submissions:
        rj = result.job(sub.name)
        mj = model.job(sub.name)
        real_reason = rj.reason if rj.rejected is None else f"rejected: {rj.rejected}"
        m_reason = reasons.get(sub.name)
        unseen = False

        def judged(reason: str, t: float, polls: list) -> tuple[str, bool]:
            """The model's reason in the real polls around ``reason`` (seen at ``t``): ``reason``
            itself if the model gives it in one of them; and whether there is no verdict to compare
            (the model starts it in those states, and so did Slurm's next pass)."""
            said = reasons_in_real_state(submitted, result, sub.name, t, polls)
            return (reason if reason in said else " | ".join(sorted(r or "starts" for r in said)),
                    said == {None} and rj.start is not None and rj.start - t <= tolerance)

        if rj.rejected is None and rj.reason is not None and rj.reason_state is not None:
            # the reason read while it waited, around its last change
            m_reason, unseen = judged(rj.reason, next(t for t, r in reversed(rj.reasons) if r == rj.reason),
                                      rj.reason_state)
        waited = bool(rj.reasons) or (rj.start is not None and rj.start - sub.submit_at >= 1.0)
        if real_reason is None and rj.rejected is None and rj.start is not None and waited:
            # It waited (squeue showed it pending, or it started a second or more after its
            # submission), then started before its reason was read: the scheduler's first verdict, if
            # squeue showed one (the model's is the one right after the submission cycle); else the
            # replay cannot tell (no check: on a loaded machine one poll may see it pending with no
            # reason yet and the next see it running). A transient reason of a job the model starts
            # at once (backfill runs up to bf_interval later) is not held against it.
            first = rj.verdict
            real_reason = first if first is not None and m_reason is not None else None
            unseen = first is None
            if first is not None and rj.verdict_state is not None:
                # that verdict, like a reason read while waiting, against the model in the real
                # states in which Slurm gave it, not on the model's own timeline (where a job
                # ahead of it may have started a moment sooner or later)
                real_reason = first
                m_reason, unseen = judged(first, next(t for t, r in rj.reasons if r == first),
                                          rj.verdict_state)
        started_ok = (rj.start is not None) == (mj.start is not None)
        reason_ok = None if (m_reason is None and real_reason is None) or unseen else (m_reason == real_reason)
        rows.append(JobComparison(sub.name, rj.start, mj.start, real_reason, m_reason, rj.state,
                                  started_ok, reason_ok))
    spec = submitted.cluster
    level = spec.levels[-1] if spec.topology else ""
    for row in rows:
        row.real_nodes = result.job(row.name).nodes
        if level and row.real_start is not None and row.model_start is not None:
            row.real_domains = domains_spanned(spec, node_indexes(row.real_nodes), level)
            row.model_domains = list((model.job(row.name).domains or {}).get(level, []))
            row.placement_agrees = row.real_domains == row.model_domains
    pairs, agree, bad = order_pairs(rows, tolerance)
    reason_rows = [r for r in rows if r.reason_agrees is not None]
    placed = [r for r in rows if r.placement_agrees is not None]
    return Comparison(
        workload=name, jobs=rows, real_order=result.start_order(), model_order=model_start_order(model),
        order_pairs=pairs, order_agree=agree, order_disagreements=bad,
        started_checks=len(rows), started_agree=sum(r.started_agrees for r in rows),
        reason_checks=len(reason_rows), reason_agree=sum(bool(r.reason_agrees) for r in reason_rows),
        max_start_error=max_start_error(rows, 2),
        as_written_order=model_start_order(model_run(plan.workload)),
        placement_checks=len(placed), placement_agree=sum(bool(r.placement_agrees) for r in placed),
        level=level)


def node_indexes(hostlist: str) -> list[int]:
    """``node[1-3,7],node9`` (squeue's %N) -> 0-based indexes [0, 1, 2, 6, 8]."""
    out = []
    for m in re.finditer(r"node(?:\[([^\]]*)\]|(\d+))", hostlist):
        if m.group(2):
            out.append(int(m.group(2)) - 1)
            continue
        for part in m.group(1).split(","):
            lo, _, hi = part.partition("-")
            out.extend(range(int(lo) - 1, int(hi or lo)))
    return out


def format_comparison(c: Comparison) -> str:
    """The comparison as a table a learner can read, ending in the agreement figure."""
    def t(x):
        return "-" if x is None else f"{x:.0f}s" if float(x).is_integer() else f"{x:.1f}s"
    lines = [f"{'job':<12} {'real start':>10} {'model start':>11}  {'real reason':<20} "
             f"{'model reason':<20} agree"]
    for r in c.jobs:
        ok = r.started_agrees and r.reason_agrees is not False
        lines.append(f"{r.name:<12} {t(r.real_start):>10} {t(r.model_start):>11}  "
                     f"{(r.real_reason or '-')[:20]:<20} {(r.model_reason or '-'):<20} "
                     f"{'yes' if ok else 'NO'}")
    lines += order_lines(c.real_order, c.model_order, c.order_disagreements)
    if c.level:
        lines.append(f"where each job landed ({c.level} domains):")
        for r in c.jobs:
            if r.placement_agrees is not None:
                lines.append(f"  {r.name:<12} real {r.real_nodes} -> {' '.join(r.real_domains)}; "
                             f"model {' '.join(r.model_domains)}  {'yes' if r.placement_agrees else 'NO'}")
    placement = f", placement {c.placement_agree}/{c.placement_checks}" if c.level else ""
    lines.append(f"agreement: {c.agreed}/{c.checks} checks = {100 * c.agreement:.0f}% "
                 f"(started {c.started_agree}/{c.started_checks}, order {c.order_agree}/{c.order_pairs}, "
                 f"reasons {c.reason_agree}/{c.reason_checks}{placement}); largest start-time gap "
                 f"{t(c.max_start_error)}")
    return "\n".join(lines)


def replay_to_dict(result: ReplayResult) -> dict:
    plan = result.plan
    return {
        "shape": plan.shape.describe(),
        "scaling": plan.describe(),
        "unit_seconds": plan.unit,
        "seconds_per_minute": plan.seconds_per_minute,
        "notes": list(plan.notes),
        "submissions": [{"name": s.name, "sbatch": "sbatch " + " ".join(s.args),
                         "sleep": s.sleep, "submit_at": s.submit_at} for s in plan.submissions],
        "jobs": [asdict(j) for j in result.jobs],
        "start_order": result.start_order(),
        "wall_seconds": result.wall_seconds,
        "squeue_at_settle": result.squeue_at_settle,
    }


def format_replay(result: ReplayResult) -> str:
    plan = result.plan
    lines = [f"cluster: {plan.shape.describe()}", f"scaling: {plan.describe()}"]
    lines += [f"note: {n}" for n in plan.notes]
    for s in plan.submissions:
        rj = result.job(s.name)
        lines.append(f"  sbatch {' '.join(s.args)}  # sleeps {s.sleep:g}s, submitted at {s.submit_at:g}s")
    lines.append(f"{'job':<12} {'id':>5} {'submitted':>9} {'start':>6} {'end':>6} {'state':<10} "
                 f"{'reason after submit':<22} nodes")
    for rj in result.jobs:
        def t(x):
            return "-" if x is None else f"{x:g}"
        lines.append(f"{rj.name:<12} {rj.job_id or '-':>5} {t(rj.submitted):>9} {t(rj.start):>6} "
                     f"{t(rj.end):>6} {rj.state:<10} {(rj.rejected and 'rejected') or rj.reason or '-':<22} "
                     f"{rj.nodes}")
    lines.append(f"start order: {' '.join(result.start_order())}   ({result.wall_seconds:g} s)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- recorded runs

RECORDED_BY = "courselib slurm replay --record"


def slurm_version(cluster: Cluster | None = None) -> str:
    """``slurm-wlm 26.05.5``: what Debian's ``slurmctld -V`` says (through the cluster's launcher; default: the
    course's Slurm)."""
    return f"slurm-wlm {version(cluster.launcher if cluster is not None else None)}"


def record(result: ReplayResult, path, *, workload_text: str, workload_file: str,
           cluster: Cluster | None = None) -> Path:
    """Write a replay as JSON (the chapter's recorded run). Only overwrites files it wrote itself."""
    return _record(path, recorded_by=RECORDED_BY,
                   recorded_on=f"{host()}, {slurm_version(cluster)}",
                   recorded_at=result.release_epoch, workload_text=workload_text,
                   workload_file=workload_file, seconds_per_minute=result.plan.seconds_per_minute,
                   replay=replay_to_dict(result))


def load_recorded(name_or_path) -> Recorded:
    """A recorded replay: ``seed-512`` (shipped in ``courselib/data/recorded/slurm-seed-512.json``)
    or a path. The plan is rebuilt from the workload text stored in the file."""
    data, workload = read_replay(name_or_path, "slurm-")
    plan = plan_replay(workload, seconds_per_minute=data["seconds_per_minute"])
    rep = data["replay"]
    jobs = [RealJob(**{**j, "reasons": [tuple(r) for r in j["reasons"]]}) for j in rep["jobs"]]
    return recorded_from(data, ReplayResult(plan, jobs, 0.0, rep["wall_seconds"],
                                            rep.get("squeue_at_settle", "")))


def source(name: str, workload_path) -> _recorded.Source[ReplayResult]:
    """Replay ``workload_path`` on the local Slurm if one of the right shape is up, else the
    recorded run ``name`` (:func:`courselib.live.recorded.live_or_recorded`)."""

    plan = plan_replay(load_workload(workload_path))
    up: list[Cluster] = []

    def unavailable() -> str | None:
        why = slurm.unavailable_reason()
        if why is not None:
            return why
        cluster = slurm.load_cluster()
        if cluster is not None and cluster.all_ours() and cluster.shape.same_nodes(plan.shape):
            up.append(cluster)
            return None
        return (f"no local Slurm of this shape is up (`courselib slurm up {plan.shape.cli_args()}` "
                "starts one)")
    return _recorded.Source(lambda: run_replay(up[0], plan), lambda: load_recorded(name).recording(),
                            unavailable)


def slurm_port_base() -> int:
    """The first port a local cluster uses (slurmctld; node K listens on this + K)."""
    return BASE_PORT
