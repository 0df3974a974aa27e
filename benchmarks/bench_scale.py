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

POLICIES = ("kube-default", "volcano", "kueue", "slurm")
FULL_GRID = [(n, j) for j in (1_000, 10_000, 100_000) for n in (100, 1_000, 6_250)]
QUICK_GRID = [(n, 1_000) for n in (100, 1_000, 6_250)] + [(1_000, 10_000), (6_250, 10_000)]
FULL_CAP_S, QUICK_CAP_S = 90.0, 25.0
SEED = 12


def cell(policy: str, nodes: int, jobs: int, seed: int = SEED) -> dict:
    """Simulate one cell in this process; returns its timings and this process's peak RSS."""
    from courselib.model.generate import scale_workload
    from courselib.sim.gang import simulate
    w = scale_workload(seed, nodes=nodes, jobs=jobs)
    wall, cpu = time.perf_counter(), time.process_time()
    r = simulate(w, policy)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"policy": policy, "nodes": nodes, "jobs": jobs, "seconds": wall, "cpu_seconds": cpu,
            "us_per_job": wall / jobs * 1e6, "peak_mib": peak_kib / 1024,
            "completed": sum(j.end is not None for j in r.jobs), "deadlock": r.deadlock,
            "trace_events": len(r.trace), "utilisation": r.utilisation, "capped": False}


def _cell_in_subprocess(policy: str, nodes: int, jobs: int, cap_s: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", policy, str(nodes), str(jobs)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=cap_s, check=True)
    except subprocess.TimeoutExpired:
        return {"policy": policy, "nodes": nodes, "jobs": jobs, "seconds": None, "cpu_seconds": None,
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
             f"{'policy':13} {'nodes':>6} {'GPUs':>6} {'jobs':>7} {'wall s':>8} {'CPU s':>8} "
             f"{'us/job':>8} {'peak MiB':>9} {'done':>7}  note"]
    for r in rows:
        if r["capped"] or r.get("skipped"):
            lines.append(f"{r['policy']:13} {r['nodes']:>6} {r['nodes'] * 8:>6} {r['jobs']:>7} "
                         f"{'-':>8} {'-':>8} {'-':>8} {'-':>9} {'-':>7}  {r['note']}")
            continue
        note = "DEADLOCK" if r["deadlock"] else ""
        lines.append(f"{r['policy']:13} {r['nodes']:>6} {r['nodes'] * 8:>6} {r['jobs']:>7} "
                     f"{r['seconds']:8.2f} {r['cpu_seconds']:8.2f} {r['us_per_job']:8.0f} "
                     f"{r['peak_mib']:9.0f} {r['completed']:>7}  {note}")
    lines.append("growth exponents, d log(time) / d log(size) (0 = flat, 1 = linear):")
    for policy in dict.fromkeys(r["policy"] for r in rows):
        ok = [r for r in rows if r["policy"] == policy and r.get("us_per_job")]
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


def run(quick: bool = False, policies=POLICIES) -> dict:
    """Run the grid (a smaller one with ``quick``, under about a minute) and return the figures."""
    grid, cap = (QUICK_GRID, QUICK_CAP_S) if quick else (FULL_GRID, FULL_CAP_S)
    load = os.getloadavg()[0]
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
               f"{load:.1f} at start (shared machine: absolute seconds are this machine's, now)")
    rows, capped = [], set()
    for nodes, jobs in grid:
        for policy in policies:
            if any(p == policy and n == nodes and j <= jobs for p, n, j in capped):
                rows.append({"policy": policy, "nodes": nodes, "jobs": jobs, "capped": False, "skipped": True,
                             "seconds": None, "us_per_job": None, "peak_mib": None,
                             "note": "not run: fewer jobs on this cluster were capped"})
                continue
            row = _cell_in_subprocess(policy, nodes, jobs, cap)
            rows.append(row)
            if row["capped"]:
                capped.add((policy, nodes, jobs))
    v100k = next((r for r in rows if r["policy"] == "volcano" and r["nodes"] == 6_250
                  and r["jobs"] == 100_000 and r.get("seconds")), None)
    return {"volcano_100k_jobs_s": v100k["seconds"] if v100k else None,
            "volcano_100k_cpu_s": v100k["cpu_seconds"] if v100k else None,
            "volcano_100k_peak_mib": v100k["peak_mib"] if v100k else None,
            "rows": rows, "machine": machine, "quick": quick, "table": table(rows, machine)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the small grid (about a minute)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--cell", nargs=3, metavar=("POLICY", "NODES", "JOBS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        policy, nodes, jobs = args.cell
        print(json.dumps(cell(policy, int(nodes), int(jobs))))
        return
    out = run(quick=args.quick, policies=tuple(args.policies.split(",")))
    print(out["table"])
    if args.json:
        print(json.dumps({k: v for k, v in out.items() if k != "table"}, indent=1))


if __name__ == "__main__":
    main()
