"""The topology set-up of the local control plane: fake nodes labelled by topology level.

A workload's cluster may have a topology (``cluster.topology``: levels outermost first, each
``size`` consecutive nodes; :mod:`courselib.model.topology`). On the control plane that replays it
(``KubeShape.topology``, ``courselib kube up --topology rack:8,block:4``), every fake node carries
**one label per level**, as a real cluster's nodes carry their rack and block (GKE's
``cloud.google.com/gce-topology-block``, Kueue's examples' ``cloud.provider.com/topology-rack``),
plus ``kubernetes.io/hostname`` for the node itself:

    courselib/topology-rack=rack0  courselib/topology-block=block1  kubernetes.io/hostname=node5

The values are the model's domain names (``rack0``, ``block1``: the level's name and the domain's
index over the whole cluster, :func:`courselib.model.topology.domains_spanned`), so a label value
read back from a real node is a domain the model names, and label values sort as the model ranks
them (Kueue compares them as strings). Every node also carries ``nvidia.com/gpu.present=true``,
the label NVIDIA's GPU feature discovery puts on a GPU node: a topology-aware ResourceFlavor must
select nodes by at least one label (Kueue v0.17.1 ``apis/kueue/v1beta2/resourceflavor_types.go``
L48: "at least one nodeLabel is required when topology is set").

What each scheduler makes of the labels is its own extension's business: Kueue's ``Topology``
object lists them as its levels (:func:`kueue_topology`, used by :mod:`courselib.live.kube.kueue`);
kube-scheduler's topology-aware PodGroup scheduling names one of them as its key
(:func:`level_label`; with ``--gang`` the core turns TopologyAwareWorkloadScheduling on and this
extension's replay hook puts the key on each PodGroup, :class:`PodGroupTopology`). This extension
labels the nodes: it starts no daemon, needs no feature gate of its own, and joins any shape that
has a topology by itself (:meth:`Topology.implied_by`).
"""
from __future__ import annotations

import re

from courselib.errors import InputError
from courselib.live.kube.extension import Extension, ReplayHooks, register

#: One label per topology level: ``courselib/topology-<level>``.
LABEL_PREFIX = "courselib/topology-"
HOSTNAME = "kubernetes.io/hostname"
#: The label every node of a topology carries, which a topology-aware ResourceFlavor selects.
GPU_NODE_LABEL = ("nvidia.com/gpu.present", "true")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,40}[A-Za-z0-9])?")


def level_label(level: str) -> str:
    """The node label of topology level ``level`` (a one-line error for a name no label can hold)."""
    if not _NAME.fullmatch(level):
        raise InputError(f"topology level {level!r}: a node label needs letters, digits, - _ . "
                         "(at most 42, starting and ending with a letter or digit)", field="topology")
    return LABEL_PREFIX + level


def node_domains(topology, k: int) -> dict[str, str]:
    """Node ``k`` (1-based)'s domain at each level: ``{"rack": "rack0", "block": "block1"}``."""
    return {level: f"{level}{(k - 1) // size}" for level, size in topology}


def node_labels(topology, k: int) -> dict[str, str]:
    """The labels node ``k`` carries for ``topology`` (empty without one)."""
    if not topology:
        return {}
    out = {level_label(level): value for level, value in node_domains(topology, k).items()}
    out[GPU_NODE_LABEL[0]] = GPU_NODE_LABEL[1]
    return out


def levels(topology) -> list[str]:
    """The node labels of ``topology``'s levels, outermost first, ``kubernetes.io/hostname`` last
    (the node: the innermost level of every topology, as the model's :func:`level_sizes`)."""
    return [level_label(level) for level, _ in topology] + [HOSTNAME]


def kueue_topology(name: str, topology, labels: dict | None = None) -> dict:
    """Kueue's ``Topology`` object (``kueue.x-k8s.io/v1beta2``) whose levels are the node labels
    (v0.17.1 ``apis/kueue/v1beta2/topology_types.go`` L108–L134: ``spec.levels[].nodeLabel``,
    outermost first, ``kubernetes.io/hostname`` only as the lowest)."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": name, **({"labels": labels} if labels else {})},
            "spec": {"levels": [{"nodeLabel": label} for label in levels(topology)]}}


def domains_of_nodes(topology, nodes) -> dict[str, list[str]]:
    """Per level, the domains that the nodes named ``nodes`` (``node5``, …) are in, in order."""
    ks = sorted(int(n[4:]) for n in nodes if n.startswith("node") and n[4:].isdigit())
    out: dict[str, list[str]] = {}
    for level, size in topology:
        out[level] = [f"{level}{d}" for d in sorted({(k - 1) // size for k in ks})]
    return out


class PodGroupTopology(ReplayHooks):
    """With native gang scheduling (and so TopologyAwareWorkloadScheduling, ``KubeShape.core_gates``):
    a job that *requires* a level gets ``schedulingConstraints.topology: [{key: <its label>}]`` on its
    PodGroup — "all pods within the PodGroup must be colocated within the same domain instance"
    (``k8s.io/api`` v0.37.2 ``scheduling/v1beta1/types.go`` L633–643, L833–857: at most one
    constraint, only with the gate). A *preferred* level has no PodGroup form: no constraint."""

    def pod_group(self, job, body: dict) -> dict:
        if job.topology and job.topology[0] == "required":
            body["spec"]["schedulingConstraints"] = {"topology": [{"key": level_label(job.topology[1])}]}
        return body


@register
class Topology(Extension):
    name = "topology"
    title = "topology labels"
    version = ""

    def implied_by(self, shape) -> bool:
        return bool(getattr(shape, "topology", ()))

    def node_labels(self, shape, k: int) -> dict[str, str]:
        return node_labels(getattr(shape, "topology", ()), k)

    def replay(self, run):
        shape = run.plan.shape
        return PodGroupTopology(run) if shape.gang and shape.topology else None
