"""WORKLOAD.yaml → :class:`~courselib.model.workload.Workload`, with located one-line errors.

Public API: ``load_workload(path) -> Workload`` and ``parse_workload(doc, file=None)``.

Format::

    cluster: {nodes: 75, gpus_per_node: 8}   # optional: memory_per_node (1Ti), island_size,
                                             #   features: [nvlink] (every node) or
                                             #   {nvlink: "1-40", h100: "41-75"} (1-based node ranges),
                                             #   topology: [{level: rack, size: 8}, {level: block, size: 4}]
                                             #   (outermost first; size = consecutive nodes per domain),
                                             #   slurm_topology: tree (default) or block, and for block
                                             #   block_sizes: [4, 8] (BlockSizes in nodes; default: the
                                             #   levels' sizes that are the base block x a power of 2)
    queues:                                  # optional (Kueue ClusterQueues / Volcano queues)
      - {name: team-a, nominal_quota: 256, cohort: all, borrowing_limit: 64, lending_limit: 64}
        # optional: within_cluster_queue: LowerPriority (Kueue preemption.withinClusterQueue)
    jobs:
      - {name: a, pods: 512, gpus_per_pod: 1, submit: 0, duration: 2h}
        # optional: min_member, priority, queue, constraint, exclusive, time_limit, memory_per_pod,
        #   kind: jobset (with max_restarts: N), disruption_mode: all (a v1.37 PodGroup's),
        #   topology: {required: rack} or {preferred: block} (a level of cluster.topology);
        #   a required one may add max_domains: 2 and wait: 30m (at most 2 domains, waiting at
        #   most 30m for them: Slurm's --switches=2@30 under topology/tree; lint W003 elsewhere),
        #   segment: 2 (Slurm's --segment, nodes per segment; needs slurm_topology: block)
    events:                                  # optional: what happens to running jobs
      - {at: 30m, preempt: {job: a, by: {name: urgent, pods: 1, gpus_per_pod: 8, duration: 10m,
                                         priority: 1000}}}
      - {at: 50m, fail: {job: a, pod: 3}}    # pod 3 (its completion index) of a fails

A ``preempt`` event submits ``by`` (a job like the others, without ``submit``) at ``at`` with a
PriorityClass that may preempt (``PreemptLowerPriority``); ``job`` names the job expected to lose
pods — which pods go is the scheduler's choice. Without a ``queue`` the preempting job is a plain
one that no Kueue queue manages (its queue is ``""``): under ``--policy kueue`` the kube-scheduler
preempts for it; with a ``queue`` Kueue admits it, and preempts whole workloads if that
ClusterQueue says ``within_cluster_queue: LowerPriority``.

Durations (``submit``, ``duration``, ``time_limit``) accept seconds or ``30s``/``25m``/``2h``/``1d``
(:func:`courselib.units.parse_duration`); memory accepts ``1Gi``/``80G`` (:func:`~courselib.units.parse_memory`).
"""
from __future__ import annotations

import re
from dataclasses import replace

from courselib.errors import InputError
from courselib.io.policy import check_count
from courselib.io.yamlfile import Fields, load_one
from courselib.model.cluster import parse_constraint
from courselib.model.workload import (DISRUPTION_MODES, JOB_KINDS, ClusterSpec, Fail, Job, Preempt,
                                      Queue, Workload, slurm_topology_problem)
from courselib.units import parse_duration, parse_memory

JOB_FIELDS = {"name", "pods", "gpus_per_pod", "submit", "duration", "min_member", "priority", "queue",
              "constraint", "exclusive", "time_limit", "memory_per_pod", "kind", "max_restarts",
              "disruption_mode", "topology", "segment"}
EVENT_FIELDS = {"at", "preempt", "fail"}
CLUSTER_FIELDS = {"nodes", "gpus_per_node", "memory_per_node", "features", "island_size", "topology",
                  "slurm_topology", "block_sizes"}
QUEUE_FIELDS = {"name", "nominal_quota", "cohort", "borrowing_limit", "lending_limit",
                "within_cluster_queue"}
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*$")


def _positive(f: Fields, key: str, value: int, minimum: int = 1, limit: str | None = None) -> int:
    """``value`` if at least ``minimum`` and (with ``limit``) within that model limit."""
    if value < minimum:
        raise f.error(key, f"must be at least {minimum}, got {value}")
    if limit is not None:
        check_count(limit, value, file=f.file, line=f.line(key), field=f._field(key))
    return value


def _node_ranges(f: Fields, key: str, spec, nodes: int) -> list[int]:
    """``"1-40,45"`` or ``all`` or a list of 1-based node numbers → 0-based indexes."""
    if spec == "all":
        return list(range(nodes))
    parts = spec if isinstance(spec, list) else str(spec).split(",")
    out = []
    for part in parts:
        m = _RANGE.match(str(part))
        if not m:
            raise f.error(key, f"{part!r} is not a node range", hint='write 1-based ranges like "1-40,45" or all')
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if not 1 <= lo <= hi <= nodes:
            raise f.error(key, f"node range {part!r} is outside 1-{nodes}")
        out.extend(range(lo - 1, hi))
    return out


def parse_cluster(doc, file: str | None) -> ClusterSpec:
    f = Fields(doc, file=file, where="cluster")
    f.unknown(CLUSTER_FIELDS)
    nodes = _positive(f, "nodes", f.req("nodes", int), limit="nodes")
    gpn = _positive(f, "gpus_per_node", f.req("gpus_per_node", int), limit="gpus_per_node")
    mem = f.opt("memory_per_node", lambda v: parse_memory(v, field="memory_per_node"), 0)
    island = _positive(f, "island_size", f.opt("island_size", int, 0), 0)
    feats = f.opt("features", None, None)
    features: tuple = ()
    if isinstance(feats, list):
        features = tuple(str(x) for x in feats)
    elif isinstance(feats, dict):
        per = [set() for _ in range(nodes)]
        ff = Fields(feats, file=file, where="cluster.features")
        for name, spec in feats.items():
            for i in _node_ranges(ff, name, spec, nodes):
                per[i].add(str(name))
        features = tuple(frozenset(p) for p in per)
    elif feats is not None:
        raise f.error("features", f"expected a list of features or a mapping feature: node range, got {feats!r}")
    topology = _topology(f, file, nodes)
    plugin = f.opt("slurm_topology", str, "tree")
    sizes = f.opt("block_sizes", None, [])
    if not isinstance(sizes, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in sizes):
        raise f.error("block_sizes", f"expected a list of node counts, got {sizes!r}",
                      hint="write block_sizes: [4, 8] (the base block, then aggregates of 2, 4, ... blocks)")
    problem = slurm_topology_problem(nodes, topology, plugin, tuple(sizes))
    if problem:
        key = "block_sizes" if problem.startswith("block_sizes") else "slurm_topology"
        raise f.error(key, problem, hint="see topology.conf(5): BlockName, BlockSizes")
    return ClusterSpec(nodes, gpn, mem, features, island, topology, plugin, tuple(sizes))


def _topology(f: Fields, file: str | None, nodes: int) -> tuple:
    """``cluster.topology``: a list of ``{level, size}``, outermost first, each size dividing the
    cluster and the level above it; a mistake is named at its own line."""
    doc = f.opt("topology", None, None)
    if doc is None:
        return ()
    if not isinstance(doc, list) or not doc:
        raise f.error("topology", "expected a list of levels, outermost first",
                      hint="write topology: [{level: rack, size: 8}, {level: block, size: 4}]")
    out, seen, above = [], {}, nodes
    for i, entry in enumerate(doc):
        g = Fields(entry, file=file, where=f"cluster.topology[{i}]")
        g.unknown({"level", "size"})
        level = g.req("level", str)
        size = g.req("size", int)
        if level in seen:
            raise g.error("level", f"level {level!r} is named twice (first at line {seen[level]})",
                          hint="give each level of the tree its own name")
        seen[level] = g.line("level")
        if size < 1:
            raise g.error("size", f"size must be at least 1 node, got {size}",
                          hint="size is how many consecutive nodes form one domain of this level")
        if nodes % size:
            raise g.error("size", f"size {size} does not divide the cluster's {nodes} nodes",
                          hint=f"choose a size that divides {nodes}, or change cluster.nodes")
        if above % size:
            raise g.error("size", f"size {size} does not divide the level above it ({above} nodes)",
                          hint="a domain must sit inside one domain of the level above: list levels "
                               "outermost first, each size dividing the one before")
        above = size
        out.append((level, size))
    return tuple(out)


def parse_job(doc, file: str | None, index: int, *, where: str | None = None,
              submit: float | None = None, preemption_policy: str | None = None) -> Job:
    name_hint = doc.get("name") if isinstance(doc, dict) else None
    f = Fields(doc, file=file, where=(where or f"jobs[{index}]") + (f"({name_hint})" if name_hint else ""))
    f.unknown(JOB_FIELDS - ({"submit"} if submit is not None else set()))

    def dur(key):
        return lambda v: parse_duration(v, field=key)
    name = f.req("name", str)
    pods = _positive(f, "pods", f.req("pods", int), limit="pods")
    gpp = _positive(f, "gpus_per_pod", f.req("gpus_per_pod", int), 0)
    if not f.has("duration"):
        raise f.error(None, "missing required field 'duration'", hint="add 'duration: 2h' (or 30s, 25m, 1d)")
    duration = f.req("duration", dur("duration"))
    min_member = f.opt("min_member", int, None)
    if min_member is not None and not 1 <= min_member <= pods:
        raise f.error("min_member", f"must be between 1 and pods ({pods}), got {min_member}")
    constraint = f.opt("constraint", str, None)
    if constraint is not None:
        try:
            parse_constraint(constraint)
        except ValueError as err:
            raise f.error("constraint", str(err)) from None
    time_limit = f.opt("time_limit", dur("time_limit"), None)
    if time_limit is not None and time_limit <= 0:
        raise f.error("time_limit", "must be longer than 0")
    kind = f.opt("kind", str, "job")
    if kind not in JOB_KINDS:
        raise f.error("kind", f"unknown kind {kind!r}", hint="write job (a batch/v1 Job) or jobset (a JobSet)")
    max_restarts = f.opt("max_restarts", int, None)
    if max_restarts is not None:
        if kind != "jobset":
            raise f.error("max_restarts", "only a JobSet has a failure policy", hint="add 'kind: jobset'")
        _positive(f, "max_restarts", max_restarts, 0)
    topology = max_domains = topology_wait = None
    if f.has("topology"):
        t = Fields(f.req("topology"), file=file, where=f"{f.where}.topology")
        t.unknown({"required", "preferred", "max_domains", "wait"})
        modes = [m for m in ("required", "preferred") if t.has(m)]
        if len(modes) != 1:
            raise f.error("topology", "expected one of required or preferred",
                          hint="write topology: {required: rack} or topology: {preferred: block}")
        topology = (modes[0], t.req(modes[0], str))
        for key in ("max_domains", "wait"):
            if t.has(key) and modes[0] != "required":
                raise t.error(key, f"{key} goes with required (at most N domains of the level)",
                              hint="write topology: {required: block, max_domains: 2, wait: 30m}")
        if t.has("max_domains"):
            max_domains = _positive(t, "max_domains", t.req("max_domains", int))
        if t.has("wait"):
            topology_wait = t.req("wait", dur("wait"))
            if topology_wait < 0:
                raise t.error("wait", "must be 0 or longer")
    disruption = f.opt("disruption_mode", str, "single")
    if disruption not in DISRUPTION_MODES:
        raise f.error("disruption_mode", f"unknown disruption mode {disruption!r}", hint="write single or all")
    return Job(name=name, pods=pods, gpus_per_pod=gpp,
               submit=submit if submit is not None else f.opt("submit", dur("submit"), 0.0),
               duration=duration, min_member=min_member, priority=f.opt("priority", int, 0),
               queue=f.opt("queue", str, "default"), constraint=constraint,
               exclusive=f.opt("exclusive", bool, False), time_limit=time_limit,
               memory_per_pod=f.opt("memory_per_pod", lambda v: parse_memory(v, field="memory_per_pod"), 0),
               kind=kind, max_restarts=max_restarts, preemption_policy=preemption_policy,
               disruption_mode=disruption, topology=topology, max_domains=max_domains,
               topology_wait=topology_wait,
               segment=_positive(f, "segment", f.req("segment", int)) if f.has("segment") else None)


def parse_queue(doc, file: str | None, index: int) -> Queue:
    f = Fields(doc, file=file, where=f"queues[{index}]")
    f.unknown(QUEUE_FIELDS)

    def count(key):
        value = f.opt(key, int, None)
        return None if value is None else _positive(f, key, value, 0, limit="gpus")
    within = f.opt("within_cluster_queue", str, "Never")
    if within not in ("Never", "LowerPriority"):
        raise f.error("within_cluster_queue", f"{within!r} is not modelled",
                      hint="write Never (Kueue's default) or LowerPriority")
    return Queue(f.req("name", str), count("nominal_quota"), f.opt("cohort", str, None),
                 count("borrowing_limit"), count("lending_limit"), within)


def parse_event(doc, file: str | None, index: int, jobs: dict[str, Job]) -> tuple:
    """One entry of ``events`` → ``(event, the preemptor Job or None)``."""
    f = Fields(doc, file=file, where=f"events[{index}]")
    f.unknown(EVENT_FIELDS)
    at = f.req("at", lambda v: parse_duration(v, field="at"))
    kinds = [k for k in ("preempt", "fail") if f.has(k)]
    if len(kinds) != 1:
        raise f.error(None, "an event is either preempt or fail", hint="write {at: 30m, preempt: {job: a, by: {...}}}")
    what = kinds[0]
    g = Fields(f.req(what), file=file, where=f"events[{index}].{what}")
    if what == "preempt":
        g.unknown({"job", "by"})
        job = g.req("job", str)
        if job not in jobs:
            raise g.error("job", f"no job named {job!r}", hint=f"name one of: {', '.join(jobs)}")
        by = g.req("by")
        if not isinstance(by, dict):
            raise g.error("by", "expected the preempting job: {name: urgent, pods: 1, gpus_per_pod: 8, "
                                "duration: 10m, priority: 1000}")
        preemptor = parse_job(by, file, index, where=f"events[{index}].preempt.by", submit=at,
                              preemption_policy="PreemptLowerPriority")
        if "queue" not in by:  # a plain pod: no Kueue queue (under kueue, kube-scheduler preempts)
            preemptor = replace(preemptor, queue="")
        if preemptor.priority <= jobs[job].priority:
            raise g.error("by", f"priority {preemptor.priority} does not exceed {job}'s "
                                f"{jobs[job].priority}: the scheduler preempts only lower priorities",
                          hint="give 'by' a higher priority, e.g. priority: 1000")
        return Preempt(at, job, preemptor.name), preemptor
    g.unknown({"job", "pod"})
    job = g.req("job", str)
    if job not in jobs:
        raise g.error("job", f"no job named {job!r}", hint=f"name one of: {', '.join(jobs)}")
    pod = g.opt("pod", int, 0)
    if not 0 <= pod < jobs[job].pods:
        raise g.error("pod", f"{job} has pods 0..{jobs[job].pods - 1}, not {pod}")
    return Fail(at, job, pod), None


def parse_workload(doc, file: str | None = None) -> Workload:
    """A parsed YAML document (with line information) → :class:`Workload`."""
    top = Fields(doc, file=file)
    top.unknown({"cluster", "jobs", "queues", "events"})
    cluster = parse_cluster(top.req("cluster"), file)
    jobs_doc = top.req("jobs")
    if not isinstance(jobs_doc, list) or not jobs_doc:
        raise top.error("jobs", "expected a non-empty list of jobs", hint="- {name: a, pods: 8, ...}")
    check_count("jobs", len(jobs_doc), file=file, line=top.line("jobs"), field="jobs")
    jobs, seen = [], {}
    for i, jd in enumerate(jobs_doc):
        job = parse_job(jd, file, i)
        if job.name in seen:
            raise InputError(f"duplicate job name {job.name!r} (first at line {seen[job.name]})", file=file,
                             line=jobs_doc.line_of(i), field=f"jobs[{i}].name", hint="give each job its own name")
        seen[job.name] = jobs_doc.line_of(i)
        if job.gpus_per_pod > cluster.gpus_per_node:
            raise InputError(f"gpus_per_pod {job.gpus_per_pod} exceeds gpus_per_node {cluster.gpus_per_node}",
                             file=file, line=jd.line_of("gpus_per_pod"), field=f"jobs[{i}].gpus_per_pod",
                             hint="a pod lives on one node")
        if job.topology and job.topology[1] not in cluster.levels:
            levels = ", ".join(cluster.levels)
            raise InputError(f"topology level {job.topology[1]!r} is not a level of cluster.topology"
                             + (f" ({levels})" if levels else " (the cluster has none)"),
                             file=file, line=jd["topology"].line_of(job.topology[0]),
                             field=f"jobs[{i}].topology.{job.topology[0]}",
                             hint=f"name one of: {levels}" if levels else "add cluster.topology")
        if job.segment is not None and cluster.slurm_topology != "block":
            raise InputError("segment is Slurm's --segment, read by topology/block only",
                             file=file, line=jd.line_of("segment"), field=f"jobs[{i}].segment",
                             hint="add slurm_topology: block to cluster, or remove segment")
        jobs.append(job)
    queues_doc = top.opt("queues", None, [])
    if not isinstance(queues_doc, list):
        raise top.error("queues", "expected a list of queues")
    queues = [parse_queue(q, file, i) for i, q in enumerate(queues_doc)]
    events_doc = top.opt("events", None, [])
    if not isinstance(events_doc, list):
        raise top.error("events", "expected a list of events", hint="- {at: 30m, preempt: {job: a, by: {...}}}")
    events = []
    for i, ed in enumerate(events_doc):
        event, preemptor = parse_event(ed, file, i, {j.name: j for j in jobs})
        if preemptor is not None:
            if preemptor.name in seen:
                raise InputError(f"duplicate job name {preemptor.name!r} (first at line {seen[preemptor.name]})",
                                 file=file, line=events_doc.line_of(i), field=f"events[{i}].preempt.by.name",
                                 hint="give the preempting job its own name")
            if preemptor.gpus_per_pod > cluster.gpus_per_node:
                raise InputError(f"gpus_per_pod {preemptor.gpus_per_pod} exceeds gpus_per_node "
                                 f"{cluster.gpus_per_node}", file=file, line=events_doc.line_of(i),
                                 field=f"events[{i}].preempt.by.gpus_per_pod", hint="a pod lives on one node")
            seen[preemptor.name] = events_doc.line_of(i)
            jobs.append(preemptor)
        events.append(event)
    return Workload(cluster, tuple(jobs), tuple(queues), tuple(events))


def load_workload(path) -> Workload:
    """Read WORKLOAD.yaml; a mistake raises one :class:`InputError` naming file, line and field."""
    return parse_workload(load_one(path, "workload"), file=str(path))
