"""The gang simulator at cluster scale: time per job and peak memory, 100 to 6,250 nodes x 8 GPUs,
1,000 to 100,000 jobs of 1 to 4,096 GPUs, under all four policies (issue 12, item 3).

Run: ``.venv/bin/python benchmarks/bench_scale.py [--quick] [--json]``; ``make bench`` calls
:func:`run`. Every cell runs in its own subprocess (a fresh interpreter), so its peak resident
memory (``ru_maxrss``, the whole process: interpreter, numpy, simpy, workload and result) is its
own and one cell's garbage cannot slow the next. The workload is ``scale_workload`` (seeded:
every run simulates the same jobs); only ``simulate`` is timed, in wall and CPU seconds.

The shape is the result: at a fixed number of jobs, µs per job should stay roughly flat from 100
to 6,250 nodes (placement looks at free-GPU buckets, never at every node), and total time should
grow about linearly with jobs. The exponents ``d log(time) / d log(size)`` are printed under
the table. Absolute seconds belong to the machine they were measured on (printed with them).
A cell that runs longer than its cap is killed and reported as capped, and bigger cells of that
policy are not attempted: nothing is extrapolated.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

POLICIES = ("kube-default", "volcano", "kueue", "slurm", "kube-gang")
FULL_GRID = [(n, j) for j in (1_000, 10_000, 100_000) for n in (100, 1_000, 6_250)]
QUICK_GRID = [(n, 1_000) for n in (100, 1_000, 6_250)] + [(1_000, 10_000), (6_250, 10_000)]
FULL_CAP_S, QUICK_CAP_S = 90.0, 25.0
#: the overloaded cluster beside the friendly one: 75 nodes, jobs of growing size, most waiting
OVERLOADED_GRID = [(75, 10_000), (75, 100_000)]
OVERLOADED_QUICK = [(75, 1_000)]
#: the same on a three-level tree (issue 29): spine 1,250 / rack 50 / block 10 nodes on 6,250 nodes,
#: rack 25 / block 5 on the overloaded 75; multi-node jobs required (30 %) or preferred (40 %) at
#: the smallest level that holds them, under every topology-aware policy
TOPOLOGY_POLICIES = ("kueue", "slurm", "volcano", "kube-gang")
TOPOLOGY_GRID = [(6_250, 100_000, "topology"), (75, 10_000, "topology-overloaded"),
                 (75, 100_000, "topology-overloaded")]
TOPOLOGY_QUICK = [(6_250, 10_000, "topology"), (75, 1_000, "topology-overloaded")]
SEED = 12


def cell(policy: str, nodes: int, jobs: int, seed: int = SEED, kind: str = "friendly") -> dict:
    """Simulate one cell in this process; returns its timings and this process's peak RSS."""
    from courselib.model.generate import (OVERLOADED_TOPOLOGY, overloaded_workload, scale_workload,
                                          topology_workload, with_topology)
    from courselib.sim.gang import simulate
    if kind == "topology":
        w = topology_workload(seed, nodes=nodes, jobs=jobs)
    elif kind == "topology-overloaded":
        w = with_topology(overloaded_workload(seed, nodes=nodes, jobs=jobs), OVERLOADED_TOPOLOGY, seed)
    else:
        w = (overloaded_workload(seed, nodes=nodes, jobs=jobs) if kind == "overloaded"
             else scale_workload(seed, nodes=nodes, jobs=jobs))
    wall, cpu = time.perf_counter(), time.process_time()
    r = simulate(w, policy)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    floor = heapq_floor(r)
    return {"policy": policy, "kind": kind, "nodes": nodes, "jobs": jobs, "seconds": wall, "cpu_seconds": cpu,
            "floor_s": floor, "floor_ratio": wall / floor if floor else None,
            "us_per_job": wall / jobs * 1e6, "peak_mib": peak_kib / 1024,
            "completed": sum(j.end is not None for j in r.jobs), "deadlock": r.deadlock,
            "trace_events": len(r.trace), "utilisation": r.utilisation, "capped": False}


def heapq_floor(result) -> float:
    """Seconds a bare heap takes to push and pop the run's arrivals and ends (the floor)."""
    import heapq
    t0 = time.perf_counter()
    heap: list = []
    for j in result.jobs:
        heapq.heappush(heap, (j.submit, 0, j.name))
        if j.end is not None:
            heapq.heappush(heap, (j.end, 1, j.name))
    while heap:
        heapq.heappop(heap)
    return time.perf_counter() - t0


def _cell_in_subprocess(policy: str, nodes: int, jobs: int, cap_s: float, kind: str = "friendly") -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", policy, str(nodes), str(jobs), kind]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=cap_s, check=True)
    except subprocess.TimeoutExpired:
        return {"policy": policy, "kind": kind, "nodes": nodes, "jobs": jobs, "seconds": None, "cpu_seconds": None,
                "us_per_job": None, "peak_mib": None, "capped": True, "note": f"capped: > {cap_s:g} s"}
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"cell {policy} {nodes}x{jobs} failed:\n{e.stderr[-2000:]}") from e
    return json.loads(out.stdout.strip().splitlines()[-1])


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) over log(x): the exponent of the growth."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x and y]
    if len(pts) < 2:
        return None
    mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None


def table(rows: list[dict], machine: str) -> str:
    lines = [f"Gang simulator at scale ({machine}); seconds of simulate() only, wall and CPU "
             "(wall above CPU: the process waited for a core); peak = the cell's whole process (ru_maxrss)",
             f"{'policy':13} {'cluster':>19} {'nodes':>6} {'GPUs':>6} {'jobs':>7} {'wall s':>8} {'CPU s':>8} "
             f"{'us/job':>8} {'x floor':>8} {'peak MiB':>9} {'done':>7}  note"]
    for r in rows:
        if r["capped"] or r.get("skipped"):
            lines.append(f"{r['policy']:13} {r.get('kind', 'friendly'):>19} {r['nodes']:>6} {r['nodes'] * 8:>6} "
                         f"{r['jobs']:>7} {'-':>8} {'-':>8} {'-':>8} {'-':>8} {'-':>9} {'-':>7}  {r['note']}")
            continue
        note = "DEADLOCK" if r["deadlock"] else ""
        ratio = f"{r['floor_ratio']:8.0f}" if r.get("floor_ratio") else f"{'-':>8}"
        lines.append(f"{r['policy']:13} {r.get('kind', 'friendly'):>19} {r['nodes']:>6} {r['nodes'] * 8:>6} "
                     f"{r['jobs']:>7} {r['seconds']:8.2f} {r['cpu_seconds']:8.2f} {r['us_per_job']:8.0f} "
                     f"{ratio} {r['peak_mib']:9.0f} {r['completed']:>7}  {note}")
    lines.append("growth exponents, d log(time) / d log(size) (0 = flat, 1 = linear):")
    for policy in dict.fromkeys(r["policy"] for r in rows):
        ok = [r for r in rows if r["policy"] == policy and r.get("us_per_job") and r.get("kind") == "friendly"]
        parts = []
        for jobs in sorted({r["jobs"] for r in ok}):
            s = _slope([(r["nodes"], r["us_per_job"]) for r in ok if r["jobs"] == jobs])
            if s is not None:
                parts.append(f"us/job vs nodes at {jobs} jobs {s:+.2f}")
        for nodes in sorted({r["nodes"] for r in ok}):
            s = _slope([(r["jobs"], r["seconds"]) for r in ok if r["nodes"] == nodes])
            if s is not None:
                parts.append(f"seconds vs jobs at {nodes} nodes {s:+.2f}")
        lines.append(f"  {policy:13} " + ("; ".join(parts) or "(too few cells)"))
    return "\n".join(lines)


WARM_CODE = ("import time; t = time.perf_counter(); "
             "from courselib.model.policies import slurm_kernel; from courselib.model import replay_kernel; "
             "slurm_kernel.warm(); replay_kernel.warm(); print(time.perf_counter() - t)")


def warm_compiled(cap_s: float = 300.0) -> str:
    """Build the compiled passes into numba's cache before any cell is timed, in a subprocess of
    its own, and say how long that took. A cell's process then loads them (about half a second,
    in its time, as a user's run does); without this the first cell to use them would also pay
    the compile (about 10 s the first time on a machine, or after their source changed), which is
    once per machine, not a cost of that cell. Empty where numba is not installed."""
    from courselib.model.compiled import available
    if not available():
        return ""
    try:
        out = subprocess.run([sys.executable, "-c", WARM_CODE], capture_output=True, text=True, timeout=cap_s,
                             check=True)
        return f"compiled passes ready in {float(out.stdout.strip()):.1f} s (numba's cache: once per machine)"
    except (subprocess.SubprocessError, ValueError) as e:
        return f"compiled passes not built ({type(e).__name__}): the first cell pays the compile"


def run(quick: bool = False, policies=POLICIES) -> dict:
    """Run the grid (a smaller one with ``quick``, under about a minute) and return the figures."""
    grid, cap = (QUICK_GRID, QUICK_CAP_S) if quick else (FULL_GRID, FULL_CAP_S)
    warm = warm_compiled()
    load = os.getloadavg()[0]
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
               f"{load:.1f} at start (shared machine: absolute seconds are this machine's, now)"
               + (f"; {warm}" if warm else ""))
    rows, capped = [], set()
    cells = [(n, j, "friendly") for n, j in grid] + \
        [(n, j, "overloaded") for n, j in (OVERLOADED_QUICK if quick else OVERLOADED_GRID)] + \
        (TOPOLOGY_QUICK if quick else TOPOLOGY_GRID)
    for nodes, jobs, kind in cells:
        for policy in policies:
            if kind.startswith("topology") and policy not in TOPOLOGY_POLICIES:
                continue
            if any(p == policy and n == nodes and j <= jobs and k == kind for p, n, j, k in capped):
                rows.append({"policy": policy, "kind": kind, "nodes": nodes, "jobs": jobs, "capped": False,
                             "skipped": True, "seconds": None, "us_per_job": None, "peak_mib": None,
                             "note": "not run: fewer jobs on this cluster were capped"})
                continue
            row = _cell_in_subprocess(policy, nodes, jobs, cap, kind)
            rows.append(row)
            if row["capped"]:
                capped.add((policy, nodes, jobs, kind))
    v100k = next((r for r in rows if r["policy"] == "volcano" and r.get("kind") == "friendly" and r["nodes"] == 6_250
                  and r["jobs"] == 100_000 and r.get("seconds")), None)
    at_100k = {r["policy"]: r for r in rows if r.get("kind") == "friendly" and r["nodes"] == 6_250
               and r["jobs"] == 100_000}
    met = {p: bool(r.get("seconds") is not None and r["seconds"] <= 30 and r["peak_mib"] <= 1024)
           for p, r in at_100k.items()}
    topo = {r["policy"]: r for r in rows if r.get("kind") == "topology" and r["nodes"] == 6_250
            and r["jobs"] == 100_000}
    topo_met = {p: bool(r.get("seconds") is not None and r["seconds"] <= 30 and r["peak_mib"] <= 1024)
                for p, r in topo.items()}
    return {"every_policy_100k_met": all(met.values()) if met else None, "policy_100k_met": met,
            "topology_100k_met": topo_met,
            "topology_100k_floor_ratio": {p: r.get("floor_ratio") for p, r in topo.items()},
            "volcano_100k_jobs_s": v100k["seconds"] if v100k else None,
            "volcano_100k_cpu_s": v100k["cpu_seconds"] if v100k else None,
            "volcano_100k_peak_mib": v100k["peak_mib"] if v100k else None,
            "rows": rows, "machine": machine, "quick": quick, "table": table(rows, machine)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the small grid (about a minute)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--cell", nargs=4, metavar=("POLICY", "NODES", "JOBS", "KIND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        policy, nodes, jobs, kind = args.cell
        print(json.dumps(cell(policy, int(nodes), int(jobs), kind=kind)))
        return
    out = run(quick=args.quick, policies=tuple(args.policies.split(",")))
    print(out["table"])
    if args.json:
        print(json.dumps({k: v for k, v in out.items() if k != "table"}, indent=1))


if __name__ == "__main__":
    main()
