"""Shared by the gang-scheduler suites: an upstream test's cluster and jobs -> one session's outcome.

Jobs upstream already admitted or Running are submitted at t=0 (and placed or admitted then);
the jobs under test arrive at t=1 s, and only what the scheduler does at t=1 is read back, from
the simulator's own trace.
"""
from __future__ import annotations

import re

from courselib.model.workload import ClusterSpec, Job, Queue, Workload
from courselib.sim.gang import simulate

_BOUND = re.compile(r"bound (\d+) pods?:")


def workload(inp: dict) -> Workload:
    def job(j: dict, submit: float) -> Job:
        return Job(j["name"], j["pods"], j["gpus_per_pod"], submit=submit, duration=86400.0,
                   min_member=j.get("min_member"), priority=j.get("priority", 0),
                   queue=j.get("queue", "default"))
    c = inp["cluster"]
    jobs = [job(j, 0.0) for j in inp.get("running", [])] + [job(j, 1.0) for j in inp["jobs"]]
    return Workload(ClusterSpec(c["nodes"], c["gpus_per_node"]), jobs,
                    [Queue(**q) for q in inp.get("queues", [])])


def session(inp: dict, policy: str) -> dict:
    """What the scheduler did at t=1: pods bound per job, PodGroups enqueued, workloads admitted,
    and every job's pending reason, from both engines (they must agree)."""
    w = workload(inp)
    results = [simulate(w, policy, horizon=1.0, reference=ref, **inp.get("options", {}))
               for ref in (False, True)]
    assert results[0].trace == results[1].trace
    trace = [e for e in results[0].trace if e.time == 1.0]
    binds: dict[str, int] = {}
    for e in trace:
        m = _BOUND.match(e.what)
        if m:
            binds[e.job] = binds.get(e.job, 0) + int(m.group(1))
    reasons = {j.name: j.pending_reason for j in results[0].jobs}
    before = [e for e in results[0].trace if e.time == 0.0]
    return {"binds": binds,
            "admitted_before": [e.job for e in before if e.what.startswith("admitted")],
            "bound_before": sorted({e.job for e in before if _BOUND.match(e.what)}),
            "inqueue": [e.job for e in trace if e.what.startswith("PodGroup Inqueue")],
            "admitted": [e.job for e in trace if e.what.startswith("admitted")],
            "reasons": reasons}
