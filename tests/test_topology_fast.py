"""Fast paths of the topology placements that the scale rows need (issue 29): each equals its reference."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from budget import examples
from courselib.model import topology
from courselib.model.workload import ClusterSpec


@st.composite
def tree_cases(draw):
    levels = draw(st.sampled_from([(("rack", 4), ("block", 2)), (("block", 2),), (("rack", 8), ("block", 4)),
                                   (("spine", 8), ("rack", 4), ("block", 2))]))
    nodes = levels[0][1] * draw(st.integers(1, 3))
    k = draw(st.lists(st.integers(0, 4), min_size=nodes, max_size=nodes))
    return (ClusterSpec(nodes, 4, topology=levels), k, draw(st.integers(1, max(1, sum(k) + 1))),
            draw(st.sampled_from([None, 1, 2, 3])))


@settings(max_examples=examples(400), deadline=None)
@given(tree_cases())
def test_slurm_tree_one_leaf_shortcut_equals_the_plugins_loop(case):
    """A job one leaf switch holds is placed at once, as the plugin's loop would place it; with
    ``--switches=N`` (``max_leaves``) too."""
    spec, k, pods, max_leaves = case
    assert topology.slurm_tree(spec, k, pods, max_leaves) == topology.slurm_tree_reference(spec, k, pods, max_leaves)


@settings(max_examples=examples(400), deadline=None)
@given(tree_cases())
def test_switches_n_refuses_exactly_the_placements_over_n_leaves(case):
    """``--switches=N`` still waiting: the plugin's own placement, kept if it uses N leaf switches
    or fewer, refused otherwise (eval_nodes_tree.c L1362-1411) -- never a different placement."""
    spec, k, pods, max_leaves = case
    free, _ = topology.slurm_tree_reference(spec, k, pods)
    plan, _ = topology.slurm_tree_reference(spec, k, pods, max_leaves)
    if free is None:
        assert plan is None
        return
    leaf = spec.topology[-1][1]
    leaves = len({i // leaf for i, _ in free})
    assert plan == (free if not max_leaves or leaves <= max_leaves else None)
    if max_leaves == 1:   # one leaf: exactly when some leaf holds the job (the tightest is taken)
        holds = any(sum(k[j:j + leaf]) >= pods for j in range(0, spec.nodes, leaf))
        assert (plan is not None) == holds


@st.composite
def wide_tree_cases(draw):
    """More leaf switches and levels than tree_cases: a job over many leaves, where the hops to
    the leaves already chosen decide between switches in different racks and spines."""
    levels = draw(st.sampled_from([(("spine", 16), ("rack", 4), ("block", 1)), (("spine", 12), ("rack", 6), ("block", 2)),
                                   (("rack", 8), ("block", 1))]))
    nodes = levels[0][1] * draw(st.integers(2, 4))
    k = draw(st.lists(st.sampled_from([0, 0, 1, 2, 3, 4]), min_size=nodes, max_size=nodes))
    return (ClusterSpec(nodes, 4, topology=levels), k, draw(st.integers(1, max(1, sum(k)))),
            draw(st.sampled_from([None, None, 2, 4])))


@pytest.mark.parametrize("wide", [False, True], ids=["python", "numpy"])
@settings(max_examples=examples(400), deadline=None)
@given(case=wide_tree_cases())
def test_slurm_tree_over_many_leaves_is_the_plugins_loop(wide, case):
    """A job no leaf switch holds: the loop with the hops and the ancestors' free pods kept as
    leaves are chosen places it leaf by leaf as the plugin's loop does (the same plan), with its
    sums and hops in Python (few leaves) and in numpy (from ``WIDE_TREE`` leaves on)."""
    spec, k, pods, max_leaves = case
    was = topology.WIDE_TREE
    try:
        topology.WIDE_TREE = 1 if wide else 10 ** 9
        assert topology.slurm_tree(spec, k, pods, max_leaves) == topology.slurm_tree_reference(spec, k, pods, max_leaves)
    finally:
        topology.WIDE_TREE = was
