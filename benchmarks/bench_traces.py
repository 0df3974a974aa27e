"""Every replayable GPU trace of the corpus under every gang policy (issue 22): wall and CPU seconds,
peak memory, µs per job and the ratio over the heapq floor, each cell in its own subprocess, capped
at 60 s (the target for the biggest trace).

Run: ``.venv/bin/python benchmarks/bench_traces.py [--quick]``; ``make bench`` calls :func:`run`.
The traces are read from ``../shared/corpus/traces`` (never copied into the repository); without
the corpus the part is skipped with a note. The cluster is ``courselib trace replay``'s default
(0.8 of the trace's peak demand, at least its largest job).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "corpus" / "traces"
TRACES = ("SymbioticLab__Tiresias__simulator__60_job.csv",
          "erangvee__slurm_sim_vanilla__slurm_sim_tools__tutorials__micro_cluster__test_trace.csv",
          "alibaba__clusterdata__cluster-trace-gpu-v2023__csv__openb_pod_list_default.csv",
          "DIR-LAB__deep-batch-scheduler__data__lublin_256.swf")
QUICK = TRACES[:2]
CAP_S = 60.0


def cell(name: str, policy: str) -> dict:
    sys.path.insert(0, str(HERE))
    from bench_scale import heapq_floor

    from courselib.io.traces import read_trace
    from courselib.sim.traces import replay
    wall, cpu = time.perf_counter(), time.process_time()
    rep = replay(read_trace(CORPUS / name), policy)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    s = rep.summary()
    floor = heapq_floor(rep.result)
    return {"trace": name, "policy": policy, "jobs": s["jobs"], "cluster": s["cluster"], "seconds": wall,
            "cpu_seconds": cpu, "us_per_job": wall / s["jobs"] * 1e6, "floor_ratio": wall / floor if floor else None,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "capped": False,
            "deadlock": s["deadlock"], "idle_gpu_hours": s["idle_gpu_hours"], "utilisation": s["utilisation"],
            "wait_mean_s": s["queueing_delay_s"]["mean"], "wait_p90_s": s["queueing_delay_s"]["p90"],
            "never_started": s["never_started"]}


def run(quick: bool = False) -> dict:
    from courselib.model.policies import policy_names
    if not CORPUS.is_dir():
        return {"rows": [], "note": f"real traces skipped: {CORPUS} is not here"}
    rows = []
    for name in (QUICK if quick else TRACES):
        for policy in policy_names():
            cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", name, policy]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=CAP_S, check=True)
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            except subprocess.TimeoutExpired:
                rows.append({"trace": name, "policy": policy, "capped": True, "seconds": None,
                             "note": f"capped: > {CAP_S:g} s"})
    biggest = [r for r in rows if r["trace"] == (QUICK if quick else TRACES)[-1]]
    return {"rows": rows, "biggest_trace_all_policies_met":
            all(not r["capped"] and r["seconds"] <= CAP_S for r in biggest) if biggest else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cell", nargs=2, metavar=("TRACE", "POLICY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        print(json.dumps(cell(*args.cell)))
        return
    print(json.dumps(run(args.quick), indent=1))


if __name__ == "__main__":
    main()
