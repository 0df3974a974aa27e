"""Compare a Kubernetes replay with courselib's model; print it, record it, read it back.

:func:`compare` runs the model (:func:`courselib.sim.gang.simulate`) on the same workload, given
what the real run decided that the model cannot know — the order the Job controller created the
pods (``kube-default``), the order the real scheduler tried the PodGroups (``kube-gang``: its own
log, checked against its queue's rule, :mod:`courselib.live.kube.queue`), or what an extension
recorded (Kueue: the order it drew among Workloads created together) — and counts
where the two agree: per job, whether it ever had all its pods placed and how many it held at the
end; the start order; the verdict (deadlock or not); an extension's own checks (evictions).
:func:`source` gives a chapter the live replay where a control plane of the right shape is up,
else the recorded one (:func:`courselib.live.recorded.live_or_recorded`).
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.io.workload import load_workload
from courselib.live import recorded as _recorded
from courselib.live.kube import extension
from courselib.live.kube import cluster as kube
from courselib.live.kube.cluster import KUBERNETES_VERSION
from courselib.live.kube.plan import plan_replay
from courselib.live.kube.queue import allowed_orders, first_tries, order_allowed
from courselib.live.kube.replay import NUDGE_AFTER, RealJob, ReplayResult, run_replay
from courselib.live.replays import (Agreement, Recorded, host, max_start_error, model_start_order,
                                    order_lines, order_pairs, read_replay, recorded_from)
from courselib.live.replays import record as _record
from courselib.model.topology import placement_domains
from courselib.model.workload import Workload
from courselib.units import format_duration as _fmt

#: The chapter replays live only when this is "1" (and a control plane of the right shape is up).
LIVE_ENV = "COURSELIB_LIVE"


@dataclass
class JobComparison:
    name: str
    real_complete: bool
    model_complete: bool
    real_bound_end: int
    model_bound_end: int
    real_start: float | None
    model_start: float | None
    round_robin_bound_end: int  # the model with its own round-robin assumption
    # Kueue: how often the job's Workload was evicted (PodsReadyTimeout); None: not compared
    real_evictions: int | None = None
    model_evictions: int | None = None
    # a workload with events: the job's restarts, how long each loss took to recover (s; None: it
    # never did), how it ended (FAILED's reason) — None: not compared
    real_restarts: int | None = None
    model_restarts: int | None = None
    real_back: tuple | None = None
    model_back: tuple | None = None
    real_failed: str | None = None
    model_failed: str | None = None
    # on a cluster with a topology: where its pods landed when it started, ((node, pods), ...) in
    # node order, and (a job waiting at the end in either run) its pending message in the words of
    # the scheduler (Kueue: the Workload's QuotaReserved condition); None: not compared
    real_placement: tuple | None = None
    model_placement: tuple | None = None
    placement_compared: bool = False
    real_landed: str = ""       # the same, as domains per level and nodes (for the table)
    model_landed: str = ""
    real_pending: str | None = None
    model_pending: str | None = None
    pending_compared: bool = False

    @property
    def placement_agrees(self) -> bool:
        return not self.placement_compared or self.real_placement == self.model_placement

    @property
    def pending_agrees(self) -> bool:
        return not self.pending_compared or self.real_pending == self.model_pending

    @property
    def losses_compared(self) -> bool:
        return self.real_restarts is not None and self.model_restarts is not None

    @property
    def restarts_agree(self) -> bool:
        return not self.losses_compared or (self.real_restarts == self.model_restarts
                                            and self.real_failed == self.model_failed)

    @property
    def recoveries_agree(self) -> bool:
        return not self.losses_compared or self.real_back == self.model_back

    @property
    def complete_agrees(self) -> bool:
        return self.real_complete == self.model_complete

    @property
    def evictions_compared(self) -> bool:
        return self.real_evictions is not None and self.model_evictions is not None

    @property
    def evictions_agree(self) -> bool:
        return not self.evictions_compared or self.real_evictions == self.model_evictions

    @property
    def bound_agrees(self) -> bool:
        return self.real_bound_end == self.model_bound_end


@dataclass
class TopologyCheck:
    """One check of a topology-aware PodGroup replay: what the real scheduler did and the set of
    things the model says it may do (a random tie: any member is right)."""
    job: str
    what: str        # "start", "placement", "pending message"
    real: str
    model: str
    ok: bool


@dataclass
class Comparison(Agreement):
    """Where the real kube-scheduler and courselib's policy agree, job by job."""
    policy: str
    real_deadlock: bool
    model_deadlock: bool
    round_robin_deadlock: bool
    max_start_error: float | None
    #: on a topology (kube-gang): each job's start, where it landed, why it waited
    topology: list = field(default_factory=list)
    #: kube-gang: the order of the PodGroups' first cycles the model was given, where it came from,
    #: and (the scheduler's log kept it) why the queue's rule would not allow it, "" if it does
    group_order: list = field(default_factory=list)
    group_order_from: str = ""
    queue_rule: str | None = None

    @property
    def checks(self) -> int:
        return 2 * len(self.jobs) + self.order_pairs + 1 + sum(j.evictions_compared for j in self.jobs) \
            + (self.queue_rule is not None) \
            + 2 * sum(j.losses_compared for j in self.jobs) + len(self.topology) \
            + sum(j.placement_compared for j in self.jobs) + sum(j.pending_compared for j in self.jobs)

    @property
    def agreed(self) -> int:
        return ((self.queue_rule == "") + sum(t.ok for t in self.topology)
                + sum(j.complete_agrees for j in self.jobs) + sum(j.bound_agrees for j in self.jobs)
                + self.order_agree + (self.real_deadlock == self.model_deadlock)
                + sum(j.evictions_compared and j.evictions_agree for j in self.jobs)
                + sum(j.losses_compared and j.restarts_agree for j in self.jobs)
                + sum(j.losses_compared and j.recoveries_agree for j in self.jobs)
                + sum(j.placement_compared and j.placement_agrees for j in self.jobs)
                + sum(j.pending_compared and j.pending_agrees for j in self.jobs))

    def to_dict(self) -> dict:
        d = super().to_dict()
        for row, j in zip(d["jobs"], self.jobs):
            row["complete_agrees"], row["bound_agrees"] = j.complete_agrees, j.bound_agrees
            if j.evictions_compared:
                row["evictions_agree"] = j.evictions_agree
            if j.losses_compared:
                row["restarts_agree"], row["recoveries_agree"] = j.restarts_agree, j.recoveries_agree
            if j.placement_compared:
                row["placement_agrees"] = j.placement_agrees
            if j.pending_compared:
                row["pending_agrees"] = j.pending_agrees
        return d


def real_nodes(rj) -> dict[int, int]:
    """``{"node9": 1}`` -> ``{8: 1}``: a real job's pods per node index (0-based, as the model's)."""
    return {int(name.removeprefix("node")) - 1: n for name, n in rj.nodes.items()}


def real_domains(workload: Workload, rj, level: str) -> list[str]:
    """The domains of ``level`` a real job's pods are in (the labels :func:`courselib.live.kube.topology.node_labels`
    gave its nodes)."""
    size = workload.cluster.level_size(level)
    return sorted({f"{level}{i // size}" for i in real_nodes(rj)}, key=lambda d: int(d[len(level):]))


def real_choices(workload: Workload, result) -> dict:
    """What the real run chose where kube-scheduler draws among equals, for the model to follow
    when its rule allows it: each job's nodes, and a topology job's domain."""
    nodes = {j.name: real_nodes(result.job(j.name)) for j in workload.jobs if result.job(j.name).nodes}
    domains = {}
    for j in workload.jobs:
        if j.topology and j.topology[0] == "required" and j.name in nodes:
            found = real_domains(workload, result.job(j.name), j.topology[1])
            domains[j.name] = found[0] if len(found) == 1 else ",".join(found)
    return {"nodes": nodes, "domains": domains}


_PLACEMENTS = re.compile(r"\d+/\d+ placements are available, first placement status: minCount \(\d+\) "
                         r"cannot be satisfied: \d+ scheduled, -?\d+ remaining")


def placement_message(text: str | None) -> str | None:
    """The placement search's words in a pod's condition or event (``0/D placements ...``)."""
    m = _PLACEMENTS.search(text or "")
    return m.group(0) if m else None


def topology_checks(workload: Workload, result, model, tolerance: float = 1.0) -> list[TopologyCheck]:
    """Per job: its start (the same virtual time), where it landed (a required job in one domain of
    its level, and that domain one of those the model's placement scores tie on — the scheduler's
    ``rand.Int()`` picks among them —; every job's nodes a placement the per-pod rule allows: most
    free GPUs, ties drawn), and a waiting job's placement message (one of the model's: the real
    scheduler words it after whichever placement Go's map order tried first)."""
    def t(x):
        return "-" if x is None else _fmt(x)
    out = []
    for job in workload.jobs:
        rj, mj = result.job(job.name), model.job(job.name)
        ch = mj.choices or {}
        same = (rj.start is None and mj.start is None) or (
            rj.start is not None and mj.start is not None and abs(rj.start - mj.start) <= tolerance)
        out.append(TopologyCheck(job.name, "start", t(rj.start), t(mj.start), same))
        if rj.start is not None and mj.start is not None:
            if job.topology and job.topology[0] == "required":
                level = job.topology[1]
                doms = real_domains(workload, rj, level)
                tied = ch.get("tied", [])
                kind = "forced" if len(tied) == 1 else f"tie of {len(tied)}, any"
                ok = len(doms) == 1 and doms[0] in tied and ch.get("followed", False)
                out.append(TopologyCheck(job.name, "placement", " ".join(doms),
                                         f"{' '.join(tied)} ({kind})", ok))
            elif "nodes_followed" in ch:
                out.append(TopologyCheck(job.name, "placement", f"{len(rj.nodes)} nodes",
                                         "most free GPUs first, ties drawn", ch["nodes_followed"]))
        # the pod's condition at the end, else what `kubectl describe` showed while it waited: the
        # pod's events (its own view: "0/16 nodes are available" inside the placement tried) and
        # the PodGroup's condition (the search: "0/D placements are available, ...")
        seen = (rj.describe or {}).get("events", []) + (rj.describe or {}).get("podgroup", [])
        real_msg = placement_message(rj.reason) or next(
            (m for e in seen if (m := placement_message(e.get("message")))), None)
        model_msgs = [m for m in (placement_message(x) for x in ch.get("messages", [])) if m]
        if real_msg or model_msgs:
            out.append(TopologyCheck(job.name, "pending message", real_msg or "-",
                                     " | ".join(model_msgs) or "-", real_msg in model_msgs))
    return out


def model_run(workload: Workload, policy: str, pod_order=None, preemption: bool = False,
              group_order=None, options=()):
    from courselib.sim.gang import simulate
    opts = dict(options)
    if policy == "kube-default":
        opts["preemption"] = preemption
        if pod_order is not None:
            opts["pod_order"] = tuple(pod_order)
    elif policy == "kube-gang" and group_order is not None:
        opts["group_order"] = tuple(group_order)
    return simulate(workload, policy, **opts)


def group_orders(result: ReplayResult) -> tuple[list[list[str]], str, str | None]:
    """kube-gang: the orders of the PodGroups' first cycles the model may be given, where they come
    from, and whether the queue's rule allows the real one (``None``: not known).

    The real scheduler's log names the order it tried them (``extra["podgroup_cycles"]``, kept
    since 2026-12-03): that one order, checked against the rule
    (:func:`courselib.live.kube.queue.order_allowed`; "" when it holds). A recording made before
    keeps only the pods' arrival order, from which the rule does not fix the order — the
    scheduler's pace decides between a group whose first pod came first and one whose quorum came
    first (:mod:`courselib.live.kube.queue`) — so every order the rule allows is a candidate."""
    wl = result.plan.workload
    cycles = (result.extra or {}).get("podgroup_cycles")
    if cycles:
        tried = first_tries(cycles)
        tried += [j.name for j in wl.jobs if j.name not in tried]
        why = order_allowed(wl, result.pod_order, result.batches, tried)
        return [tried], "the order the real scheduler tried the PodGroups (its log)", why or ""
    orders = allowed_orders(wl, result.pod_order, result.batches)
    return orders, (f"an order of the PodGroups its queue's rule allows ({len(orders)} allowed: the run "
                    "kept the pods' arrival order, not the scheduler's log)"), None


def compare(result: ReplayResult, *, name: str = "", tolerance: float = 1e-6,
            group_order: list[str] | None = None) -> Comparison:
    """Compare a real replay with the model on the same workload (given the real pod order).

    Checks, per job: whether it ever had all its pods placed (its barrier passed), and how many
    pods it held at the end; over pairs of jobs the model starts at different times, the start
    order; and the verdict (deadlock or not). kube-gang: the model is given the order the real
    scheduler tried the PodGroups, and that order is checked against its queue's rule; where the
    run did not keep it, the model is given each order the rule allows until one agrees
    (:func:`group_orders`). ``group_order``: give the model this order instead (what if it were
    the rule), unchecked.
    """
    if result.plan.policy != "kube-gang" or result.pod_order is None or result.batches is None:
        return _compare(result, name, tolerance, None)
    orders, origin, rule = group_orders(result) if group_order is None else \
        ([list(group_order)], "the order given", None)
    best = None
    for order in orders:
        c = _compare(result, name, tolerance, order)
        if best is None or c.agreed * best.checks > best.agreed * c.checks:
            best = c
        if c.agreement == 1.0:
            break
    best.group_order_from, best.queue_rule = origin, rule
    result.__dict__["_group_order"] = best.group_order
    result.__dict__.pop("_model_at", None)
    return best


def _compare(result: ReplayResult, name: str, tolerance: float, group_order) -> Comparison:
    result.__dict__["_group_order"] = group_order
    result.__dict__.pop("_model_at", None)
    plan = result.plan
    wl = plan.workload
    # what the real run drew where the model needs to be told (Kueue: its UID tie order)
    recorded = tuple((result.extra or {}).get("model_options", {}).items())
    topo = plan.policy == "kube-gang" and bool(wl.cluster.topology) and plan.shape.gang
    if topo:   # the real run's draws among equals, and the reference path (every retry's message)
        recorded += tuple(real_choices(wl, result).items()) + (("reference", True),)
    model = model_run(wl, plan.policy, result.pod_order, plan.preemption, group_order,
                      plan.options + recorded)
    rr = model_run(wl, plan.policy, None, plan.preemption, options=plan.options)
    rows = []
    for job in wl.jobs:
        rj, mj, rrj = result.job(job.name), model.job(job.name), rr.job(job.name)
        per = max(1, job.gpus_per_pod)
        evicted = result.extra.get("evictions") if result.extra else None
        rows.append(JobComparison(job.name, rj.start is not None, mj.start is not None,
                                  rj.bound_at_end, mj.gpus_held // per if job.gpus_per_pod else 0,
                                  rj.start, mj.start, rrj.gpus_held // per if job.gpus_per_pod else 0,
                                  None if evicted is None else evicted.get(job.name, 0),
                                  None if evicted is None else mj.evictions,
                                  **(losses(result, job, mj) if wl.events else {}),
                                  **(placements(result, job, mj) if wl.cluster.topology and
                                     (result.extra or {}).get("compare_placement") else {})))
    pairs, agree, bad = order_pairs(rows, tolerance)
    return Comparison(name, rows, result.start_order(), model_start_order(model), pairs, agree, bad,
                      policy=plan.policy, real_deadlock=result.deadlock, model_deadlock=model.deadlock,
                      round_robin_deadlock=rr.deadlock, max_start_error=max_start_error(rows, 3),
                      topology=topology_checks(wl, result, model) if topo else [],
                      group_order=list(group_order or []))


def losses(result, job, mj) -> dict:
    """What the real run and the model did with the job's lost pods: restarts, how long each
    recovery took (rounded to the second), and a failure's reason."""
    rj = result.job(job.name)
    js = ((result.extra or {}).get("jobsets") or {}).get(job.name)
    if js is not None:   # the JobSet controller's own count (status.restarts)
        restarts = js.get("restarts", 0)
        failed = (js.get("failed") or {}).get("reason")
    else:
        restarts = len(rj.losses)
        failed = None
    if failed is None and rj.state == "FAILED":
        failed = "BackoffLimitExceeded"

    def back(rows, ended):
        """Recoveries that took time (one done within a settle is not seen in virtual time), and
        not the last loss of a job that failed (it never recovered: its controller gave up)."""
        out = [None if b is None else round(b - a) for a, b, *_ in rows]
        if ended and out and out[-1] is None:
            out.pop()
        return tuple(x for x in out if x != 0)
    return {"real_restarts": restarts, "model_restarts": mj.restarts,
            "real_back": back(rj.losses, failed is not None), "model_back": back(mj.recoveries, mj.end_reason),
            "real_failed": failed, "model_failed": mj.end_reason}


def node_index(name: str) -> int | None:
    """``node5`` -> 4 (the fake nodes are ``node1 … nodeN``)."""
    m = re.fullmatch(r"node(\d+)", name)
    return int(m.group(1)) - 1 if m else None


def placements(result, job, mj) -> dict:
    """(Compared where an extension asks, ``extra["compare_placement"]``: Kueue's TAS assigns the
    very nodes.) Where the job's pods landed in each run, ``((node, pods), ...)``; and for a job
    that waited, its pending message the first time it waited (``extra["pending"]``: ``[t,
    message]``, Kueue's Workload condition) beside the model's reason at that virtual time (without
    its ``Pending: ``), or, for a job the model keeps waiting to the end, that reason."""
    rj = result.job(job.name)
    per = max(1, job.gpus_per_pod)
    real = tuple(sorted(rj.nodes.items(), key=lambda kv: node_index(kv[0]) or 0)) if rj.start is not None else None
    model = tuple((f"node{i + 1}", g // per) for i, g in mj.placement) if mj.placement else None
    spec = result.plan.workload.cluster
    out = {"real_placement": real, "model_placement": model, "placement_compared": True,
           "real_landed": landed(spec, real), "model_landed": landed(spec, model)}
    waits = (result.extra or {}).get("pending")
    if waits is not None and (job.name in waits or mj.start is None):
        if job.name in waits:       # the model's reason at the moment the real job first waited
            t, real = waits[job.name]
            at = model_at(result, t).job(job.name)
            why = at.pending_reason if at.start is None else None
        else:                       # the model's job waits to the end; the real one never did
            real, why = None, mj.pending_reason
        out.update(real_pending=real, model_pending=why.removeprefix("Pending: ") if why else None,
                   pending_compared=True)
    return out


def model_at(result, t: float):
    """The model given what the real run drew (:func:`compare`), stopped at virtual time ``t``
    (kept on the result: a workload's jobs often first wait at the same instant)."""
    runs = result.__dict__.setdefault("_model_at", {})
    if t not in runs:
        plan = result.plan
        recorded = tuple((result.extra or {}).get("model_options", {}).items())
        runs[t] = model_run(plan.workload, plan.policy, result.pod_order, plan.preemption,
                            result.__dict__.get("_group_order"), plan.options + recorded + (("horizon", t),))
    return runs[t]


def landed(spec, placement) -> str:
    """``rack1 | block2 block3 | node9 node10×2``: the domains per level, then the nodes."""
    if not placement:
        return "-"
    idx = [node_index(n) for n, _ in placement]
    doms = placement_domains(spec, [i for i in idx if i is not None])
    runs: list[list] = []           # consecutive nodes with as many pods each: node1-12
    for (name, k), i in zip(placement, idx):
        if runs and i is not None and runs[-1][1] is not None and runs[-1][1] + runs[-1][3] == i \
                and runs[-1][2] == k:
            runs[-1][3] += 1
        else:
            runs.append([name, i, k, 1])
    nodes = " ".join(name + (f"-{i + n}" if n > 1 else "") + (f"×{k}" if k != 1 else "")
                     for name, i, k, n in runs)
    return " | ".join([" ".join(v) for v in doms.values()] + [nodes])


def format_comparison(c: Comparison) -> str:
    def t(x):
        return "-" if x is None else _fmt(x)
    ext = extension.for_policy(c.policy)
    given = ext.model_given if ext is not None else c.group_order_from if c.policy == "kube-gang" \
        else "the pod order the real Job controller created"
    lines = [f"model: courselib {c.policy}, given {given}; in brackets, with its own assumption "
             "(round-robin pods, groups in workload order)",
             f"{'job':<12} {'complete: real':>14} {'model':>6}  {'pods bound at end: real':>23} "
             f"{'model':>6} {'(round-robin)':>13}  {'start: real':>11} {'model':>8}  agree"]
    evictions = any(r.evictions_compared for r in c.jobs)
    if evictions:
        lines[-1] = lines[-1].replace("  agree", "  evicted: real model  agree")
    for r in c.jobs:
        ok = r.complete_agrees and r.bound_agrees and r.evictions_agree
        ev = f"  {r.real_evictions:>13} {r.model_evictions:>5}" if r.evictions_compared else \
            ("  " + " " * 19 if evictions else "")
        lines.append(f"{r.name:<12} {'yes' if r.real_complete else 'no':>14} "
                     f"{'yes' if r.model_complete else 'no':>6}  {r.real_bound_end:>23} "
                     f"{r.model_bound_end:>6} {r.round_robin_bound_end:>13}  {t(r.real_start):>11} "
                     f"{t(r.model_start):>8}{ev}  {'yes' if ok else 'NO'}")
    for r in c.jobs:
        if r.losses_compared:
            lines.append(f"{r.name:<12} restarts: real {r.real_restarts} model {r.model_restarts}"
                         + (f", failed: real {r.real_failed} model {r.model_failed}"
                            if r.real_failed or r.model_failed else "")
                         + f"; back after (s): real {list(r.real_back)} model {list(r.model_back)}  "
                         f"{'yes' if r.restarts_agree and r.recoveries_agree else 'NO'}")
    placed = [r for r in c.jobs if r.placement_compared]
    if placed:
        lines.append("where each job's pods landed (domains per level | nodes×pods), real and model:")
        for r in placed:
            lines.append(f"{r.name:<12} real:  {r.real_landed}")
            lines.append(f"{'':<12} model: " + ("the same" if r.placement_agrees and r.real_placement
                                                 else r.model_landed)
                         + f"  {'yes' if r.placement_agrees else 'NO'}")
    for r in c.jobs:
        if r.pending_compared:
            lines.append(f"{r.name:<12} pending: real  {r.real_pending or '(started)'}")
            lines.append(f"{'':<12}          model {'the same' if r.pending_agrees else r.model_pending or '(started)'}"
                         f"  {'yes' if r.pending_agrees else 'NO'}")
    lines += order_lines(c.real_order, c.model_order, c.order_disagreements)
    if c.group_order:
        rule = {None: "", "": "  allowed by the queue's rule: yes"}.get(
            c.queue_rule, f"  allowed by the queue's rule: NO ({c.queue_rule})")
        lines.append(f"PodGroups tried in the order: {' '.join(c.group_order)}{rule}")
    lines.append(f"verdict      real: {'DEADLOCK' if c.real_deadlock else 'no deadlock'}; model: "
                 f"{'DEADLOCK' if c.model_deadlock else 'no deadlock'} (round-robin: "
                 f"{'DEADLOCK' if c.round_robin_deadlock else 'no deadlock'})")
    if c.topology:
        lines.append("topology-aware PodGroups (TopologyAwareWorkloadScheduling): where each job landed; "
                     "the real scheduler draws among equally scored domains (rand.Int) and nodes "
                     "(selectHost), so the model names the tied set and the check accepts any member, "
                     "then follows the real draw")
        for tc in c.topology:
            lines.append(f"  {tc.job:<12} {tc.what:<16} real: {tc.real:<24} model: {tc.model}  "
                         f"{'yes' if tc.ok else 'NO'}")
    lines.append(f"agreement: {c.agreed}/{c.checks} checks = {100 * c.agreement:.0f}% "
                 f"(complete {sum(r.complete_agrees for r in c.jobs)}/{len(c.jobs)}, bound at end "
                 f"{sum(r.bound_agrees for r in c.jobs)}/{len(c.jobs)}, order {c.order_agree}/{c.order_pairs}, "
                 f"verdict {int(c.real_deadlock == c.model_deadlock)}/1"
                 + (f", evictions {sum(r.evictions_agree for r in c.jobs if r.evictions_compared)}"
                    f"/{sum(r.evictions_compared for r in c.jobs)}" if evictions else "")
                 + (f", topology {sum(t.ok for t in c.topology)}/{len(c.topology)}" if c.topology else "")
                 + (f", queue rule {int(c.queue_rule == '')}/1" if c.queue_rule is not None else "")
                 + (f", placement {sum(r.placement_agrees for r in placed)}/{len(placed)}" if placed else "")
                 + (f", pending messages {sum(r.pending_agrees for r in c.jobs if r.pending_compared)}"
                    f"/{sum(r.pending_compared for r in c.jobs)}" if any(r.pending_compared for r in c.jobs)
                    else "") + ")")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- output

def replay_to_dict(result: ReplayResult) -> dict:
    plan = result.plan
    return {
        "shape": plan.shape.describe(),
        "policy": plan.policy,
        "versions": result.versions,
        "notes": list(plan.notes),
        "jobs": [{k: v for k, v in asdict(j).items() if k != "created_real"} for j in result.jobs],
        "start_order": result.start_order(),
        "deadlock": result.deadlock,
        "batches": result.batches,
        "pod_order": pod_runs(result.pod_order),
        "wall_seconds": result.wall_seconds,
        "settles": result.settles,
        **({"options": [list(kv) for kv in plan.options]} if plan.options else {}),
        **({"extra": result.extra} if result.extra else {}),
    }


def pod_runs(order: list[str]) -> list[list]:
    """``[a, a, b]`` -> ``[[a, 2], [b, 1]]`` (runs of one job's pods)."""
    out: list[list] = []
    for name in order:
        if out and out[-1][0] == name:
            out[-1][1] += 1
        else:
            out.append([name, 1])
    return out


def expand_runs(runs: list[list]) -> list[str]:
    return [name for name, n in runs for _ in range(n)]


def format_replay(result: ReplayResult) -> str:
    plan = result.plan
    lines = [f"Kubernetes {result.versions.get('kubernetes', KUBERNETES_VERSION)} (real kube-apiserver, "
             f"kube-scheduler, kube-controller-manager), {plan.shape.describe()}"]
    lines += [f"note: {n}" for n in plan.notes]
    runs = pod_runs(result.pod_order)
    if len(runs) > 1:
        head = ", ".join(f"{n}×{k}" for n, k in runs[:8])
        lines.append(f"pod creation order (Job controller): {head}{', ...' if len(runs) > 8 else ''} "
                     f"({len(runs)} runs)")
    lines.append(f"{'job':<12} {'pods':>5} {'submit':>8} {'start':>8} {'end':>8} {'bound max':>9} "
                 f"{'bound at end':>12}  {'state':<10} nodes")
    for rj in result.jobs:
        def t(x):
            return "-" if x is None else _fmt(x)
        nodes = ", ".join(f"{n}:{k}" for n, k in list(rj.nodes.items())[:4]) + \
            (f", ... ({len(rj.nodes)} nodes)" if len(rj.nodes) > 4 else "")
        lines.append(f"{rj.name:<12} {rj.pods:>5} {t(rj.submitted):>8} {t(rj.start):>8} {t(rj.end):>8} "
                     f"{rj.bound_max:>9} {rj.bound_at_end:>12}  {rj.state:<10} {nodes or '-'}")
        if rj.reason and rj.start is None:
            lines.append(f"{'':<12} pending pods: {rj.reason[:110]}")
    nudged = [f"{rj.name} ({rj.nudges}x)" for rj in result.jobs if rj.nudges]
    if nudged:
        lines.append(f"note: the Job controller created no pod for {NUDGE_AFTER:g} s; the replay touched "
                     f"these Jobs so it would sync them: {', '.join(nudged)}")
    lines.append(f"start order: {' '.join(result.start_order()) or '-'}")
    if result.deadlock:
        held = sum(rj.bound_at_end for rj in result.jobs if rj.start is None)
        lines.append(f"DEADLOCK: {held} pods of incomplete gangs hold their GPUs and nothing can "
                     "change")
    lines.append(f"({result.settles} settles, {result.wall_seconds:g} s of real time)")
    return "\n".join(lines)


def format_describe(result: "ReplayResult") -> str:
    """The waiting jobs as `kubectl describe pod` / `describe podgroup` would show them."""
    lines = []
    for rj in result.jobs:
        d = rj.describe
        if not d:
            continue
        lines.append(f"{rj.name}: waiting at t={_fmt(d['t'])}; pod {d['pod']}")
        for e in d["events"]:
            lines.append(f"  Events:   {e['type']:<8} {e['reason']:<17} {e['from'] or '':<18} {e['message']}")
        for c in d["podgroup"]:
            lines.append(f"  PodGroup {rj.name}: {c['type']}={c['status']} ({c['reason']}): {c['message']}")
    return "\n".join(lines) if lines else "(no job waited)"


RECORDED_BY = "courselib kube replay --record"


def record(result: ReplayResult, path, *, workload_text: str, workload_file: str) -> Path:
    """Write a replay as JSON (the chapter's recorded run). Only overwrites files it wrote itself."""
    v = result.versions
    joined = "".join(f", {ext.title} {result.extra[ext.name]}" for ext in map(extension.get, result.plan.shape.with_)
                     if ext.name in result.extra)
    return _record(path, recorded_by=RECORDED_BY,
                   recorded_on=f"{host()}, Kubernetes "
                               f"{v.get('kubernetes')}, etcd {v.get('etcd')}{joined}",
                   recorded_at=result.recorded_at, workload_text=workload_text,
                   workload_file=workload_file, preemption=result.plan.preemption,
                   replay=replay_to_dict(result))


def load_recorded(name_or_path) -> Recorded:
    """A recorded replay: ``seed-600`` (shipped as ``courselib/data/recorded/kube-seed-600.json``)
    or a path."""
    data, workload = read_replay(name_or_path, "kube-")
    rep = data["replay"]
    plan = plan_replay(workload, policy=rep["policy"], preemption=data.get("preemption", False),
                       options={k: v for k, v in rep.get("options", [])})
    jobs = [RealJob(**{**j, "timeline": [tuple(x) for x in j["timeline"]]}) for j in rep["jobs"]]
    return recorded_from(data, ReplayResult(plan, jobs, expand_runs(rep["pod_order"]), rep["batches"],
                                            rep["wall_seconds"], rep["settles"], rep["deadlock"],
                                            rep["versions"], data["recorded_at"], rep.get("extra", {})))


def source(name: str, workload_path, *, gang: bool = False, policy: str | None = None,
           options: dict | None = None) -> _recorded.Source[ReplayResult]:
    """Replay ``workload_path`` on the local control plane if one of the right shape is up (and
    ``COURSELIB_LIVE=1``: a replay this size takes minutes), else the recorded run ``name``
    (:func:`courselib.live.recorded.live_or_recorded`)."""
    plan = plan_replay(load_workload(workload_path), gang=gang,
                       policy=policy or ("kube-gang" if gang else "kube-default"), options=options)
    up: list = []

    def unavailable() -> str | None:
        if os.environ.get(LIVE_ENV) != "1":
            return (f"{LIVE_ENV} is not 1 (a replay this size takes minutes; with `courselib kube up "
                    f"{plan.shape.cli_args()}` running, set {LIVE_ENV}=1 to run it live)")
        why = kube.unavailable_reason()
        if why is not None:
            return why
        cp = kube.running()
        if cp is not None and cp.shape.same_nodes(plan.shape) and \
                set(plan.shape.with_) <= set(cp.shape.with_):
            up.append(cp)
            return None
        return (f"no local control plane of this shape is up (`courselib kube up "
                f"{plan.shape.cli_args()}` starts one)")
    return _recorded.Source(lambda: run_replay(up[0], plan), lambda: load_recorded(name).recording(),
                            unavailable)
