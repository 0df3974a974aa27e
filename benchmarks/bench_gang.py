"""How much the mini gang scheduler costs over the floor: a bare ``heapq`` replay of the same events.

Run: ``.venv/bin/python benchmarks/bench_gang.py [--jobs 300] [--nodes 200]``. Prints, per policy,
the simulator's time over the time of a heapq loop that pushes and pops the same arrivals and
completions (the floor any event-driven simulator pays), as a ratio measured in one run. The
workload is random but seeded (``--seed``), so every run simulates the same thing.
"""
from __future__ import annotations

import argparse
import heapq
import random
import time

from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.sim.gang import simulate


def random_workload(jobs: int, nodes: int, seed: int) -> Workload:
    rng = random.Random(seed)
    out, t = [], 0.0
    for k in range(jobs):
        t += rng.expovariate(1 / 120)
        gpp = rng.choice([1, 2, 4, 8])
        pods = rng.choice([1, 2, 4, 8, 16, 32, 64])
        out.append(Job(f"j{k}", pods, gpp, submit=round(t), duration=float(rng.choice([600, 1800, 3600, 7200])),
                       priority=rng.randint(0, 3)))
    return Workload(ClusterSpec(nodes, 8), out)


def heapq_replay(result) -> float:
    """Seconds to replay the run's arrivals and ends through a bare heap (the floor)."""
    t0 = time.perf_counter()
    heap = []
    for j in result.jobs:
        heapq.heappush(heap, (j.submit, 0, j.name))
        if j.end is not None:
            heapq.heappush(heap, (j.end, 1, j.name))
    n = 0
    while heap:
        heapq.heappop(heap)
        n += 1
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policies", default="kube-default,volcano,kueue,slurm")
    args = ap.parse_args()
    w = random_workload(args.jobs, args.nodes, args.seed)
    print(f"ARG --jobs {args.jobs} --nodes {args.nodes} --seed {args.seed}")
    for policy in args.policies.split(","):
        t0 = time.perf_counter()
        r = simulate(w, policy)
        sim_s = time.perf_counter() - t0
        floor = heapq_replay(r)
        done = sum(1 for j in r.jobs if j.end is not None)
        print(f"{policy:13} {sim_s:8.3f} s  ratio to heapq replay {sim_s / max(floor, 1e-9):9.0f}x  "
              f"({done}/{len(r.jobs)} jobs done, {len(r.trace)} trace events)")


if __name__ == "__main__":
    main()
