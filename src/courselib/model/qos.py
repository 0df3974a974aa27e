"""Kubernetes QoS classes and the ``oom_score_adj`` the kubelet gives each container.

The QoS class follows from the pod's CPU and memory requests and limits; the kubelet turns it
into an ``oom_score_adj`` for every container, so that under node memory pressure the kernel
kills BestEffort first and Guaranteed last.
Sources: FACTS §2.1 (``pkg/apis/core/v1/helper/qos/qos.go`` GetPodQOS, and the defaulting rule
from the QoS docs page) and §2.2 (``pkg/kubelet/qos/policy.go`` GetContainerOOMScoreAdjust).
"""
from __future__ import annotations

from dataclasses import dataclass, field

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BESTEFFORT = "BestEffort"

KUBELET_OOM_SCORE_ADJ = -999      # FACTS §2.2 KubeletOOMScoreAdj
KUBE_PROXY_OOM_SCORE_ADJ = -999   # FACTS §2.2 KubeProxyOOMScoreAdj
GUARANTEED_OOM_SCORE_ADJ = -997   # FACTS §2.2 guaranteedOOMScoreAdj
BESTEFFORT_OOM_SCORE_ADJ = 1000   # FACTS §2.2 besteffortOOMScoreAdj
SYSTEM_NODE_CRITICAL = "system-node-critical"
QOS_RESOURCES = ("cpu", "memory")  # supportedQoSComputeResources (FACTS §2.1)


@dataclass(frozen=True)
class Container:
    """A container's resources: cpu in millicores, memory in bytes. Only cpu and memory matter."""

    name: str
    requests: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    sidecar: bool = False  # an init container with restartPolicy: Always

    def defaulted(self) -> "Container":
        """The container after API defaulting: a limit without a request gets request = limit.

        FACTS §2.1: "If a Container specifies its own memory limit, but does not specify a memory
        request, Kubernetes automatically assigns a memory request that matches the limit."
        """
        requests = dict(self.requests)
        for name, value in self.limits.items():
            requests.setdefault(name, value)
        return Container(self.name, requests, dict(self.limits), self.sidecar)


@dataclass(frozen=True)
class Pod:
    """What the kubelet needs of a pod to set ``oom_score_adj``."""

    name: str
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...] = ()
    priority_class_name: str | None = None

    def defaulted(self) -> "Pod":
        return Pod(self.name, tuple(c.defaulted() for c in self.containers),
                   tuple(c.defaulted() for c in self.init_containers), self.priority_class_name)


def qos_class(pod: Pod) -> str:
    """``Guaranteed``, ``Burstable`` or ``BestEffort``, as ``GetPodQOS`` computes it (FACTS §2.1).

    BestEffort: no container (init containers included) has a positive cpu or memory request or
    limit. Guaranteed: every container has both a cpu and a memory limit, and the pod's summed
    requests equal its summed limits for both. Anything else: Burstable.
    """
    pod = pod.defaulted()
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for c in pod.containers + pod.init_containers:
        for name in QOS_RESOURCES:
            if c.requests.get(name, 0) > 0:
                requests[name] = requests.get(name, 0) + c.requests[name]
        found = set()
        for name in QOS_RESOURCES:
            if c.limits.get(name, 0) > 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + c.limits[name]
        if found != set(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BESTEFFORT
    if guaranteed and all(limits.get(k) == v for k, v in requests.items()) \
            and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE


def burstable_oom_score_adj(memory_request: int, memory_capacity: int) -> int:
    """``clamp(1000 - 1000*request/capacity, 3, 999)`` with integer division.

    The lower clamp is ``1000 + guaranteedOOMScoreAdj`` = 3 (the docs' 2 is stale, FACTS §7.3);
    an exact 1000 (no memory request) becomes 999 so a Burstable container never ties with
    BestEffort. ``memory_capacity`` is the machine's capacity, not allocatable (FACTS §2.2).
    """
    if memory_capacity <= 0:
        raise ValueError("memory capacity must be positive")
    return _clamp_burstable(1000 - (1000 * memory_request) // memory_capacity)


def container_oom_score_adj(pod: Pod, container: Container, memory_capacity: int) -> int:
    """The ``oom_score_adj`` the kubelet writes for ``container`` of ``pod`` (FACTS §2.2).

    ``system-node-critical`` pods get -997 whatever their QoS (FACTS §7.4; ``system-cluster-critical``
    does not); Guaranteed -997; BestEffort 1000; Burstable from the container's memory request.
    A sidecar never scores above the pod's smallest regular container (the ``min`` in policy.go).
    """
    pod = pod.defaulted()
    if pod.priority_class_name == SYSTEM_NODE_CRITICAL:
        return GUARANTEED_OOM_SCORE_ADJ
    qos = qos_class(pod)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BESTEFFORT:
        return BESTEFFORT_OOM_SCORE_ADJ
    if memory_capacity <= 0:
        raise ValueError("memory capacity must be positive")
    adj = 1000 - (1000 * container.defaulted().requests.get("memory", 0)) // memory_capacity
    if container.sidecar and pod.containers:
        min_regular = min(c.requests.get("memory", 0) for c in pod.containers)
        adj = min(adj, 1000 - (1000 * min_regular) // memory_capacity)
    return _clamp_burstable(adj)  # the clamps come after the sidecar adjustment, as in policy.go


def _clamp_burstable(adj: int) -> int:
    """At least ``1000 + guaranteedOOMScoreAdj`` (= 3); an exact 1000 becomes 999."""
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adj == BESTEFFORT_OOM_SCORE_ADJ:
        return adj - 1
    return adj


@dataclass(frozen=True)
class ContainerAdj:
    name: str
    init: bool
    oom_score_adj: int


def pod_oom_score_adj(pod: Pod, memory_capacity: int) -> tuple[str, tuple[ContainerAdj, ...]]:
    """The pod's QoS class and every container's ``oom_score_adj`` (init containers after)."""
    qos = qos_class(pod)
    rows = [ContainerAdj(c.name, False, container_oom_score_adj(pod, c, memory_capacity))
            for c in pod.containers]
    rows += [ContainerAdj(c.name, True, container_oom_score_adj(pod, c, memory_capacity))
             for c in pod.init_containers]
    return qos, tuple(rows)
