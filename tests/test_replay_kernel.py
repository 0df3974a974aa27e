"""The compiled EASY replay (courselib.model.replay_kernel) makes the decisions of the reference.

``replay`` hands EASY to the compiled replay from ``KERNEL_FROM`` jobs on when numba is installed
(the ``fast`` extra). Here it is forced on every workload: random ones (the generator of
test_replay), the hand-checked cases, and the Lublin-256 trace whole against the Python path.
Slips planted in the uncompiled replay each make a check fail.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings

import test_replay as tr
from budget import examples
from courselib.io.traces import read_trace
from courselib.model import compiled, replay as rp, replay_kernel as rk

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba is not installed (the fast extra)")


@pytest.fixture
def always_compiled(monkeypatch):
    monkeypatch.setattr(rp, "KERNEL_FROM", 0)


@settings(max_examples=examples(400), deadline=None)
@given(tr.workloads())
def test_compiled_easy_equals_the_reference_on_random_workloads(w):
    jobs, cores = w
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rp, "KERNEL_FROM", 0)
        assert rp.replay(jobs, cores, "easy").start == rp.replay_reference(jobs, cores, "easy").start


HAND_CHECKED = [tr.test_fifo_head_blocks_the_queue_easy_backfills_a_short_job,
                tr.test_easy_backfills_a_long_job_only_on_the_extra_cores,
                tr.test_easy_uses_the_estimate_not_the_run_time,
                tr.test_same_instant_ends_before_arrivals_and_zero_length_jobs_free_at_once,
                tr.test_a_job_wider_than_the_machine_is_rejected_not_blocking,
                tr.test_a_parked_job_comes_back_when_a_zero_length_job_gives_back_extra_cores]


@pytest.mark.parametrize("case", HAND_CHECKED, ids=lambda f: f.__name__[5:])
def test_the_hand_checked_cases_hold_compiled(case, always_compiled):
    case()


def test_lublin_256_compiled_equals_the_python_path_on_every_job(corpus, monkeypatch):
    path = corpus / tr.LUBLIN
    if not path.is_file():
        pytest.skip(f"{path} not in the corpus")
    jobs = rp.from_trace_jobs(read_trace(path).jobs)[0]
    assert len(jobs) >= rp.KERNEL_FROM  # (the compiled replay by default)
    compiled = rp.replay(jobs, 256, "easy").start
    monkeypatch.setenv("COURSELIB_NO_KERNEL", "1")
    assert rp.replay(jobs, 256, "easy").start == compiled


def _random_workloads(count: int = 150):
    """Small seeded workloads with ties, zero run times and estimates over the run time."""
    out = []
    for seed in range(count):
        rnd = random.Random(seed)
        cores = rnd.randint(1, 8)
        jobs = []
        for k in range(rnd.randint(2, 14)):
            run = rnd.choice([0, rnd.randint(1, 20)])
            jobs.append(tr.J(f"j{k}", rnd.randint(0, 30), run, rnd.randint(1, cores + 1), run + rnd.choice([0, 0, 5])))
        out.append((jobs, cores))
    return out


#: A and B end together at 10 (expected): the head H's shadow is 10 and its extra cores count
#: both (5 - 3 = 2), so the long one-core L backfills on them
TIES = ([tr.J("A", 0, 10, 2), tr.J("B", 0, 10, 2), tr.J("H", 1, 5, 3), tr.J("L", 1, 100, 1)], 5)
WORKLOADS = _random_workloads() + [TIES]


def _slip_shadow_without_ties(exp_key, exp_rank, n_exp, procs, free, need):
    avail, shadow = free, float("inf")
    for p in range(n_exp):
        avail += procs[exp_rank[p]]
        if avail >= need:
            return exp_key[p], avail - need
    return shadow, avail - need


def _slip_remove_the_next_one(keys, ranks, n, key, rank):
    return ORIGINAL["_remove"](keys, ranks, n, key + 1e-9, rank)


def _slip_first_new_one_late(queue, n_q, scanned):
    return min(ORIGINAL["_first_new"](queue, n_q, scanned) + 1, n_q)


def _slip_insert_without_the_rank(keys, ranks, lo, n, key, rank):
    return ORIGINAL["_insert"](keys, ranks, lo, n, key, 0)


ORIGINAL = {name: getattr(rk, name) for name in ("_remove", "_first_new", "_insert")}
SLIPS = {"_shadow": _slip_shadow_without_ties, "_remove": _slip_remove_the_next_one,
         "_first_new": _slip_first_new_one_late, "_insert": _slip_insert_without_the_rank}


def _uncompiled(monkeypatch):
    rk.kernel()  # (the helpers are compiled in place once: take their Python functions back)
    monkeypatch.setattr(rk, "COMPILED", False)
    for name in rk._HELPERS:
        fn = getattr(rk, name)
        monkeypatch.setattr(rk, name, getattr(fn, "py_func", fn))


def test_the_uncompiled_replay_with_no_slip_passes(monkeypatch, always_compiled):
    _uncompiled(monkeypatch)
    for jobs, cores in WORKLOADS:
        assert rp.replay(jobs, cores, "easy").start == rp.replay_reference(jobs, cores, "easy").start


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_a_slip_planted_in_the_replay_fails_the_checks(slip, monkeypatch, always_compiled):
    _uncompiled(monkeypatch)
    monkeypatch.setitem(ORIGINAL, slip, getattr(rk, slip))
    monkeypatch.setattr(rk, slip, SLIPS[slip])
    failed = 0
    for jobs, cores in WORKLOADS:
        try:
            failed += rp.replay(jobs, cores, "easy").start != rp.replay_reference(jobs, cores, "easy").start
        except (IndexError, ValueError):
            failed += 1
    assert failed, f"the slip {slip} went unnoticed"
