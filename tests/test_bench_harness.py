"""The benchmark harness's own logic (never its timings): AccaSim's EASY rules as restated in
benchmarks/bench_accasim.py, and run.py's table when a part has no figures."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from courselib.model.replay import CoreJob, replay

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


def J(id, submit, run, procs):
    return CoreJob(id, float(submit), float(run), procs, float(run))


def test_accasim_rules_backfill_without_protecting_the_reservation():
    # 4 cores. A holds 3 until 10; B needs all 4 (reservation at 10); C (1 core, 100 s) fits now.
    # Textbook EASY keeps C waiting (it would delay B); AccaSim's rules start it, and B waits
    # until C ends at 101 — the head job is late by 91 s.
    jobs = [J("A", 0, 10, 3), J("B", 0, 5, 4), J("C", 1, 100, 1)]
    rules, reservations = _load("bench_accasim").accasim_ebf_rules(jobs, 4)
    assert rules == [0, 101, 1]
    assert reservations == {1: 10}
    assert list(replay(jobs, 4, "easy").start) == [0, 10, 15]


def test_accasim_rules_agree_with_easy_when_nothing_can_jump_the_queue():
    jobs = [J("A", 0, 10, 2), J("B", 0, 5, 4), J("C", 1, 30, 4)]
    rules, _ = _load("bench_accasim").accasim_ebf_rules(jobs, 4)
    assert rules == list(replay(jobs, 4, "easy").start) == [0, 10, 15]


def test_heapq_floor_pops_every_event():
    jobs = [J("A", 0, 10, 2), J("B", 0, 5, 4)]
    assert _load("bench_accasim").heapq_floor(jobs, [0.0, None]) >= 0


def test_table_reports_missing_figures_as_null_not_a_crash():
    run = _load("run")
    res = {"quick": True, "details": {"scale": {"note": "not there yet"}, "course": {"import_s": 0.01}},
           "volcano_100k_jobs_s": None, "volcano_100k_peak_mib": None}
    rows = run.table(res)
    scale = next(r for r in rows if r[0].startswith("scale: volcano"))
    assert scale[1] == "null" and scale[5] == "-"
    imp = next(r for r in rows if r[0] == "course: import courselib")
    assert imp[5] == "yes"
    cold = next(r for r in rows if r[0].startswith("course: cold book build"))
    assert cold[1] == "not run"


def test_busy_sweep_cells_are_the_generators_and_the_target_is_for_full_cells_only():
    from courselib.model.generate import BUSY_SWEEP
    busy = _load("bench_busy")
    assert busy.cells() == [n for n, _ in BUSY_SWEEP] and busy.cells()[0] == "base"
    row = {"jobs": 10_000, "capped": False, "seconds": 9.0, "peak_mib": 300.0}
    assert busy.met(row) is True
    assert busy.met({**row, "seconds": 11.0}) is False
    assert busy.met({**row, "peak_mib": 2000.0}) is False
    assert busy.met({**row, "capped": True, "seconds": None, "peak_mib": None}) is False
    assert busy.met({**row, "jobs": 1_000}) is None
    assert busy.full_requested({"BENCH_BUSY_FULL": "1"}) and not busy.full_requested({})
    assert not busy.full_requested({"BENCH_BUSY_FULL": "0"})


def test_busy_workload_is_the_issues_case_and_seeded():
    from courselib.model.generate import busy_sweep_cell, busy_workload
    w = busy_sweep_cell("base", 35, 2_000)
    total = w.cluster.nodes * w.cluster.gpus_per_node
    assert (w.cluster.nodes, w.cluster.gpus_per_node, len(w.jobs)) == (75, 8, 2_000)
    gpus = [j.pods * j.gpus_per_pod for j in w.jobs]
    assert max(gpus) <= total * 3 // 4 + 8 and max(gpus) > total // 2   # sizes up to 3/4 of the cluster
    assert 0.8 < w.jobs[-1].submit / len(w.jobs) < 1.2                     # about one arrival a second
    mean = sum(j.duration for j in w.jobs) / len(w.jobs)
    assert 500 < mean < 700                                                # about ten minutes
    assert w == busy_sweep_cell("base", 35, 2_000) and w != busy_sweep_cell("base", 36, 2_000)
    never = busy_workload(1, jobs=1_000, never_fit=0.5)
    share = sum(j.pods * j.gpus_per_pod > total for j in never.jobs) / 1_000
    assert 0.4 < share < 0.6
    with pytest.raises(ValueError, match="no busy sweep cell"):
        busy_sweep_cell("nope", 1, 10)


def test_run_table_reports_busy_cells_with_the_target_only_at_full_size():
    run = _load("run")
    rows = [{"cell": "base", "policy": "slurm", "jobs": 10_000, "capped": True, "seconds": None, "peak_mib": None,
             "note": "capped: > 60 s"},
            {"cell": "base", "policy": "kueue", "jobs": 10_000, "capped": False, "seconds": 5.0, "cpu_seconds": 4.9,
             "peak_mib": 100.0, "floor_ratio": 300.0},
            {"cell": "base", "policy": "kueue", "jobs": 1_000, "capped": False, "seconds": 0.3, "cpu_seconds": 0.3,
             "peak_mib": 40.0, "floor_ratio": 300.0}]
    res = {"quick": False, "details": {"busy": {"rows": rows}}, "volcano_100k_jobs_s": None,
           "volcano_100k_peak_mib": None}
    out = [r for r in run.table(res) if r[0].startswith("  busy")]
    assert [r[5] for r in out] == ["NO", "yes", ""]
    assert out[0][1] == "capped: > 60 s" and out[1][3] == "300x"


def test_the_busy_topology_cell_is_the_base_cell_on_a_topology():
    busy = _load("bench_busy")
    base, topo = busy.workload("base", 35, 50), busy.workload(busy.TOPOLOGY_CELL, 35, 50)
    assert topo.cluster.topology and not base.cluster.topology
    assert [j.name for j in topo.jobs] == [j.name for j in base.jobs] and any(j.topology for j in topo.jobs)
    assert busy.TOPOLOGY_CELL not in busy.cells()
