"""Kubernetes QoS classes and the ``oom_score_adj`` the kubelet gives each container.

The QoS class follows from the pod's CPU and memory requests and limits; the kubelet turns it
into an ``oom_score_adj`` for every container, so that under node memory pressure the kernel
kills BestEffort first and Guaranteed last.

The course follows **Kubernetes v1.37.2** (:data:`KUBERNETES_VERSION`): ``ComputePodQOS`` in
``pkg/apis/core/v1/helper/qos/qos.go``, ``GetContainerOOMScoreAdjust`` in
``pkg/kubelet/qos/policy.go`` and ``helpers.go``, the API server's defaulting in
``pkg/apis/core/v1/defaults.go`` ``SetDefaults_Pod`` and ``pkg/api/pod/util.go``
``DefaultPodLevelResources`` (FACTS §2.1, §2.2). What changed across versions is in
:class:`KubeletRules`; ``rules("1.31")`` asks for an older kubelet. Upstream's own test tables
(``qos_test.go``, ``policy_test.go``) run against this module in ``tests/upstream/``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from courselib.versions import pinned

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BESTEFFORT = "BestEffort"

KUBERNETES_VERSION = pinned("kubernetes").version.lstrip("v")  # the version the course describes (versions.toml)
KUBELET_OOM_SCORE_ADJ = -999      # FACTS §2.2 KubeletOOMScoreAdj
KUBE_PROXY_OOM_SCORE_ADJ = -999   # FACTS §2.2 KubeProxyOOMScoreAdj
GUARANTEED_OOM_SCORE_ADJ = -997   # FACTS §2.2 guaranteedOOMScoreAdj
BESTEFFORT_OOM_SCORE_ADJ = 1000   # FACTS §2.2 besteffortOOMScoreAdj
SYSTEM_NODE_CRITICAL = "system-node-critical"
QOS_RESOURCES = ("cpu", "memory")  # supportedQoSComputeResources (FACTS §2.1)


@dataclass(frozen=True)
class KubeletRules:
    """The rules of one Kubernetes version, as feature gates at their defaults.

    - ``sidecar_oom_min`` (v1.32+): a sidecar (an init container with ``restartPolicy: Always``)
      never scores above the pod's smallest regular container (policy.go; absent in v1.31).
    - ``pod_level_resources`` (gate ``PodLevelResources``: alpha, off in v1.32–1.33; beta, on
      since v1.34): a pod's ``spec.resources`` sets its QoS class, and the pod-level memory
      request not given to any container is shared out among them for ``oom_score_adj``.
    - ``pod_level_qos_fix`` (gate ``PodLevelResourcesFixKubeletQOSClass``, beta, on in v1.37):
      empty pod-level resources (``{}``) no longer decide the QoS class (CHANGELOG-1.37, #137150).
    - ``pod_level_defaulting_fix`` (gate ``PodLevelResourcesFixDefaulting``, beta, on in v1.37):
      the API server defaults pod-level requests even without pod-level limits, and pod-level
      limits from the containers' limits (``DefaultPodLevelResources``).

    ``DRANodeAllocatableResources`` (alpha, off in v1.36–v1.37) is not modelled: courselib reads
    no ResourceClaim status. v1.37 computes the class container by container (``requirementsQOS``);
    v1.30–v1.36 summed requests and limits first; for a valid pod (requests ≤ limits) they agree.
    """

    version: str
    sidecar_oom_min: bool
    pod_level_resources: bool
    pod_level_qos_fix: bool
    pod_level_defaulting_fix: bool


def rules(version: str = KUBERNETES_VERSION) -> KubeletRules:
    """The rules of Kubernetes ``version`` (``"1.30"`` … ``"1.37"``, patch releases alike)."""
    try:
        major, minor = (int(p) for p in str(version).lstrip("v").split(".")[:2])
    except ValueError:
        raise ValueError(f"{version!r} is not a Kubernetes version such as 1.37") from None
    if (major, minor) < (1, 30) or (major, minor) > (1, 37):
        raise ValueError(f"the model knows Kubernetes v1.30 to v1.37, not {version}")
    return KubeletRules(str(version).lstrip("v"), sidecar_oom_min=minor >= 32,
                        pod_level_resources=minor >= 34, pod_level_qos_fix=minor >= 37,
                        pod_level_defaulting_fix=minor >= 37)


COURSE_RULES = rules()


@dataclass(frozen=True)
class Resources:
    """A ``resources`` block: cpu in millicores, memory in bytes. Only cpu and memory matter."""

    requests: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    hugepages: frozenset = frozenset()  # names of hugepages-* requests/limits (they count as set)

    @property
    def is_set(self) -> bool:
        """``IsPodLevelResourcesSet``: a cpu, memory or hugepages request or limit is there."""
        return bool(self.hugepages) or any(k in self.requests or k in self.limits for k in QOS_RESOURCES)


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
        (``SetDefaults_Pod``, ``pkg/apis/core/v1/defaults.go`` L170–196 at v1.37.2.)
        """
        requests = dict(self.requests)
        for name, value in self.limits.items():
            requests.setdefault(name, value)
        return Container(self.name, requests, dict(self.limits), self.sidecar)


@dataclass(frozen=True)
class Pod:
    """What the kubelet needs of a pod to set ``oom_score_adj``; ``resources`` is ``spec.resources``."""

    name: str
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...] = ()
    priority_class_name: str | None = None
    resources: Resources | None = None

    def defaulted(self, rules: KubeletRules | None = None) -> "Pod":
        """The pod as the API server stores it (see :func:`api_defaults`)."""
        return api_defaults(self, rules)


def _aggregate(pod: Pod, which: str) -> dict[str, int]:
    """``AggregateContainerRequests``/``Limits`` (component-helpers ``resource/helpers.go``):
    the regular containers and sidecars summed, against the largest init container step."""
    total: dict[str, int] = {}
    for c in pod.containers:
        for k, v in getattr(c, which).items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in pod.init_containers:
        own = getattr(c, which)
        if c.sidecar:
            for k, v in own.items():
                total[k] = total.get(k, 0) + v
                sidecars[k] = sidecars.get(k, 0) + v
            step = dict(sidecars)
        else:
            step = {k: own.get(k, 0) + sidecars.get(k, 0) for k in set(own) | set(sidecars)}
        for k, v in step.items():
            init_max[k] = max(init_max.get(k, v), v)
    for k, v in init_max.items():
        total[k] = max(total.get(k, v), v)
    return total


def api_defaults(pod: Pod, rules: KubeletRules | None = None) -> Pod:
    """The pod after the API server's defaulting, which runs before the kubelet ever sees it.

    Containers: a limit without a request gets request = limit (``SetDefaults_Pod``). Pod-level
    resources (when ``rules.pod_level_resources``): a missing cpu/memory request defaults to the
    containers' aggregated requests, else to the pod-level limit; with
    ``pod_level_defaulting_fix`` (v1.37) this runs whenever requests or limits are set, and a
    missing pod-level limit becomes max(pod request, the containers' aggregated limits) if every
    container has that limit (``DefaultPodLevelResources``, ``pkg/api/pod/util.go`` at v1.37.2);
    before, only pods with pod-level limits were defaulted (``defaultPodRequests``).
    """
    rules = rules or COURSE_RULES
    out = Pod(pod.name, tuple(c.defaulted() for c in pod.containers),
              tuple(c.defaulted() for c in pod.init_containers), pod.priority_class_name,
              pod.resources)
    res = pod.resources
    if res is None or not rules.pod_level_resources:
        return out
    if not (res.limits or (rules.pod_level_defaulting_fix and res.requests)):
        return out
    requests = dict(res.requests)
    aggregated = _aggregate(out, "requests")
    for k in QOS_RESOURCES:
        if k not in requests and k in aggregated:
            requests[k] = aggregated[k]
        if k not in requests and k in res.limits:
            requests[k] = res.limits[k]
    limits = dict(res.limits)
    if rules.pod_level_defaulting_fix:
        everyone = out.containers + out.init_containers
        agg_limits = _aggregate(out, "limits")
        for k in QOS_RESOURCES:
            if k in requests and k not in limits and everyone and all(k in c.limits for c in everyone):
                limits[k] = max(requests[k], agg_limits[k])
    return replace(out, resources=Resources(requests, limits, res.hugepages))


def _requirements_qos(requests: dict[str, int], limits: dict[str, int]) -> str:
    """``requirementsQOS``: cpu and memory each BestEffort (0/0), Guaranteed (equal, > 0) or
    Burstable (unequal); one class for both, else Burstable."""
    classes = set()
    for k in QOS_RESOURCES:
        req, lim = requests.get(k, 0), limits.get(k, 0)
        classes.add(BURSTABLE if req != lim else BESTEFFORT if req == 0 else GUARANTEED)
    return classes.pop() if len(classes) == 1 else BURSTABLE


def qos_class(pod: Pod, rules: KubeletRules | None = None, *, defaulting: bool = True) -> str:
    """``Guaranteed``, ``Burstable`` or ``BestEffort``, as ``ComputePodQOS`` computes it (FACTS §2.1).

    With pod-level resources set, they alone decide. Otherwise each container (init containers
    included) is BestEffort (no cpu/memory request or limit), Guaranteed (cpu and memory requests
    equal their limits) or Burstable; the pod is Guaranteed or BestEffort only if every container
    is, else Burstable. ``defaulting=False`` classifies the pod as given, as upstream's unit tests
    call the function; by default it is first defaulted as the API server does (:func:`api_defaults`).
    """
    rules = rules or COURSE_RULES
    if defaulting:
        pod = api_defaults(pod, rules)
    res = pod.resources
    if rules.pod_level_resources and res is not None and (not rules.pod_level_qos_fix or res.is_set):
        return _requirements_qos(res.requests, res.limits)
    classes = {_requirements_qos(c.requests, c.limits) for c in pod.init_containers + pod.containers}
    if not classes:
        return BESTEFFORT
    return classes.pop() if len(classes) == 1 else BURSTABLE


def burstable_oom_score_adj(memory_request: int, memory_capacity: int) -> int:
    """``clamp(1000 - 1000*request/capacity, 3, 999)`` with integer division.

    The lower clamp is ``1000 + guaranteedOOMScoreAdj`` = 3 (the docs' 2 is stale, FACTS §7.3);
    an exact 1000 (no memory request) becomes 999 so a Burstable container never ties with
    BestEffort. ``memory_capacity`` is the machine's capacity, not allocatable (FACTS §2.2).
    """
    if memory_capacity <= 0:
        raise ValueError("memory capacity must be positive")
    return _clamp_burstable(1000 - (1000 * memory_request) // memory_capacity)


def _remaining_pod_memory_per_container(pod: Pod) -> int:
    """``remainingPodMemReqPerContainer`` (helpers.go): the pod-level memory request no container
    asked for, shared equally among all containers, init containers included."""
    want = pod.resources.requests.get("memory", 0) if pod.resources else 0
    if not want:
        return 0
    left = max(want - _aggregate(pod, "requests").get("memory", 0), 0)
    return left // (len(pod.containers) + len(pod.init_containers))


def container_oom_score_adj(pod: Pod, container: Container, memory_capacity: int,
                            rules: KubeletRules | None = None, *, defaulting: bool = True) -> int:
    """The ``oom_score_adj`` the kubelet writes for ``container`` of ``pod`` (FACTS §2.2).

    ``system-node-critical`` pods get -997 whatever their QoS (FACTS §7.4; ``system-cluster-critical``
    does not); Guaranteed -997; BestEffort 1000; Burstable from the container's memory request,
    plus its share of an unclaimed pod-level request (v1.34+). A sidecar never scores above the
    pod's smallest regular container (the ``min`` in policy.go, v1.32+). Clamped to [3, 999].
    """
    rules = rules or COURSE_RULES
    if defaulting:
        index = _index_of(pod, container)
        pod = api_defaults(pod, rules)
        container = (pod.containers + pod.init_containers)[index] if index is not None \
            else container.defaulted()
    if pod.priority_class_name == SYSTEM_NODE_CRITICAL:
        return GUARANTEED_OOM_SCORE_ADJ
    qos = qos_class(pod, rules, defaulting=False)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BESTEFFORT:
        return BESTEFFORT_OOM_SCORE_ADJ
    if memory_capacity <= 0:
        raise ValueError("memory capacity must be positive")
    share = 0
    if rules.pod_level_resources and pod.resources is not None and "memory" in pod.resources.requests:
        share = _remaining_pod_memory_per_container(pod)
    adj = 1000 - (1000 * (container.requests.get("memory", 0) + share)) // memory_capacity
    if rules.sidecar_oom_min and container.sidecar and pod.containers:
        min_regular = min(c.requests.get("memory", 0) for c in pod.containers) + share
        adj = min(adj, 1000 - (1000 * min_regular) // memory_capacity)
    return _clamp_burstable(adj)  # the clamps come after the sidecar adjustment, as in policy.go


def _index_of(pod: Pod, container: Container) -> int | None:
    for i, c in enumerate(pod.containers + pod.init_containers):
        if c is container:
            return i
    for i, c in enumerate(pod.containers + pod.init_containers):
        if c == container:
            return i
    return None


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


def pod_oom_score_adj(pod: Pod, memory_capacity: int, rules: KubeletRules | None = None, *,
                      defaulting: bool = True) -> tuple[str, tuple[ContainerAdj, ...]]:
    """The pod's QoS class and every container's ``oom_score_adj`` (init containers after)."""
    qos = qos_class(pod, rules, defaulting=defaulting)
    rows = [ContainerAdj(c.name, False, container_oom_score_adj(pod, c, memory_capacity, rules,
                                                                defaulting=defaulting))
            for c in pod.containers]
    rows += [ContainerAdj(c.name, True, container_oom_score_adj(pod, c, memory_capacity, rules,
                                                               defaulting=defaulting))
             for c in pod.init_containers]
    return qos, tuple(rows)
