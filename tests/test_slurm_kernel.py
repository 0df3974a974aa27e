"""The compiled backfill pass (``courselib.model.policies.slurm_kernel``) decides what the reference does.

``SlurmFast`` hands a backfill pass to the compiled pass when every job it tests is plain, the cluster
has no topology or topology/tree (whose plugin the pass plans as), reservations are for every job and
numba is installed; by default only for
workloads of ``KERNEL_FROM`` jobs or more. Here ``KERNEL_FROM`` is 0, so every such pass of these
small workloads is compiled, and ``test_gang_fastpath.same`` compares each run with the reference
(``simulate(..., reference=True)``): every pass's reservations, every job's start, end, state and
pending reason, and the whole trace. Workloads with constraints, exclusive jobs or memory mix
compiled passes with Python ones (a pass goes to Python when one of its jobs is not plain).
Slips planted in the pass, run uncompiled (``slurm_kernel.COMPILED = False``), make these checks fail.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from budget import examples
from courselib.model import compiled
from courselib.model.generate import (BUSY_RUNTIMES, BUSY_SIZES, OVERLOADED_TOPOLOGY, busy_workload,
                                      overloaded_workload, scale_workload, with_topology)
from courselib.model.policies import slurm_fast, slurm_kernel
from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.sim.gang import simulate
from test_gang_fastpath import VARIANTS, _slurm_passes as _passes, same, topology_crowds, workloads

pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered in scalar multiply:RuntimeWarning"),
              # (the uncompiled popcount's last multiply wraps, as the compiled one's does)
              pytest.mark.skipif(not compiled.available(), reason="numba is not installed (pip install "
                                "'courselib[fast]'): the compiled pass is not used, the Python pass is")]

SLURM = sorted(v for v in VARIANTS if v.split("+")[0] == "slurm")


@pytest.fixture(autouse=True)
def every_pass_compiled(monkeypatch):
    """Every pass the compiled pass can take, whatever the workload's size; counts them."""
    monkeypatch.setattr(slurm_fast, "KERNEL_FROM", 0)
    seen = []
    original = slurm_fast.SlurmFast._kernel_pass

    def counting(self, state, pending):
        done = original(self, state, pending)
        seen.append(done)
        return done

    monkeypatch.setattr(slurm_fast.SlurmFast, "_kernel_pass", counting)
    return seen


def busy(seed: int, **over) -> Workload:
    return busy_workload(seed, **{"nodes": 6, "gpus_per_node": 4, "jobs": 60, "mean_runtime_s": 300.0, **over})


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(max_jobs=30, oversize=2), st.sampled_from(SLURM))
def test_compiled_passes_match_the_reference_on_random_workloads(w, variant):
    """Random small clusters: constraints, exclusive jobs, memory, time limits, jobs of no runtime,
    jobs larger than the cluster, the options of every Slurm variant."""
    same(w, variant, horizon=12 * 3600)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6), st.sampled_from(SLURM), st.sampled_from([(4, 8), (6, 2), (10, 1), (70, 4)]),
       st.sampled_from(BUSY_SIZES), st.sampled_from(BUSY_RUNTIMES), st.sampled_from([0.2, 1.0, 20.0]),
       st.sampled_from([0.0, 0.0, 0.2]))
def test_compiled_passes_match_the_reference_on_busy_clusters(seed, variant, shape, sizes, runtime, gap, never):
    """The busy cluster of issue 35, small: every pass reserves for every job it tests. 70 nodes:
    a node set of two 64-bit words."""
    nodes, gpn = shape
    same(busy(seed, nodes=nodes, gpus_per_node=gpn, jobs=60, sizes=sizes, runtime=runtime, mean_gap_s=gap,
              never_fit=never), variant)


@pytest.mark.parametrize("seed", range(3))
def test_compiled_passes_match_the_reference_on_scale_and_overloaded_workloads(seed, every_pass_compiled):
    for w in (scale_workload(seed, nodes=12, jobs=120, load=1.2), overloaded_workload(seed, nodes=5, gpus_per_node=2,
                                                                                       jobs=40)):
        same(w, "slurm")
    assert any(every_pass_compiled)


def test_the_compiled_pass_runs_and_a_long_pass_matches(every_pass_compiled):
    """A busy queue longer than bf_max_job_test, on 130 nodes (three words): the passes run
    compiled (none goes to Python), and each equals the reference's."""
    w = busy(4, nodes=130, gpus_per_node=8, jobs=120, mean_gap_s=0.2)
    same(w, "slurm", bf_max_job_test=40)
    assert every_pass_compiled and all(every_pass_compiled), "every pass of plain jobs is compiled"
    assert len(every_pass_compiled) > 50


def test_a_pass_with_one_job_not_plain_goes_to_python(every_pass_compiled):
    """One exclusive job among plain ones: the passes that test it are Python's, the others compiled."""
    jobs = [Job(f"j{k}", pods=2, gpus_per_pod=2, submit=10.0 * k, duration=900.0) for k in range(12)]
    jobs.insert(5, Job("whole", pods=1, gpus_per_pod=1, submit=45.0, duration=600.0, exclusive=True))
    w = Workload(ClusterSpec(3, 4), jobs)
    same(w, "slurm")
    assert True in every_pass_compiled and False in every_pass_compiled


#: trees of one to three levels, outermost first (the innermost level's switches are the leaves)
TREES = [(("block", 2),), (("rack", 4), ("block", 2)), (("rack", 6), ("block", 3)),
         (("spine", 8), ("rack", 4), ("block", 2))]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_crowds(TREES, switches=True), st.sampled_from(SLURM))
def test_compiled_passes_match_the_reference_on_trees(w, variant):
    """On topology/tree the compiled pass plans every job as the plugin's loop does (the reference
    runs ``topology.slurm_tree_reference``), and a job waiting for ``--switches=N`` starts only
    where N leaf switches hold it."""
    same(w, variant, horizon=12 * 3600)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6), st.sampled_from(SLURM), st.sampled_from(BUSY_SIZES),
       st.sampled_from([(("rack", 10), ("block", 5)), (("rack", 4), ("block", 2)), (("block", 1),)]))
def test_compiled_passes_match_the_reference_on_busy_trees(seed, variant, sizes, tree):
    """The busy sweep's topology cell (``bench_busy.TOPOLOGY_CELL``), small: a long feasible queue on
    a tree, 30 % of multi-node jobs requiring their smallest level and 40 % preferring it."""
    w = with_topology(busy(seed, nodes=20, gpus_per_node=4, jobs=60, sizes=sizes), tree, seed)
    same(w, variant)


def test_the_compiled_pass_plans_the_benchmarks_tree(every_pass_compiled):
    """The overloaded benchmark's tree (racks of 25, blocks of 5) with a busy queue: every pass is
    compiled, some job waits for its switch, and each pass equals the reference's."""
    w = with_topology(busy(7, nodes=75, gpus_per_node=2, jobs=70, mean_gap_s=5.0), OVERLOADED_TOPOLOGY, 7)
    policy = slurm_fast.SlurmFast(w)
    assert any(policy.switches(j) for j in w.jobs), "some job requires a leaf switch (--switches)"
    same(w, "slurm")
    assert every_pass_compiled and all(every_pass_compiled)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from([-np.inf, 0.0, 30.0, 60.0, 90.0, 600.0]), min_size=0, max_size=40), st.data())
def test_the_running_jobs_ends_are_sorted_from_the_last_passs_order(ends, data):
    """``_sorted_ends`` (uncompiled) orders the entries by expected end, whatever changed since
    the last pass (some entries, none, all of them, or the arrays grew)."""
    fn = getattr(slurm_kernel._sorted_ends, "py_func", slurm_kernel._sorted_ends)
    before = np.array(ends, np.float64)
    order = fn(before, np.empty(0, np.float64), np.empty(0, np.int64))
    after = before.copy()
    few = data.draw(st.booleans())  # (at most an eighth: merged into the last order; more: sorted anew)
    for k in data.draw(st.lists(st.integers(0, max(len(ends) - 1, 0)),
                                max_size=len(ends) // 8 if few else len(ends))) if ends else ():
        after[k] = data.draw(st.sampled_from([-np.inf, 0.0, 45.0, 60.0, 1e9]))
    if data.draw(st.booleans()):
        after = np.concatenate([after, np.full(data.draw(st.integers(1, 5)), -np.inf)])
    got = fn(after, before, order)
    assert sorted(got.tolist()) == list(range(len(after)))
    assert np.all(after[got][:-1] <= after[got][1:]), (after, got)


def test_a_reservation_that_begins_when_a_job_would_end_blocks_it():
    same(CLOSED, "slurm")
    assert simulate(CLOSED, "slurm").job("p2").start == 200


@pytest.mark.parametrize("topology", [(), (("rack", 6), ("block", 3))])
def test_a_job_due_to_end_now_is_over_at_every_later_row(topology):
    """Five jobs of no runtime hold nodes 0-4 when the pass runs (they end now, after it); j6 (60 s)
    starts on node 5 and adds the pass's first row after now. At 60 s every node is free
    (``Slurm._free_at``: an expected end at or before t), so j7 is reserved on node 0. The
    compiled pass had made that row from row 0, where nodes 0-4 were still held: node 5."""
    w = due_now(topology)
    same(w, "slurm")
    with _passes() as passes:
        simulate(w, "slurm")
    assert passes[False][0][1]["j7"] == (60.0, 60.0, [0])


def test_a_row_added_among_the_rows_made_is_made_from_the_cluster_after_now():
    """The same, where the row at 60 s comes in between rows already made (j5's search made the
    row at 1,000 s): it is copied from the cluster just after now too."""
    w = due_now_after_a_row_is_made()
    same(w, "slurm")
    with _passes() as passes:
        simulate(w, "slurm")
    assert passes[False][0][1] == {"j5": (1000.0, 1100.0, [0, 1]), "j7": (60.0, 60.0, [1])}


def test_the_kernel_is_used_by_default_only_for_thousands_of_jobs(monkeypatch):
    """``KERNEL_FROM`` jobs or more on at most ``KERNEL_NODES`` nodes, by default; ``use_kernel``
    decides otherwise."""
    monkeypatch.setattr(slurm_fast, "KERNEL_FROM", 2000)
    spec = ClusterSpec(2, 8)
    few = Workload(spec, [Job(f"j{k}", 1, 1, duration=60.0) for k in range(1999)])
    many = Workload(spec, [Job(f"j{k}", 1, 1, duration=60.0) for k in range(2000)])
    assert not slurm_fast.SlurmFast(few)._kernel_ready()
    assert slurm_fast.SlurmFast(many)._kernel_ready()
    asked = slurm_fast.SlurmFast(few)
    asked.use_kernel = True
    assert asked._kernel_ready()
    assert not slurm_fast.SlurmFast(many, bf_job_part_count_reserve=1)._kernel_ready()
    wide = Workload(ClusterSpec(slurm_fast.KERNEL_NODES + 1, 8), many.jobs)
    assert not slurm_fast.SlurmFast(wide)._kernel_ready()
    tree = Workload(ClusterSpec(4, 8, topology=(("block", 2),)), many.jobs)
    assert slurm_fast.SlurmFast(tree)._kernel_ready()
    block = Workload(ClusterSpec(4, 8, topology=(("block", 2),), slurm_topology="block"), many.jobs)
    assert not slurm_fast.SlurmFast(block)._kernel_ready(), "topology/block stays in Python"
    wide_tree = Workload(ClusterSpec(2 * slurm_fast.KERNEL_NODES, 8, topology=(("block", 8),)), many.jobs)
    assert slurm_fast.SlurmFast(wide_tree)._kernel_ready(), "a tree of any size is compiled"


def test_without_numba_the_python_pass_decides_the_same():
    """``COURSELIB_NO_KERNEL`` (as if numba were absent): no pass is compiled, numba is never
    imported, and the result is the compiled run's."""
    code = (
        "import sys, hashlib\n"
        "from courselib.model.policies import slurm_fast\n"
        "slurm_fast.KERNEL_FROM = 0\n"
        "from courselib.model.generate import busy_workload\n"
        "from courselib.sim.gang import simulate\n"
        "r = simulate(busy_workload(3, nodes=8, gpus_per_node=4, jobs=200), 'slurm')\n"
        "print(hashlib.sha256(repr(r.to_dict()).encode()).hexdigest(), 'numba' in sys.modules)\n")
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "COURSELIB_NO_KERNEL": "1"})
    h_on, numba_on = on.stdout.split()
    h_off, numba_off = off.stdout.split()
    assert (numba_on, numba_off) == ("True", "False")
    assert h_on == h_off


# ---- planted slips: each makes the equality checks fail ------------------------------------------

def _slip_count_ignores_reservations(levels, slot, g, capacity, blocked, words, need):
    return _ORIGINAL["_count"](levels, slot, g, capacity, blocked * 0, words, need)


def _slip_beaten_ignores_the_runtime(corner_g, corner_p, corner_r, corner_j, n_corners, slot, g, pods, run):
    return _ORIGINAL["_beaten"](corner_g, corner_p, corner_r, corner_j, n_corners, slot, g, pods, 10 ** 12)


def _slip_beaten_ignores_gpus_a_pod(corner_g, corner_p, corner_r, corner_j, n_corners, slot, g, pods, run):
    return _ORIGINAL["_beaten"](corner_g, corner_p, corner_r, corner_j, n_corners, slot, 10 ** 6, pods, run)


def _slip_new_row_forgets_its_reservations(times, slots, n_rows, levels, held, held_pods, t, after, built):
    pos, n, built = _ORIGINAL["_add_row"](times, slots, n_rows, levels, held, held_pods, t, after, built)
    if n > n_rows:
        held[slots[pos], :] = 0
    return pos, n, built


def _slip_sorted_ends_drops_the_changes(ev_end, prev_end, prev_order):
    """The last pass's order kept without the entries that changed since (a job started or ended)
    instead of merged back in. (Kept in with their old places, they would leave the rows out of
    time order, and the uncompiled pass may never end: a jump to a row's time can go back.)"""
    if prev_end.shape[0] == ev_end.shape[0]:
        return prev_order[(ev_end == prev_end)[prev_order]]
    return _ORIGINAL["_sorted_ends"](ev_end, prev_end, prev_order)


def _slip_find_one_row_late(times, n_rows, t):
    pos = _ORIGINAL["_find"](times, n_rows, t)
    return pos + 1 if pos < n_rows and times[pos] == t and pos > 0 else pos


def uncompiled(monkeypatch) -> None:
    """The pass as plain Python, its helpers too (compiled in place once the kernel was made)."""
    monkeypatch.setattr(slurm_kernel, "COMPILED", False)
    for helper in slurm_kernel._HELPERS:
        fn = getattr(slurm_kernel, helper)
        monkeypatch.setattr(slurm_kernel, helper, getattr(fn, "py_func", fn))


def _slip_past_one_row_too_far(times, n_rows, top, horizon, stop):
    return _ORIGINAL["_past"](times, n_rows, top, horizon, stop) + 1


def _slip_blocked_by_list_open_at_the_end(res_start, res_end, res_mask, n_res, t, end, blocked, words):
    return _ORIGINAL["_blocked_by_list"](res_start, res_end, res_mask, n_res, t, end - 1e-9, blocked, words)


def _slip_floor_ignores_the_runtime(fl_g, fl_p, fl_r, fl_t, n_fl, g, pods, run):
    return _ORIGINAL["_floor"](fl_g, fl_p, fl_r, fl_t, n_fl, g, pods, 10 ** 12)


def _slip_floor_kept_for_a_job_one_pod_smaller(fl_g, fl_p, fl_r, fl_t, n_fl, g, pods, run, t):
    return _ORIGINAL["_keep_floor"](fl_g, fl_p, fl_r, fl_t, n_fl, g, max(pods - 1, 1), run, t)


def _slip_new_row_counts_no_pods_off_held(times, slots, n_rows, levels, held, held_pods, t, after, built):
    pos, n, built = _ORIGINAL["_add_row"](times, slots, n_rows, levels, held, held_pods, t, after, built)
    if n > n_rows:
        held_pods[slots[pos], :] = 0
    return pos, n, built


def due_now(topology=()) -> Workload:
    """Jobs of no runtime and one of 60 s (:func:`test_a_job_due_to_end_now_is_over_at_every_later_row`)."""
    return Workload(ClusterSpec(6, 1, topology=topology),
                    [Job(f"j{k}", 2 if k == 5 else 1, 1, submit=0.0, duration=0.0,
                         time_limit=60.0 if k == 6 else None) for k in range(8)])


def due_now_after_a_row_is_made() -> Workload:
    """:func:`due_now` with a job ``r`` of 1,000 s first (node 0) and j5 of 100 s: j5 (two nodes) is
    reserved at 1,000 s, the pass's first row after now until j6 (60 s, node 6) adds one at 60 s,
    between the rows made. At 60 s nodes 1-5 are free, so j7 is reserved on node 1; made from row
    0, that row had them held and node 6 free."""
    return Workload(ClusterSpec(7, 1), [Job("r", 1, 1, submit=0.0, duration=1000.0, time_limit=1000.0, priority=9)] +
                    [Job(f"j{k}", 2 if k == 5 else 1, 1, submit=0.0, duration=100.0 if k == 5 else 0.0,
                         time_limit={5: 100.0, 6: 60.0}.get(k)) for k in range(8)])


def _slip_new_row_after_now_copies_row_0(times, slots, n_rows, levels, held, held_pods, t, after, built):
    return _ORIGINAL["_add_row"](times, slots, n_rows, levels, held, held_pods, t, slots[0], built)


def _slip_made_row_after_now_copies_row_0(levels, times, slots, built, after, *rest):
    """The first row's levels made from row 0 (now), where a job due to end now still runs."""
    return _ORIGINAL["_make_row"](levels, times, slots, built, slots[0], *rest)


def _slip_made_row_forgets_the_starts(levels, times, slots, built, after, capacity, ev_end, ev_node,
                                      ev_gpus, order, ev_k, st_end, st_node, st_gpus, n_st):
    """A row made past a job started in the pass does not give back its GPUs at its end."""
    return _ORIGINAL["_make_row"](levels, times, slots, built, after, capacity, ev_end, ev_node, ev_gpus,
                                  order, ev_k, st_end, st_node, st_gpus, 0)


def _slip_made_row_frees_an_end_one_row_late(levels, times, slots, built, *rest):
    """A row made at a running job's expected end does not free its GPUs (the next row does)."""
    early = times.copy()
    early[built] = np.nextafter(times[built], -np.inf)
    return _ORIGINAL["_make_row"](levels, early, slots, built, *rest)


def _slip_tree_ignores_switches(levels, slot, g, capacity, blocked, tree, need, max_leaves, *rest):
    return _ORIGINAL["_tree_plan"](levels, slot, g, capacity, blocked, tree, need, 0, *rest)


def _slip_tree_ignores_reservations(levels, slot, g, capacity, blocked, *rest):
    return _ORIGINAL["_tree_plan"](levels, slot, g, capacity, blocked & 0, *rest)


def _slip_compare_never_climbs(sums, anc, tree, i, j, rem):
    """Leaf against leaf only: a leaf whose rack holds the rest is not preferred."""
    ci, cj = sums[0, i], sums[0, j]
    if (ci >= rem) != (cj >= rem):
        return ci >= rem, ci >= rem
    return (ci < cj if ci >= rem else ci > cj), ci >= rem


_ORIGINAL = {name: getattr(slurm_kernel, name)
             for name in ("_count", "_beaten", "_add_row", "_make_row", "_find", "_past", "_blocked_by_list",
                          "_floor", "_keep_floor", "_tree_plan", "_compare", "_sorted_ends")}
SLIPS = {
    "_count": _slip_count_ignores_reservations,
    "_beaten+runtime": _slip_beaten_ignores_the_runtime,
    "_beaten+gpus": _slip_beaten_ignores_gpus_a_pod,
    "_add_row": _slip_new_row_forgets_its_reservations,
    "_find": _slip_find_one_row_late,
    "_past+too-far": _slip_past_one_row_too_far,
    "_blocked_by_list": _slip_blocked_by_list_open_at_the_end,
    "_floor+runtime": _slip_floor_ignores_the_runtime,
    "_keep_floor": _slip_floor_kept_for_a_job_one_pod_smaller,
    "_add_row+held_pods": _slip_new_row_counts_no_pods_off_held,
    "_add_row+after": _slip_new_row_after_now_copies_row_0,
    "_make_row+after": _slip_made_row_after_now_copies_row_0,
    "_make_row+starts": _slip_made_row_forgets_the_starts,
    "_make_row+late": _slip_made_row_frees_an_end_one_row_late,
    "_tree_plan+switches": _slip_tree_ignores_switches,
    "_tree_plan+reservations": _slip_tree_ignores_reservations,
    "_compare": _slip_compare_never_climbs,
    "_sorted_ends": _slip_sorted_ends_drops_the_changes,
}


#: p2 (one node, 50 s) fits at 50 s on node 1 until 100 s, exactly when p1's reservation of both
#: nodes begins: the window is closed at its end, so p2 is reserved at 200 s (a window of two rows
#: and one reservation: blocked from the list of reservations)
CLOSED = Workload(ClusterSpec(2, 1), [Job("r0", 1, 1, duration=100.0, time_limit=100.0),
                                      Job("r1", 1, 1, duration=50.0, time_limit=50.0),
                                      Job("p1", 2, 1, duration=100.0, time_limit=100.0),
                                      Job("p2", 1, 1, duration=50.0, time_limit=50.0)])

#: busy queues (every job reserves: windows of few rows) and friendlier ones (few reservations over
#: long windows: blocked nodes from the list of reservations)
SLIP_WORKLOADS = [busy(seed, nodes=5, gpus_per_node=4, jobs=30, runtime="lognormal") for seed in range(5)] + \
    [scale_workload(seed, nodes=12, jobs=60, load=1.2) for seed in range(2)] + \
    [CLOSED, due_now(), due_now_after_a_row_is_made()] + \
    [with_topology(busy(seed, nodes=12, gpus_per_node=2, jobs=30, mean_gap_s=5.0), tree, seed)
     for seed, tree in enumerate(((("rack", 6), ("block", 3)), (("spine", 12), ("rack", 4), ("block", 2))))]


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_a_slip_planted_in_the_pass_fails_the_checks(slip, monkeypatch):
    """The pass uncompiled, with one helper wrong: at least one of a few busy workloads differs
    from the reference (and the same workloads pass with no slip: the last case)."""
    uncompiled(monkeypatch)
    name = slip.split("+")[0]
    monkeypatch.setitem(_ORIGINAL, name, getattr(slurm_kernel, name))
    monkeypatch.setattr(slurm_kernel, name, SLIPS[slip])
    failed = 0
    for w in SLIP_WORKLOADS:
        try:
            same(w, "slurm")
        except (AssertionError, KeyError, ValueError):  # (a wrong plan may not even bind)
            failed += 1
    assert failed, f"the slip {slip} went unnoticed"


def test_the_uncompiled_pass_with_no_slip_passes(monkeypatch, every_pass_compiled):
    uncompiled(monkeypatch)
    for w in SLIP_WORKLOADS:
        same(w, "slurm")
    assert all(every_pass_compiled)


def poisoned(monkeypatch) -> None:
    """Every pass after the first gets the arrays the last one kept (``slurm_kernel._pools``)
    full of what no pass writes: every level set (every node has every GPU free), every plan 0."""
    original = slurm_kernel._pools

    def junk(work):
        levels, pool = original(work)
        levels.fill(np.uint64(2 ** 64 - 1))
        pool.fill(0)
        return levels, pool

    monkeypatch.setattr(slurm_kernel, "_pools", junk)


def test_arrays_left_by_an_earlier_pass_change_nothing(monkeypatch, every_pass_compiled):
    """The pass reuses arrays from pass to pass (``work``): each entry it reads it writes first,
    so arrays full of junk give every pass the reference's decisions."""
    poisoned(monkeypatch)
    for w in SLIP_WORKLOADS:
        same(w, "slurm")
    assert every_pass_compiled and all(every_pass_compiled)


def _slip_fresh_rows_keep_row_0(levels, held, after):
    held[0, :] = np.uint64(0)
    held[after, :] = np.uint64(0)


def test_a_pass_that_trusts_the_last_passs_rows_is_caught(monkeypatch):
    """The same junk, with the pass (uncompiled, which keeps the levels of every cluster, as the
    compiled pass does on a tree) not clearing row 0's levels, which it reads before it writes them: every node then has
    every GPU free now."""
    uncompiled(monkeypatch)
    poisoned(monkeypatch)
    monkeypatch.setattr(slurm_kernel, "_fresh_rows", _slip_fresh_rows_keep_row_0)
    failed = 0
    for w in SLIP_WORKLOADS:
        try:
            same(w, "slurm")
        except (AssertionError, KeyError, ValueError, IndexError):  # (junk levels: nodes past the cluster)
            failed += 1
    assert failed, "row 0's levels kept from the last pass went unnoticed"
