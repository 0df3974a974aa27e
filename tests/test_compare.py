"""Seeded workloads and the four-policy comparison behind chapter 9."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from courselib.model.generate import mixed_workload
from courselib.sim.compare import POLICIES, compare, summarise
from budget import examples


def test_same_seed_same_workload_other_seed_other_workload():
    assert mixed_workload(3) == mixed_workload(3)
    assert mixed_workload(3) != mixed_workload(4)


def test_mixed_workload_fits_its_cluster_and_has_bursts():
    w = mixed_workload(0, burst=3)
    assert all(j.gpus <= w.cluster.total_gpus for j in w.jobs)
    submits = [j.submit for j in w.jobs]
    assert submits == sorted(submits)
    assert submits[0] == submits[1] == submits[2]          # a burst of three
    assert all(j.time_limit >= j.duration for j in w.jobs)


def test_bad_generator_arguments():
    with pytest.raises(ValueError):
        mixed_workload(0, nodes=0)


@settings(max_examples=examples(8), deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_placement_level_gangs_never_hold_gpus_idle(seed):
    """Volcano (allocate commits only ready jobs) and Slurm (whole-job allocation): zero waste."""
    rows = compare({"w": mixed_workload(seed, nodes=8, jobs=10)}, ("volcano", "slurm"), horizon=24 * 3600)
    assert all(r.wasted_gpu_hours == 0 for r in rows)
    assert all(not r.deadlock for r in rows)


def test_compare_and_summarise_shape():
    rows = compare({"a": mixed_workload(1, nodes=8, jobs=8), "b": mixed_workload(2, nodes=8, jobs=8)})
    assert len(rows) == 2 * len(POLICIES)
    s = summarise(rows)
    assert set(s) == set(POLICIES)
    assert all(v["runs"] == 2 for v in s.values())
    assert s["volcano"]["wasted_gpu_hours"] == 0


def test_pod_by_pod_wastes_on_the_standard_mixes():
    rows = compare({f"mix{s}": mixed_workload(s) for s in range(3)}, ("kube-default",), horizon=24 * 3600)
    assert all(r.wasted_gpu_hours > 0 for r in rows)
