"""The gang policies on a busy cluster (issue 35): a long queue of jobs that fit, swept one axis at a time.

Run: ``.venv/bin/python benchmarks/bench_busy.py [--full] [--json]``; ``make bench`` calls :func:`run`
(``BENCH_BUSY_FULL=1 make bench`` for the full sweep). The workloads are
``courselib.model.generate.busy_workload`` (seeded): the issue's case (10,000 jobs on 75 nodes x 8 GPUs,
every job fits, sizes up to three quarters of the cluster, an arrival about every second, about ten
minutes of runtime) and the sweep ``BUSY_SWEEP`` around it (job-size distribution, arrival rate,
runtime distribution, share of jobs that can never fit, cluster size), and the base cell on a
two-level topology (``TOPOLOGY_CELL``, topology-aware policies only). Every policy runs every cell,
each in its own subprocess (its own peak RSS), capped; the short default runs every cell with 1,000
jobs, the full sweep with 10,000 (the target: at most 10 s each, under every policy). Each row is
also a ratio over the heapq floor of its own run (``bench_scale.heapq_floor``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import POLICIES, TOPOLOGY_POLICIES, heapq_floor, warm_compiled  # noqa: E402

SEED = 35
SHORT_JOBS, FULL_JOBS = 1_000, 10_000
SHORT_CAP_S, FULL_CAP_S = 30.0, 60.0
TARGET_S = 10.0          # any cell of 10,000 jobs on 75 nodes, every policy


def full_requested(env=None) -> bool:
    """``BENCH_BUSY_FULL`` set to anything but empty/0: the full sweep."""
    return (env if env is not None else os.environ).get("BENCH_BUSY_FULL", "") not in ("", "0")


def cells() -> list[str]:
    from courselib.model.generate import BUSY_SWEEP
    return [name for name, _ in BUSY_SWEEP]


#: the sweep's ``base`` cell on the topology of the overloaded benchmark (racks of 25 and blocks of 5
#: of the 75 nodes; multi-node jobs ask for the smallest level that holds them, 30 % required and
#: 40 % preferred: ``with_topology``), under the topology-aware policies only (issue 35: "the same
#: with the topology of the topology issue")
TOPOLOGY_CELL = "base+topology"


def workload(name: str, seed: int, jobs: int):
    """The sweep cell ``name`` (or :data:`TOPOLOGY_CELL`) with ``jobs`` jobs."""
    from courselib.model.generate import OVERLOADED_TOPOLOGY, busy_sweep_cell, with_topology
    if name == TOPOLOGY_CELL:
        return with_topology(busy_sweep_cell("base", seed, jobs), OVERLOADED_TOPOLOGY, seed)
    return busy_sweep_cell(name, seed, jobs)


def cell(policy: str, name: str, jobs: int, seed: int = SEED) -> dict:
    """Simulate one sweep cell in this process; its timings, the floor and this process's peak RSS."""
    from courselib.sim.gang import simulate
    w = workload(name, seed, jobs)
    wall, cpu = time.perf_counter(), time.process_time()
    r = simulate(w, policy)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    floor = heapq_floor(r)
    return {"policy": policy, "cell": name, "nodes": w.cluster.nodes, "jobs": jobs, "seconds": wall,
            "cpu_seconds": cpu, "floor_s": floor, "floor_ratio": wall / floor if floor else None,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "completed": sum(j.end is not None for j in r.jobs), "deadlock": r.deadlock, "capped": False}


def _cell_in_subprocess(policy: str, name: str, jobs: int, cap_s: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", policy, name, str(jobs)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=cap_s, check=True)
    except subprocess.TimeoutExpired:
        return {"policy": policy, "cell": name, "jobs": jobs, "seconds": None, "cpu_seconds": None,
                "floor_ratio": None, "peak_mib": None, "capped": True, "note": f"capped: > {cap_s:g} s"}
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"busy cell {policy} {name} x{jobs} failed:\n{e.stderr[-2000:]}") from e
    return json.loads(out.stdout.strip().splitlines()[-1])


def met(row: dict) -> bool | None:
    """The target (<= 10 s) for a full-size cell; None for a short one (the target is for 10,000 jobs)."""
    if row["jobs"] < FULL_JOBS:
        return None
    return bool(not row["capped"] and row["seconds"] is not None and row["seconds"] <= TARGET_S
                and row["peak_mib"] <= 1024)


def table(rows: list[dict], machine: str) -> str:
    lines = [f"Busy cluster sweep ({machine}); seconds of simulate() only; target <= {TARGET_S:g} s at "
             f"{FULL_JOBS:,} jobs",
             f"{'cell':18} {'policy':13} {'nodes':>6} {'jobs':>7} {'wall s':>8} {'CPU s':>8} {'x floor':>8} "
             f"{'peak MiB':>9} {'done':>7}  met"]
    for r in rows:
        m = met(r)
        mark = "-" if m is None else ("yes" if m else "NO")
        if r["capped"]:
            lines.append(f"{r['cell']:18} {r['policy']:13} {'':>6} {r['jobs']:>7} {'-':>8} {'-':>8} {'-':>8} "
                         f"{'-':>9} {'-':>7}  {mark} ({r['note']})")
            continue
        ratio = f"{r['floor_ratio']:8.0f}" if r.get("floor_ratio") else f"{'-':>8}"
        lines.append(f"{r['cell']:18} {r['policy']:13} {r['nodes']:>6} {r['jobs']:>7} {r['seconds']:8.2f} "
                     f"{r['cpu_seconds']:8.2f} {ratio} {r['peak_mib']:9.0f} {r['completed']:>7}  {mark}"
                     + ("  DEADLOCK" if r["deadlock"] else ""))
    return "\n".join(lines)


def run(full: bool | None = None, policies=POLICIES, names=None) -> dict:
    """Every policy on every sweep cell: short (1,000 jobs) unless ``full`` (or ``BENCH_BUSY_FULL``)."""
    full = full_requested() if full is None else full
    jobs, cap = (FULL_JOBS, FULL_CAP_S) if full else (SHORT_JOBS, SHORT_CAP_S)
    warm = warm_compiled()
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
               f"{os.getloadavg()[0]:.1f} at start" + (f"; {warm}" if warm else ""))
    names = names or cells() + [TOPOLOGY_CELL]
    rows = [_cell_in_subprocess(p, n, jobs, cap) for n in names for p in policies
            if n != TOPOLOGY_CELL or p in TOPOLOGY_POLICIES]
    verdicts = [met(r) for r in rows]
    return {"full": full, "jobs": jobs, "rows": rows, "machine": machine,
            "every_cell_met": (all(verdicts) if full else None), "table": table(rows, machine)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the full sweep (10,000 jobs a cell)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--cells", default="", help="comma-separated cell names (default: all)")
    ap.add_argument("--cell", nargs=3, metavar=("POLICY", "CELL", "JOBS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        policy, name, jobs = args.cell
        print(json.dumps(cell(policy, name, int(jobs))))
        return
    out = run(full=args.full or None, policies=tuple(args.policies.split(",")),
              names=[c for c in args.cells.split(",") if c] or None)
    print(out["table"])
    if args.json:
        print(json.dumps({k: v for k, v in out.items() if k != "table"}, indent=1))


if __name__ == "__main__":
    main()
