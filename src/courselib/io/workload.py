"""WORKLOAD.yaml → :class:`~courselib.model.workload.Workload`, with located one-line errors.

Public API: ``load_workload(path) -> Workload`` and ``parse_workload(doc, file=None)``.

Format::

    cluster: {nodes: 75, gpus_per_node: 8}   # optional: memory_per_node (1Ti), island_size,
                                             #   features: [nvlink] (every node) or
                                             #   {nvlink: "1-40", h100: "41-75"} (1-based node ranges)
    queues:                                  # optional (Kueue ClusterQueues / Volcano queues)
      - {name: team-a, nominal_quota: 256, cohort: all, borrowing_limit: 64, lending_limit: 64}
    jobs:
      - {name: a, pods: 512, gpus_per_pod: 1, submit: 0, duration: 2h}
        # optional: min_member, priority, queue, constraint, exclusive, time_limit, memory_per_pod

Durations (``submit``, ``duration``, ``time_limit``) accept seconds or ``30s``/``25m``/``2h``/``1d``
(:func:`courselib.units.parse_duration`); memory accepts ``1Gi``/``80G`` (:func:`~courselib.units.parse_memory`).
"""
from __future__ import annotations

import re

from courselib.errors import InputError
from courselib.io.policy import check_count
from courselib.io.yamlfile import Fields, load_one
from courselib.model.cluster import parse_constraint
from courselib.model.workload import ClusterSpec, Job, Queue, Workload
from courselib.units import parse_duration, parse_memory

JOB_FIELDS = {"name", "pods", "gpus_per_pod", "submit", "duration", "min_member", "priority", "queue",
              "constraint", "exclusive", "time_limit", "memory_per_pod"}
CLUSTER_FIELDS = {"nodes", "gpus_per_node", "memory_per_node", "features", "island_size"}
QUEUE_FIELDS = {"name", "nominal_quota", "cohort", "borrowing_limit", "lending_limit"}
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
    return ClusterSpec(nodes, gpn, mem, features, island)


def parse_job(doc, file: str | None, index: int) -> Job:
    name_hint = doc.get("name") if isinstance(doc, dict) else None
    f = Fields(doc, file=file, where=f"jobs[{index}]" + (f"({name_hint})" if name_hint else ""))
    f.unknown(JOB_FIELDS)

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
    return Job(name=name, pods=pods, gpus_per_pod=gpp, submit=f.opt("submit", dur("submit"), 0.0),
               duration=duration, min_member=min_member, priority=f.opt("priority", int, 0),
               queue=f.opt("queue", str, "default"), constraint=constraint,
               exclusive=f.opt("exclusive", bool, False), time_limit=time_limit,
               memory_per_pod=f.opt("memory_per_pod", lambda v: parse_memory(v, field="memory_per_pod"), 0))


def parse_queue(doc, file: str | None, index: int) -> Queue:
    f = Fields(doc, file=file, where=f"queues[{index}]")
    f.unknown(QUEUE_FIELDS)

    def count(key):
        value = f.opt(key, int, None)
        return None if value is None else _positive(f, key, value, 0, limit="gpus")
    return Queue(f.req("name", str), count("nominal_quota"), f.opt("cohort", str, None),
                 count("borrowing_limit"), count("lending_limit"))


def parse_workload(doc, file: str | None = None) -> Workload:
    """A parsed YAML document (with line information) → :class:`Workload`."""
    top = Fields(doc, file=file)
    top.unknown({"cluster", "jobs", "queues"})
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
        jobs.append(job)
    queues_doc = top.opt("queues", None, [])
    if not isinstance(queues_doc, list):
        raise top.error("queues", "expected a list of queues")
    queues = [parse_queue(q, file, i) for i, q in enumerate(queues_doc)]
    return Workload(cluster, tuple(jobs), tuple(queues))


def load_workload(path) -> Workload:
    """Read WORKLOAD.yaml; a mistake raises one :class:`InputError` naming file, line and field."""
    return parse_workload(load_one(path, "workload"), file=str(path))
