"""Fast paths of the topology placements that the scale rows need (issue 29): each equals its reference."""
from __future__ import annotations

import random

import numpy as np
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


def _tree_pairs(n: int = 250, seed: int = 5):
    """Random trees of many leaves, each with two spreads of the same free pods per leaf (k, k2)."""
    rnd = random.Random(seed)
    for _ in range(n):
        levels = rnd.choice([(("spine", 16), ("rack", 4), ("block", 2)), (("spine", 12), ("rack", 6), ("block", 3)),
                             (("rack", 8), ("block", 2))])
        nodes, leaf = levels[0][1] * rnd.randint(2, 4), levels[-1][1]
        k = [rnd.choice([0, 0, 1, 2, 3, 4]) for _ in range(nodes)]
        k2 = list(k)
        for a in range(0, nodes, leaf):
            k2[a:a + leaf] = rnd.sample(k2[a:a + leaf], leaf)
        yield (ClusterSpec(nodes, 4, topology=levels), k, k2, rnd.randint(1, max(1, sum(k))),
               rnd.choice([None, None, 2, 4]))


@pytest.mark.parametrize("plant", [None, "pods left out of the key", "max_leaves left out of the key",
                                   "the plan kept, not the leaves"])
def test_the_tree_keeps_its_choice_of_leaves_for_the_same_free_pods_per_leaf(plant):
    """The loop over the leaf switches reads only each leaf's free pods (issue 35: on the 6,250-node
    tree 96 % of its calls come again with the same ones), so its choice of leaves is kept for them
    and the plan made from the nodes of those leaves: asked again, and with the same pods per leaf
    spread otherwise over its nodes, slurm_tree is still the plugin's loop. A key without the
    pods or without --switches, or the plan kept instead of the leaves, fails."""
    leaves, key = topology._slurm_tree_leaves, topology._tree_key
    plans: dict = {}

    def kept_plan(spec, pods_in, pods, max_leaves, per_leaf):
        k = (spec.nodes, spec.topology, pods, max_leaves, per_leaf.tobytes())
        if k not in plans:
            plans[k] = leaves(spec, pods_in, pods, max_leaves, per_leaf)
        return plans[k]

    topology._TREE_CHOICES.clear()
    choice, calls = topology._tree_choice, [0, 0]

    def counted_leaves(*a, **kw):
        calls[0] += 1
        return leaves(*a, **kw)

    def counted_choice(*a):
        calls[1] += 1
        return choice(*a)

    topology._tree_choice = counted_choice
    if plant == "pods left out of the key":
        topology._tree_key = lambda levels, nodes, pods, max_leaves, wide, per_leaf: key(
            levels, nodes, 0, max_leaves, wide, per_leaf)
    elif plant == "max_leaves left out of the key":
        topology._tree_key = lambda levels, nodes, pods, max_leaves, wide, per_leaf: key(
            levels, nodes, pods, None, wide, per_leaf)
    elif plant:
        topology._slurm_tree_leaves = kept_plan
    else:
        topology._slurm_tree_leaves = counted_leaves
    wrong = asked = 0
    try:
        for spec, k, k2, pods, max_leaves in _tree_pairs():
            for kk, p, m in ((k, pods, max_leaves), (k2, pods, max_leaves), (k, pods, None),
                             (k2, max(1, pods - 1), max_leaves), (k, max(1, pods - 1), max_leaves)):
                asked += 1
                wrong += topology.slurm_tree(spec, kk, p, m) != topology.slurm_tree_reference(spec, kk, p, m)
    finally:
        topology._slurm_tree_leaves, topology._tree_key, topology._tree_choice = leaves, key, choice
        topology._TREE_CHOICES.clear()
    if plant is None:  # (and the choices kept were used: fewer loops than questions)
        assert wrong == 0 and 0 < calls[1] < calls[0] // 2, (wrong, calls)
    else:
        assert wrong > 0, (plant, asked)
