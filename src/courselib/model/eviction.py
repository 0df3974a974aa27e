"""Node-pressure eviction: what the kubelet does *before* the kernel's OOM killer has to.

When a node's ``memory.available`` falls below an eviction threshold — the hard default is
``memory.available<100Mi`` — the kubelet's eviction manager picks a *pod* and kills it; the pod's
phase becomes ``Failed`` with reason ``Evicted`` (Kubernetes v1.37.2, bibliography ``k8s-v1372-eviction``,
``k8s-docs-node-pressure``). It evicts at most one pod per pass ("we kill at most a single pod
during each eviction interval"), and passes run every 10 s (``evictionMonitoringPeriod``).

The ranking is ``rankMemoryPressure``::

    orderedBy(exceedMemoryRequests(stats), priority, memory(stats)).Sort(pods)

1. pods whose memory usage **exceeds their request** first;
2. then **lower priority** first;
3. then the larger **usage minus request** first.

This is not the OOM killer and not ``OOMKilled``: ``OOMKilled`` is the kernel killing a process at a
*container's* ``memory.max`` (chapter 3), and a pod that is evicted was never OOM-killed. The kernel's
global OOM killer — ordered by ``oom_score_adj`` — acts only if memory runs out faster than the kubelet
reacts. Pods are ranked by usage across all their containers.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cmp_to_key

EVICTED = "Evicted"                    # pkg/kubelet/eviction/helpers.go: Reason = "Evicted"
HARD_MEMORY_AVAILABLE = 100 * 2 ** 20  # DefaultEvictionHard "memory.available": "100Mi"
MONITORING_PERIOD_S = 10.0             # evictionMonitoringPeriod


@dataclass(frozen=True)
class EvictionPod:
    """A pod as the eviction manager sees it: its memory request, current usage and priority."""

    name: str
    request: int        # bytes (the sum of its containers' memory requests; 0 if none)
    usage: int          # bytes (working set)
    priority: int = 0


def under_pressure(memory_available: int, threshold: int = HARD_MEMORY_AVAILABLE) -> bool:
    """Whether the hard eviction signal ``memory.available < threshold`` fires."""
    return memory_available < threshold


def _cmp_bool(a: bool, b: bool) -> int:        # cmpBool: true sorts first
    if a == b:
        return 0
    return -1 if not b else 1


def _compare(p1: EvictionPod, p2: EvictionPod) -> int:
    c = _cmp_bool(p1.usage > p1.request, p2.usage > p2.request)      # exceedMemoryRequests
    if c:
        return c
    if p1.priority != p2.priority:                                    # priority: lower first
        return 1 if p1.priority > p2.priority else -1
    d1, d2 = p1.usage - p1.request, p2.usage - p2.request            # memory: larger above request first
    return (d2 > d1) - (d2 < d1)


def rank_memory_pressure(pods: list[EvictionPod]) -> list[EvictionPod]:
    """The pods in the order the kubelet would evict them under memory pressure (a stable sort, as Go's)."""
    return sorted(pods, key=cmp_to_key(_compare))
