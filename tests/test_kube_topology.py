"""The topology set-up of the local control plane (no control plane needed): fake nodes labelled by
level, the shape that carries the topology, and Kueue's Topology object built from the labels."""
from __future__ import annotations

import pytest

from courselib.errors import InputError
from courselib.io.workload import load_workload
from courselib.live import kube
from courselib.live.kube import cluster, topology
from courselib.live.kube.plan import plan_replay
from courselib.model import topology as model_topology

FRAG = "examples/topology/fragmentation.yaml"


def test_every_node_carries_its_domain_at_each_level_and_its_hostname():
    shape = kube.KubeShape(nodes=16, gpus_per_node=4, topology=(("rack", 8), ("block", 4)))
    spec = load_workload(FRAG).cluster
    for k in range(1, 17):
        labels = cluster.node_body(shape, k)["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == f"node{k}"
        assert labels["nvidia.com/gpu.present"] == "true"
        # the values are the model's own domain names
        for level in ("rack", "block"):
            assert [labels[f"courselib/topology-{level}"]] == \
                model_topology.domains_spanned(spec, [k - 1], level)
    assert cluster.node_body(shape, 9)["metadata"]["labels"]["courselib/topology-rack"] == "rack1"
    assert cluster.node_body(shape, 8)["metadata"]["labels"]["courselib/topology-block"] == "block1"


def test_a_shape_without_topology_labels_nothing_more():
    labels = cluster.node_body(kube.KubeShape(nodes=4), 2)["metadata"]["labels"]
    assert not any(k.startswith(topology.LABEL_PREFIX) for k in labels)
    assert "nvidia.com/gpu.present" not in labels
    assert [e.name for e in kube.KubeShape(nodes=4).extensions()] == []


def test_the_replay_shape_carries_the_workload_topology_and_implies_the_set_up():
    plan = plan_replay(load_workload(FRAG), policy="kueue")
    assert plan.shape.topology == (("rack", 8), ("block", 4))
    assert [e.name for e in plan.shape.extensions()] == ["kueue", "topology"]
    flat = kube.KubeShape(nodes=16, gpus_per_node=4, with_=("kueue",))
    assert not flat.same_nodes(plan.shape)      # a replay reshapes (and relabels) the nodes
    assert "--topology rack:8,block:4" in plan.shape.cli_args()
    assert kube.KubeShape.from_json(plan.shape.to_json()) == plan.shape


def test_kueue_topology_levels_are_the_node_labels_with_the_hostname_lowest():
    obj = topology.kueue_topology("default", (("spine", 16), ("rack", 8), ("block", 4)))
    assert [lv["nodeLabel"] for lv in obj["spec"]["levels"]] == [
        "courselib/topology-spine", "courselib/topology-rack", "courselib/topology-block",
        "kubernetes.io/hostname"]
    assert topology.domains_of_nodes((("rack", 8), ("block", 4)), ["node9", "node3", "node4"]) == \
        {"rack": ["rack0", "rack1"], "block": ["block0", "block2"]}


@pytest.mark.parametrize("text, what", [("rack:5", "does not divide"), ("rack", "LEVEL:SIZE"),
                                        ("rack:8,rack:4", "named twice"), ("rack:0", "at least 1")])
def test_a_bad_topology_is_one_located_line(text, what):
    with pytest.raises(InputError) as err:
        kube.KubeShape(nodes=16, topology=kube.parse_topology(text))
    assert what in str(err.value) and "--topology" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_level_name_no_label_can_hold_is_refused():
    with pytest.raises(InputError, match="node label"):
        topology.level_label("rack/1")
