"""The benchmark harness's own logic (never its timings): AccaSim's EASY rules as restated in
benchmarks/bench_accasim.py, and run.py's table when a part has no figures."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

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
