"""Fast paths of the topology placements that the scale rows need (issue 29): each equals its reference."""
from __future__ import annotations

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
    return ClusterSpec(nodes, 4, topology=levels), k, draw(st.integers(1, max(1, sum(k) + 1))), draw(st.booleans())


@settings(max_examples=examples(400), deadline=None)
@given(tree_cases())
def test_slurm_tree_one_leaf_shortcut_equals_the_plugins_loop(case):
    """A job one leaf switch holds is placed at once, as the plugin's loop would place it."""
    spec, k, pods, one_leaf = case
    assert topology.slurm_tree(spec, k, pods, one_leaf) == topology.slurm_tree_reference(spec, k, pods, one_leaf)
