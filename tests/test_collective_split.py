"""What a split tensor-parallel group pays, by how it is split (issue 29, the collective model).

A ring all-reduce runs at its slowest hop. A group split over NVLink domains crosses through the NICs
of its GPUs: NCCL's channels enter and leave each node through the NICs of the communicator's GPUs
there, and every rank runs at the channels of the slowest node (NVIDIA/nccl 5067397c ``search.cc``
L724-760, L820-834; ``topo.cc`` L1800; ``init.cc`` L1435-1446; see ``courselib.model.collective``). So
the crossing is ``min over the domains of (the group's GPUs there) x 50 GB/s``, capped at NVLink.
Before this, every split paid one NIC, whether 7+1 or 4+4: the tests marked "(fails on the old
model)" fail on that code (``split_cost`` gave 2.7 for both splits below).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from budget import examples
from courselib.model import collective as cl
from courselib.model import topology
from courselib.model.workload import ClusterSpec

GB = 1e9


def test_the_crossing_is_the_nics_of_the_emptier_side_capped_at_nvlink():
    # by hand: one 400 Gb/s NIC a GPU = 50 GB/s; the side with the fewest GPUs of the group sets the pace
    assert cl.split_link_bps([7, 1]) == 1 * 50 * GB          # one GPU alone across: one NIC
    assert cl.split_link_bps([6, 2]) == 2 * 50 * GB
    assert cl.split_link_bps([4, 4]) == 4 * 50 * GB
    assert cl.split_link_bps([8, 8]) == 8 * 50 * GB == 400 * GB   # two whole HGX nodes: the node egress
    assert cl.split_link_bps([2, 4, 2]) == 2 * 50 * GB       # three nodes: the emptiest of them
    assert cl.split_link_bps([8]) == cl.NVLINK_H100_BPS      # one domain: NVLink, no crossing
    # NVL72 racks (NVLink5, 900 GB/s): 36 + 36 GPUs have 36 x 50 = 1,800 GB/s of NICs a side, more
    # than NVLink; the ring is then NVLink's, 900
    assert cl.split_link_bps([36, 36], nvlink_bps=cl.NVLINK5_BPS) == cl.NVLINK5_BPS
    assert cl.split_link_bps([0, 5, 0]) == cl.NVLINK_H100_BPS
    for bad in ([], [0], [3, -1]):
        with pytest.raises(ValueError):
            cl.split_link_bps(bad)


def test_a_balanced_split_costs_less_than_a_lone_gpu_across():
    """(fails on the old model) TP 8 on 4-GPU nodes as NVLink domains at f = 0.1. By hand:
    7+1 -> one NIC, 50 GB/s, r = 450/50 = 9, a step 0.9 + 0.1 x 9 = 1.8;
    4+4 -> four NICs, 200 GB/s, r = 2.25, a step 0.9 + 0.1 x 2.25 = 1.125;
    6+2 -> 100 GB/s, r = 4.5, 0.9 + 0.45 = 1.35. The old model gave 1.8 for all three."""
    spec = ClusterSpec(4, 8)
    cost = {name: topology.split_cost(spec, placement, 8, 0.1)["slowdown"]
            for name, placement in (("7+1", [(0, 7), (1, 1)]), ("6+2", [(0, 6), (1, 2)]), ("4+4", [(0, 4), (1, 4)]))}
    assert cost["7+1"] == pytest.approx(1.8)
    assert cost["6+2"] == pytest.approx(1.35)
    assert cost["4+4"] == pytest.approx(1.125)


def test_two_whole_nodes_are_about_the_node_egress_not_one_nic():
    """(fails on the old model) Chapter 5's TP 16 on two whole 8-GPU nodes, a 256 MiB all-reduce: the
    ring crosses at 8 x 50 = 400 GB/s (scaling-book: "400GB/s on H100"), so against TP 8 inside a
    node at 450 it takes (2 x 15/16 / 400) / (2 x 7/8 / 450) = 1.2054 times as long, not ~10."""
    msg = 256 * 2 ** 20
    g16, g8 = cl.tp_groups(64, 16)[0], cl.tp_groups(64, 8)[0]
    t16, t8 = cl.group_allreduce_s(g16, 8, msg), cl.group_allreduce_s(g8, 8, msg)
    assert t16 == pytest.approx(2 * 15 / 16 * msg / (400 * GB))
    assert t8 == pytest.approx(2 * 7 / 8 * msg / (450 * GB))
    assert t16 / t8 == pytest.approx((15 / 16 / 400) / (7 / 8 / 450)) == pytest.approx(1.2054, abs=1e-4)
    # the worst TP 8 split, ranks 7-14 (one on node 0, seven on node 1): one NIC, 9 x NVLink's time
    assert cl.group_allreduce_s(list(range(7, 15)), 8, msg) / t8 == pytest.approx(9)


def test_gang_simulate_names_the_nics_of_a_split_group(tmp_path, capsys):
    from courselib.cli.main import main
    path = tmp_path / "w.yaml"
    path.write_text("cluster: {nodes: 2, gpus_per_node: 8, topology: [{level: rack, size: 2}]}\n"
                    "jobs:\n  - {name: a, pods: 1, gpus_per_pod: 6, submit: 0, duration: 1h}\n"
                    "  - {name: x, pods: 4, gpus_per_pod: 2, submit: 60, duration: 1h}\n")
    assert main(["gang", "simulate", str(path), "--policy", "kube-default", "--tp", "8"]) == 0
    out = capsys.readouterr().out
    # x (4 pods of 2) gets node 0's 2 free GPUs and 6 of node 1: 2 NICs, 100 GB/s; 0.9 + 0.1 x 450/100 = 1.35
    assert "TP 8: 1 of 1 groups cross a slow link (450 -> 100 GB/s: 2 NICs x 50 on the emptier side): step x1.35" \
        in out, out


# ---- properties -------------------------------------------------------------------------------------

@st.composite
def splits(draw):
    """GPUs of one TP group per node (each at most the node's GPUs), over 1 to 4 nodes."""
    gpn = draw(st.sampled_from([4, 8]))
    counts = draw(st.lists(st.integers(1, gpn), min_size=1, max_size=4))
    return gpn, counts


def slowdown(gpn: int, counts: list[int], f: float, nvlink_level=None, spec=None) -> float:
    spec = spec or ClusterSpec(len(counts) * 2, gpn)
    return topology.split_cost(spec, [(i, c) for i, c in enumerate(counts)], sum(counts), f,
                               nvlink_level)["slowdown"]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(splits(), st.data(), st.sampled_from([0.05, 0.1, 0.5]))
def test_a_more_balanced_split_never_costs_more_nic_time(case, data, f):
    """Move one GPU of the group from a fuller node to an emptier one (a Robin Hood transfer: every
    more balanced split over the same nodes is reached by such moves). The step never gets slower;
    and when the move lifts the emptiest node and its NICs are still slower than NVLink, it gets
    strictly faster (fails on the old model, which priced every split alike)."""
    gpn, counts = case
    if len(counts) < 2:
        return
    i = data.draw(st.sampled_from(range(len(counts))))
    j = data.draw(st.sampled_from(range(len(counts))))
    if counts[i] < counts[j] + 2:
        return
    moved = list(counts)
    moved[i] -= 1
    moved[j] += 1
    before, after = slowdown(gpn, counts, f), slowdown(gpn, moved, f)
    assert after <= before + 1e-12
    lifted = min(moved) > min(counts)
    if lifted and min(counts) * cl.IB_PER_GPU_BPS < cl.NVLINK_H100_BPS:
        assert after < before
    # the same order in the time of one all-reduce of the group (its NIC-time), 64 MiB: ranks numbered
    # so that rank // gpn is the node
    t = [cl.group_allreduce_s([i * gpn + k for i, c in enumerate(cs) for k in range(c)], gpn, 64 * 2 ** 20)
         for cs in (counts, moved)]
    assert t[1] <= t[0] * (1 + 1e-12)
    if lifted and min(counts) * cl.IB_PER_GPU_BPS < cl.NVLINK_H100_BPS:
        assert t[1] < t[0]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([4, 8]), st.integers(1, 4), st.data(), st.sampled_from([0.0, 0.1, 0.9]))
def test_a_group_within_one_domain_pays_no_crossing(gpn, nodes, data, f):
    """Inside one node, or several nodes of one NVLink block: slowdown 1, and its all-reduce is the
    NVLink ring's, whatever the sizes."""
    counts = [data.draw(st.integers(1, gpn)) for _ in range(nodes)]
    if nodes == 1:
        assert slowdown(gpn, counts, f) == 1.0
    spec = ClusterSpec(8, gpn, topology=(("block", 4),))
    cost = topology.split_cost(spec, [(i, c) for i, c in enumerate(counts)], sum(counts), f, "block")
    assert cost["split"] == 0 and cost["slowdown"] == 1.0 and cost["nics"] is None
    group = list(range(sum(counts)))
    assert cl.group_allreduce_s(group, gpn, 1e6, nvlink_domain=4 * gpn, nvlink_bps=cl.NVLINK5_BPS) == \
        cl.ring_allreduce_s(1e6, len(group), cl.NVLINK5_BPS)
