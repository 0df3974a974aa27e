"""Volcano v1.15.1's network topology, hard and soft (issue 29), on hand-sized cases and as properties.

Soft mode is hard mode up to the cluster top (``session.go`` L1081–1103): the lowest tier whose
HyperNode holds the job wins, and a job no real HyperNode holds spans the cluster, its tasks kept
close by the network-topology-aware node score (the lowest common ancestor's tier, then the share of
the job's tasks already in a tier-1 HyperNode). The fast path (a node keeps every task it has room
for; the search climbs from the allocated HyperNode) equals the literal task-by-task reference.
"""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from budget import examples
from courselib.io.workload import parse_workload
from courselib.io.yamlfile import load_all_text
from courselib.model import topology
from courselib.model.workload import ClusterSpec
from courselib.sim.gang import simulate

#: 8 nodes x 4 GPUs: racks of 4 nodes, blocks of 2
SMALL = ClusterSpec(8, 4, topology=(("rack", 4), ("block", 2)))


def place(spec, free, pods, gpp, mode, level, reference=False):
    k = [f // gpp for f in free]
    return topology.volcano_hypernode(spec, k, pods, level, free, gpp, mode=mode, reference=reference)


def test_soft_is_hard_up_to_the_cluster_top():
    assert topology.volcano_tier_sizes(SMALL) == [2, 4, 8]
    assert topology.volcano_highest_tier(SMALL, "hard", "block") == 1
    assert topology.volcano_highest_tier(SMALL, "hard", "rack") == 2
    assert topology.volcano_highest_tier(SMALL, "soft", "block") == 3   # the level written is ignored


def test_soft_takes_the_lowest_tier_that_holds_the_job_and_there_the_fullest_hypernode():
    """A 3-GPU job of 1-GPU tasks: blocks hold it (tier 1), so it lands in one block even though it
    asked only for a preferred rack; of the blocks that hold it the fullest after placing it."""
    free = [4, 4, 2, 1, 4, 0, 4, 4]        # block1 (nodes 2-3) has 3 free: used 5 of 8, the fullest
    plan, n = place(SMALL, free, 3, 1, "soft", "rack")
    assert n == 3 and sorted(plan) == [(2, 2), (3, 1)]
    assert topology.domains_spanned(SMALL, [i for i, _ in plan], "block") == ["block1"]


def test_soft_spans_the_cluster_only_when_no_rack_holds_it_and_keeps_tasks_close():
    """18 one-GPU tasks; rack0 has 13 free GPUs, rack1 8: no rack holds them, hard mode (required
    rack) waits, soft mode spans. First task on the fullest node (node 0), then its block, then its
    rack, then the other rack: a plain fullest-first fill would jump to rack1's fuller nodes after
    node 0."""
    free = [1, 4, 4, 4, 2, 2, 2, 2]
    plan, fit = place(SMALL, free, 18, 1, "hard", "rack")
    assert plan is None and fit == 13
    plan, _ = place(SMALL, free, 18, 1, "soft", "rack")
    assert plan == [(0, 1), (1, 4), (2, 4), (3, 4), (4, 2), (5, 2), (6, 1)]
    assert plan == place(SMALL, free, 18, 1, "soft", "rack", reference=True)[0]
    fullest_first = topology.fill(range(8), free, 18, key=lambda i: (free[i], i))
    assert fullest_first[:2] == [(0, 1), (4, 2)]   # what the node score prevents


def test_within_a_rack_the_tasks_stay_in_the_block_of_the_first():
    """Hard at rack level, 5 one-GPU tasks on a full rack1: no block holds 5 (block0 holds 4,
    block1 3), rack0 does. The first task goes to the fullest node (node 1, in block0); the rest
    fill block0 (node 0) before block1, although node 3 is fuller than node 0."""
    free = [3, 1, 2, 1, 0, 0, 0, 0]
    plan, _ = place(SMALL, free, 5, 1, "hard", "rack")
    assert plan == [(1, 1), (0, 3), (3, 1)]
    assert topology.fill(range(4), free, 5, key=lambda i: (free[i], i)) == [(1, 1), (3, 1), (2, 2), (0, 1)]
    assert plan == place(SMALL, free, 5, 1, "hard", "rack", reference=True)[0]


def test_the_hypernode_score_counts_every_task_and_zero_when_they_overflow():
    """Bin packing over the HyperNode: (used + request) / allocatable with request every task of
    the job (network_topology_aware.go L384-437), 0 when that overflows the HyperNode."""
    free = [4, 4, 2, 2, 4, 4, 4, 4]    # block1: used 4 of 8; block0: 0 of 8
    plan, _ = place(SMALL, free, 2, 1, "hard", "block")
    assert {i for i, _ in plan} <= {2, 3}                        # the fuller block
    k = [f for f in free]
    plan, _ = topology.volcano_hypernode(SMALL, k, 2, "block", free, 1, mode="hard", all_pods=6)
    assert {i for i, _ in plan} <= {0, 1}                        # 4 + 6 > 8 scores 0 in block1


@st.composite
def cases(draw):
    levels = draw(st.sampled_from([(("rack", 4), ("block", 2)), (("block", 2),), (("rack", 8), ("block", 4)),
                                   (("spine", 8), ("rack", 4), ("block", 2))]))
    nodes = levels[0][1] * draw(st.integers(1, 3))
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    gpp = draw(st.integers(1, gpn))
    free = draw(st.lists(st.integers(0, gpn), min_size=nodes, max_size=nodes))
    k = [f // gpp for f in free]
    pods = draw(st.integers(1, max(1, sum(k) + 1)))
    names = [n for n, _ in levels]
    return ClusterSpec(nodes, gpn, topology=levels), free, k, pods, gpp, draw(st.sampled_from(names)), \
        draw(st.sampled_from(["hard", "soft"]))


@settings(max_examples=examples(400), deadline=None)
@given(cases())
def test_fast_equals_reference_and_soft_spans_a_level_only_when_no_domain_of_it_holds_the_job(case):
    spec, free, k, pods, gpp, level, mode = case
    fast = topology.volcano_hypernode(spec, k, pods, level, free, gpp, mode=mode)
    ref = topology.volcano_hypernode(spec, k, pods, level, free, gpp, mode=mode, reference=True)
    assert fast == ref
    plan, _ = fast
    if plan is None:
        assert mode == "hard" or sum(k) < pods
        return
    assert sum(n for _, n in plan) == pods and all(0 < n <= k[i] for i, n in plan)
    nodes = [i for i, _ in plan]
    for name in spec.levels:   # a level some domain of which holds the job is never spanned
        if any(sum(k[i] for i in r) >= pods for r in topology.domains_of(spec, name)):
            assert len(topology.domains_spanned(spec, nodes, name)) == 1, (name, plan)
    if mode == "hard":
        assert len(topology.domains_spanned(spec, nodes, level)) == 1


SOFT = """\
cluster:
  nodes: 16
  gpus_per_node: 4
  topology: [{level: rack, size: 8}, {level: block, size: 4}]
jobs:
  - {name: a, pods: 5, gpus_per_pod: 4, submit: 0, duration: 2h, topology: {required: rack}}
  - {name: b, pods: 5, gpus_per_pod: 4, submit: 0, duration: 2h, topology: {required: rack}}
  - {name: x, pods: 6, gpus_per_pod: 4, submit: 60, duration: 1h, topology: {MODE: rack}}
"""


def test_in_a_simulation_the_soft_job_spans_at_once_and_the_hard_one_waits_for_a_rack():
    """a and b leave 3 free nodes in each rack: x as soft (preferred) starts at once over both
    racks, 3 nodes in each; as hard (required) it waits 2 h for a whole rack."""
    runs = {}
    for mode in ("preferred", "required"):
        text = SOFT.replace("MODE", mode)
        w = parse_workload(load_all_text(text, file="w.yaml")[0], file="w.yaml")
        runs[mode] = r = simulate(w, "volcano", check=True)
        assert r.job("a").domains["rack"] == ["rack0"] and r.job("b").domains["rack"] == ["rack1"]
        assert simulate(w, "volcano", reference=True).jobs == r.jobs
    soft, hard = runs["preferred"].job("x"), runs["required"].job("x")
    assert soft.start == 60 and soft.domains["rack"] == ["rack0", "rack1"] and soft.topology_note is None
    assert sorted(n for n, _ in soft.placement) == [5, 6, 7, 13, 14, 15]
    assert hard.start == 7200 and len(hard.domains["rack"]) == 1

