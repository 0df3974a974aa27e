"""Clusters and gang workloads: what the mini gang scheduler is asked to place.

Public API (stable; the Slurm replay of issue 7 builds on it):

- :class:`Job` — one training job, a gang of ``pods`` ranks with ``gpus_per_pod`` GPUs each.
  ``Job(name, pods, gpus_per_pod, submit=0.0, duration, min_member=None, priority=0,
  queue="default", constraint=None, exclusive=False, time_limit=None, memory_per_pod=0)``.
  Times are seconds; ``duration`` is required (the training time once every rank is placed);
  ``min_member`` defaults to ``pods`` (Volcano's PodGroup ``minMember``: the job trains only
  when that many ranks are placed — the NCCL init barrier, FACTS §4.1); ``time_limit`` is
  Slurm's ``--time`` (backfill plans with ``time_limit`` or, if absent, ``duration``);
  ``constraint`` is a Slurm ``--constraint`` expression over node features (``nvlink``,
  ``a&b``, ``a|b``, matching-OR ``[a|b]``); ``exclusive`` is ``--exclusive`` (whole nodes).
  For Slurm a pod is a task: ``-n pods --gpus-per-task=gpus_per_pod``.
- :class:`ClusterSpec` — ``ClusterSpec(nodes, gpus_per_node, memory_per_node=0, features=(),
  island_size=0, topology=())``: ``nodes`` identical nodes named ``node1 … nodeN`` (Slurm style), each
  with ``gpus_per_node`` GPUs. ``features`` is either a tuple of feature names carried by
  every node or, per node, a tuple of frozensets (see :meth:`ClusterSpec.with_features`).
  ``island_size`` groups consecutive nodes into NVLink islands / topology blocks; node ``i``
  of island ``k`` also carries the feature ``island{k}``. ``memory_per_node`` 0 = not modelled.
  ``topology`` is a tree of levels, outermost first, each ``(level, size)``: ``size`` consecutive
  nodes form one domain of that level (``(("rack", 8), ("block", 4))``: nodes 0-7 are ``rack0``,
  nodes 0-3 ``block0``); each size divides the cluster and the size of the level above it. The
  node itself is the innermost domain (Kueue's ``kubernetes.io/hostname`` level). See
  :mod:`courselib.model.topology` for how each policy places a gang on it.
- A job's topology request (``required`` or ``preferred``, a level's name): ``required`` = every
  pod in one domain of that level or none placed; ``preferred`` = as few domains of that level as
  the scheduler's algorithm manages, spanning if it must (Kueue's
  ``kueue.x-k8s.io/podset-required-topology`` / ``…-preferred-topology``). A required request may
  allow ``max_domains`` domains (default 1) and give the longest ``topology_wait`` (seconds) to wait
  for them: Slurm's ``--switches=N@wait`` at the innermost level under ``topology/tree`` (after the
  wait, Slurm takes what its tree gives). No other scheduler counts domains: they require one
  (lint W003).
- Slurm on a topology: ``ClusterSpec.slurm_topology`` is ``tree`` (``topology/tree``: a switch per
  domain, the innermost level's switches are the leaves) or ``block`` (``topology/block``: the
  innermost level's domains are the base blocks, ``block_sizes`` the BlockSizes, by default the
  levels' sizes that are the base times a power of two); ``Job.segment`` is ``--segment=N`` (nodes
  per segment, block only). See :func:`courselib.model.topology.slurm_block`.
- :class:`Queue` — a Kueue ClusterQueue / Volcano queue: ``nominal_quota`` in GPUs (None =
  the whole cluster), ``cohort``, ``borrowing_limit``, ``lending_limit`` (FACTS §3.2).
- :class:`Workload` — ``Workload(cluster, jobs, queues=(), events=())``.
- Events that happen to running jobs (``events``): :class:`Preempt` — at ``at`` a higher-priority
  job (``by``, one of ``jobs``, submitted at ``at`` with ``preemption_policy`` PreemptLowerPriority)
  arrives that only fits by taking GPUs from ``job``; which pods go is the scheduler's choice — and
  :class:`Fail` — at ``at`` pod ``pod`` of ``job`` fails (its container exits non-zero).
- A job's ``kind``: ``job`` (a ``batch/v1`` Job) or ``jobset`` (a JobSet of one replicated Job:
  ``max_restarts`` is its ``failurePolicy.maxRestarts``, restart strategy Recreate; ``None``: no
  failure policy, so the first failed child Job fails the JobSet — see :mod:`courselib.model.jobset`).
  ``disruption_mode`` ``all`` is a v1.37 PodGroup's ``spec.disruptionMode: {all: {}}`` (kube-gang):
  the scheduler preempts the whole group or none of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

JOB_KINDS = ("job", "jobset")
TOPOLOGY_MODES = ("required", "preferred")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
DISRUPTION_MODES = ("single", "all")


def topology_problem(nodes: int, topology) -> str | None:
    """What is wrong with a topology ``((level, size), ...)`` on ``nodes`` nodes, or None.

    A tree: every size at least 1, every level named once, every size divides the cluster's node
    count and the size of the level above it (a domain never straddles two parent domains)."""
    seen: set[str] = set()
    above = nodes
    for level, size in topology:
        if not level:
            return "a topology level needs a name"
        if level in seen:
            return f"topology level {level!r} is named twice"
        seen.add(level)
        if size < 1:
            return f"topology level {level!r}: size must be at least 1 node, got {size}"
        if nodes % size:
            return f"topology level {level!r}: size {size} does not divide the cluster's {nodes} nodes"
        if above % size:
            return f"topology level {level!r}: size {size} does not divide the level above it ({above} nodes)"
        above = size
    return None


SLURM_TOPOLOGIES = ("tree", "block")


def slurm_topology_problem(nodes: int, topology, plugin: str, block_sizes) -> str | None:
    """What is wrong with Slurm's plugin choice on a topology, or None. ``block``: the innermost
    level's domains are the base blocks (``BlockName``); every BlockSizes value is the base size
    times a power of two (``block_record.c`` L117-135), the smallest is the base size."""
    if plugin not in SLURM_TOPOLOGIES:
        return f"slurm_topology {plugin!r}: write tree or block"
    if block_sizes and plugin != "block":
        return "block_sizes needs slurm_topology: block"
    if plugin == "block" and not topology:
        return "slurm_topology: block needs cluster.topology (its innermost level is the base block)"
    if block_sizes:
        base = topology[-1][1]
        if min(block_sizes) != base:
            return f"block_sizes {list(block_sizes)}: the smallest must be the base block, {base} nodes"
        for b in block_sizes:
            ratio = b // base
            if b % base or ratio & (ratio - 1) or b > nodes:
                return (f"block_sizes: {b} is not the base block ({base} nodes) times a power of two "
                        f"within the cluster's {nodes} nodes")
    return None


@dataclass(frozen=True)
class Node:
    """One machine: its GPUs, memory (bytes; 0 = not modelled), feature labels and island."""

    index: int
    name: str
    gpus: int
    memory: int = 0
    features: frozenset = frozenset()
    island: int | None = None


@dataclass(frozen=True)
class ClusterSpec:
    """A homogeneous cluster of ``nodes`` × ``gpus_per_node`` GPUs, with optional labels."""

    nodes: int
    gpus_per_node: int
    memory_per_node: int = 0
    features: tuple = ()
    island_size: int = 0
    topology: tuple = ()   # ((level, size), ...), outermost first
    slurm_topology: str = "tree"   # Slurm's TopologyPlugin on this tree: topology/tree or topology/block
    block_sizes: tuple = ()        # topology/block's BlockSizes in nodes (): the levels' sizes

    def __post_init__(self):
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("a cluster needs at least one node with at least one GPU")
        if self.island_size < 0:
            raise ValueError("island_size must be >= 0")
        topo = tuple((str(level), int(size)) for level, size in self.topology)
        problem = topology_problem(self.nodes, topo)
        if problem:
            raise ValueError(problem)
        object.__setattr__(self, "topology", topo)
        object.__setattr__(self, "block_sizes", tuple(int(b) for b in self.block_sizes))
        problem = slurm_topology_problem(self.nodes, topo, self.slurm_topology, self.block_sizes)
        if problem:
            raise ValueError(problem)
        feats = tuple(self.features)
        if feats and all(isinstance(f, str) for f in feats):
            feats = tuple(frozenset(feats) for _ in range(self.nodes))
        elif feats:
            if len(feats) != self.nodes:
                raise ValueError(f"per-node features: expected {self.nodes} entries, got {len(feats)}")
            feats = tuple(frozenset(f) for f in feats)
        object.__setattr__(self, "features", feats)

    @classmethod
    def with_features(cls, nodes: int, gpus_per_node: int, by_feature: dict[str, range | list[int]],
                      **kw) -> "ClusterSpec":
        """A cluster where feature ``f`` is carried by the 0-based node indexes ``by_feature[f]``."""
        per = [set() for _ in range(nodes)]
        for feat, idxs in by_feature.items():
            for i in idxs:
                per[i].add(feat)
        return cls(nodes, gpus_per_node, features=tuple(frozenset(p) for p in per), **kw)

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def levels(self) -> tuple[str, ...]:
        """The topology's level names, outermost first (empty: a flat cluster)."""
        return tuple(level for level, _ in self.topology)

    def level_size(self, level: str) -> int:
        """Nodes in one domain of ``level`` (a KeyError for a level the topology lacks)."""
        for name, size in self.topology:
            if name == level:
                return size
        raise KeyError(level)

    def domain_of(self, i: int, level: str) -> str:
        """The name of the domain of ``level`` that node ``i`` (0-based) is in: ``rack0``, ``rack1``…"""
        return f"{level}{i // self.level_size(level)}"

    def island_of(self, i: int) -> int | None:
        return i // self.island_size if self.island_size else None

    def node_list(self) -> tuple[Node, ...]:
        out = []
        for i in range(self.nodes):
            feats = set(self.features[i]) if self.features else set()
            island = self.island_of(i)
            if island is not None:
                feats.add(f"island{island}")
            out.append(Node(i, f"node{i + 1}", self.gpus_per_node, self.memory_per_node,
                            frozenset(feats), island))
        return tuple(out)


@dataclass(frozen=True)
class Job:
    """A gang of ``pods`` ranks; it trains for ``duration`` seconds once ``min_member`` are placed."""

    name: str
    pods: int
    gpus_per_pod: int
    submit: float = 0.0
    duration: float | None = None
    min_member: int | None = None
    priority: int = 0
    queue: str = "default"
    constraint: str | None = None
    exclusive: bool = False
    time_limit: float | None = None
    memory_per_pod: int = 0
    kind: str = "job"                       # "job" (batch/v1 Job) or "jobset" (JobSet)
    max_restarts: int | None = None         # JobSet failurePolicy.maxRestarts (None: no policy)
    preemption_policy: str | None = None    # PriorityClass preemptionPolicy; None: the policy's
    disruption_mode: str = "single"         # v1.37 PodGroup disruptionMode: single or all
    topology: tuple | None = None           # (mode, level): ("required", "rack") / ("preferred", …)
    segment: int | None = None              # Slurm's --segment=N (nodes), under topology/block
    max_domains: int | None = None          # required: at most N domains (Slurm's --switches=N)
    topology_wait: float | None = None      # required: the longest wait for them (--switches=N@wait)

    def __post_init__(self):
        if self.topology is not None:
            mode, level = self.topology
            if mode not in TOPOLOGY_MODES or not level:
                raise ValueError(f"job {self.name!r}: topology is (required|preferred, level)")
            object.__setattr__(self, "topology", (str(mode), str(level)))
        if self.segment is not None and self.segment < 1:
            raise ValueError(f"job {self.name!r}: segment must be at least 1 node")
        if (self.max_domains is not None or self.topology_wait is not None) and (
                self.topology is None or self.topology[0] != "required"):
            raise ValueError(f"job {self.name!r}: max_domains and topology_wait go with a required topology")
        if self.max_domains is not None and self.max_domains < 1:
            raise ValueError(f"job {self.name!r}: max_domains must be at least 1")
        if self.topology_wait is not None and self.topology_wait < 0:
            raise ValueError(f"job {self.name!r}: topology_wait must be 0 or more seconds")
        if self.kind not in JOB_KINDS:
            raise ValueError(f"job {self.name!r}: kind must be one of {', '.join(JOB_KINDS)}")
        if self.max_restarts is not None and (self.kind != "jobset" or self.max_restarts < 0):
            raise ValueError(f"job {self.name!r}: max_restarts (>= 0) needs kind jobset")
        if self.preemption_policy not in (None,) + PREEMPTION_POLICIES:
            raise ValueError(f"job {self.name!r}: preemption_policy must be one of "
                             f"{', '.join(PREEMPTION_POLICIES)}")
        if self.disruption_mode not in DISRUPTION_MODES:
            raise ValueError(f"job {self.name!r}: disruption_mode must be single or all")
        if self.duration is None:
            raise ValueError(f"job {self.name!r}: duration is required")
        if self.pods < 1 or self.gpus_per_pod < 0:
            raise ValueError(f"job {self.name!r}: needs pods >= 1 and gpus_per_pod >= 0")
        if self.min_member is None:
            object.__setattr__(self, "min_member", self.pods)
        if not 1 <= self.min_member <= self.pods:
            raise ValueError(f"job {self.name!r}: min_member must be between 1 and pods ({self.pods})")
        if self.duration < 0 or self.submit < 0:
            raise ValueError(f"job {self.name!r}: submit and duration must be >= 0")
        if self.time_limit is not None and self.time_limit <= 0:
            raise ValueError(f"job {self.name!r}: time_limit must be > 0")

    @property
    def gpus(self) -> int:
        """GPUs of the whole gang (``pods × gpus_per_pod``)."""
        return self.pods * self.gpus_per_pod

    @property
    def min_gpus(self) -> int:
        """GPUs the barrier needs (``min_member × gpus_per_pod``): Volcano's minResources."""
        return self.min_member * self.gpus_per_pod

    @property
    def planned_runtime(self) -> float:
        """What a planner (Slurm backfill) assumes: ``time_limit`` if given, else ``duration``."""
        return self.time_limit if self.time_limit is not None else self.duration


@dataclass(frozen=True)
class Queue:
    """A ClusterQueue (Kueue) / queue (Volcano) with a GPU quota; None = the whole cluster.

    ``within_cluster_queue`` is Kueue's ``preemption.withinClusterQueue``: ``Never`` (Kueue's
    default) or ``LowerPriority`` (a pending workload may evict admitted lower-priority workloads
    of the same ClusterQueue, each as a whole)."""

    name: str
    nominal_quota: int | None = None
    cohort: str | None = None
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    within_cluster_queue: str = "Never"


@dataclass(frozen=True)
class Preempt:
    """At ``at`` (s) job ``by`` (a higher-priority job of the workload, submitted then) arrives and
    only fits by taking GPUs from ``job``. The scheduler, not this event, chooses the victims:
    ``job`` names the job the story expects to lose pods (a result says whether it did)."""

    at: float
    job: str
    by: str


@dataclass(frozen=True)
class Fail:
    """At ``at`` (s) pod ``pod`` (its completion index) of ``job`` fails: the container exits
    non-zero and the pod ends ``Failed``, as a real kubelet reports a crashed rank."""

    at: float
    job: str
    pod: int = 0


@dataclass(frozen=True)
class Workload:
    """A cluster and the jobs submitted to it (and, optionally, their queues and events)."""

    cluster: ClusterSpec
    jobs: tuple[Job, ...]
    queues: tuple[Queue, ...] = field(default=())
    events: tuple = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(self, "queues", tuple(self.queues))
        object.__setattr__(self, "events", tuple(sorted(self.events, key=lambda e: e.at)))
        seen: set[str] = set()
        dup = {j.name for j in self.jobs if j.name in seen or seen.add(j.name)}
        if dup:
            raise ValueError(f"duplicate job names: {sorted(dup)}")
        names = {j.name: j for j in self.jobs}
        for j in self.jobs:
            if j.topology is not None and j.topology[1] not in self.cluster.levels:
                raise ValueError(f"job {j.name!r}: topology level {j.topology[1]!r} is not a level of the "
                                 f"cluster's topology ({', '.join(self.cluster.levels) or 'none'})")
        for e in self.events:
            if e.job not in names:
                raise ValueError(f"event at {e.at:g}s names job {e.job!r}, which is not in the workload")
            if isinstance(e, Preempt) and e.by not in names:
                raise ValueError(f"preempt at {e.at:g}s: job {e.by!r} is not in the workload")
            if isinstance(e, Fail) and not 0 <= e.pod < names[e.job].pods:
                raise ValueError(f"fail at {e.at:g}s: job {e.job!r} has no pod {e.pod}")

    def queue(self, name: str) -> Queue:
        """The named queue; a queue never declared has the whole cluster as its quota."""
        for q in self.queues:
            if q.name == name:
                return q
        return Queue(name)

    def replace_jobs(self, jobs) -> "Workload":
        """The same cluster, queues and events with other jobs (events naming a job that is no
        longer there are dropped)."""
        jobs = tuple(jobs)
        names = {j.name for j in jobs}
        events = tuple(e for e in self.events
                       if e.job in names and getattr(e, "by", e.job) in names)
        return replace(self, jobs=jobs, events=events)

    def job(self, name: str) -> Job:
        return next(j for j in self.jobs if j.name == name)
