"""The same workloads under every policy: the evidence table behind the course's last chapter."""
from __future__ import annotations

from dataclasses import dataclass

from courselib.model.workload import Workload
from courselib.sim.gang import simulate

POLICIES = ("kube-default", "volcano", "kueue", "slurm")


@dataclass(frozen=True)
class Row:
    """One policy on one workload, reduced to what a platform team compares."""

    workload: str
    policy: str
    deadlock: bool
    completed: int
    jobs: int
    wasted_gpu_hours: float
    utilisation: float
    mean_wait_h: float | None
    max_wait_h: float | None          # the worst wait: who starves
    largest_job_wait_h: float | None  # the wait of the job that asks for the most GPUs
    mean_jct_h: float | None          # job completion time: submit to end


def compare(workloads: dict[str, Workload], policies=POLICIES, *, horizon: float | None = None) -> list[Row]:
    """Run every workload under every policy (deterministic) and reduce each run to a :class:`Row`."""
    rows = []
    for wname, w in workloads.items():
        largest = max(w.jobs, key=lambda j: (j.gpus, -j.submit)).name
        for policy in policies:
            r = simulate(w, policy, horizon=horizon)
            waits = [(j.start - j.submit) / 3600 for j in r.jobs if j.start is not None]
            big = r.job(largest)
            rows.append(Row(
                workload=wname, policy=policy, deadlock=r.deadlock,
                completed=sum(1 for j in r.jobs if j.state == "COMPLETED"), jobs=len(r.jobs),
                wasted_gpu_hours=r.wasted_gpu_hours, utilisation=r.utilisation,
                mean_wait_h=sum(waits) / len(waits) if waits else None,
                max_wait_h=max(waits) if waits and len(waits) == len(r.jobs) else None,
                largest_job_wait_h=None if big.start is None else (big.start - big.submit) / 3600,
                mean_jct_h=None if r.mean_jct is None else r.mean_jct / 3600))
    return rows


def summarise(rows: list[Row]) -> dict[str, dict]:
    """Per policy, over all workloads: deadlocks, total wasted GPU-hours, mean of mean waits, worst wait."""
    out: dict[str, dict] = {}
    for policy in dict.fromkeys(r.policy for r in rows):
        mine = [r for r in rows if r.policy == policy]
        waits = [r.mean_wait_h for r in mine if r.mean_wait_h is not None]
        worst = [r.max_wait_h for r in mine if r.max_wait_h is not None]
        out[policy] = {
            "deadlocks": sum(r.deadlock for r in mine),
            "runs": len(mine),
            "wasted_gpu_hours": sum(r.wasted_gpu_hours for r in mine),
            "mean_wait_h": sum(waits) / len(waits) if waits else None,
            "worst_wait_h": max(worst) if worst else None,
            "unfinished": sum(r.jobs - r.completed for r in mine),
        }
    return out
