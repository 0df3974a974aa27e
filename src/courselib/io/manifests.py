"""Read Kubernetes manifests (multi-document YAML) and say how each workload is ganged.

For every document: its kind, the **gang size and the rule it came from** (Volcano
``spec.minAvailable``, PodGroup ``spec.minMember``, a Job's ``spec.parallelism``, the sum of a
Kubeflow job's replicas, a Kueue pod group's ``kueue.x-k8s.io/pod-group-total-count``), GPUs per pod (per task / replica type), total GPUs, the memory limit per
pod, and the queue (Volcano ``spec.queue`` or annotation, Kueue label
``kueue.x-k8s.io/queue-name``). Sources: FACTS §3.1 (Volcano), §3.2 (Kueue), §3.3.

Core kinds (Pod, Job, Deployment, ...) are validated against the real Kubernetes OpenAPI schemas
shipped in ``kubernetes-validate`` (offline); custom resources (Volcano, Kueue, Kubeflow) are read
by the rules above. ``$NUM_NODES``/``<image>`` left in a structural field is reported as an
unresolved template, not guessed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from courselib.errors import CourseError, InputError
from courselib.io.policy import check_count
from courselib.io.yamlfile import duplicate_keys, load_all_text, read_text
from courselib.model.workload import Job, Queue
from courselib.units import parse_memory

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "habana.ai/gaudi")
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Kueue's plain pod group: pods that share this label form one Workload of the annotated size
# (sigs.k8s.io/kueue v0.17.0 pkg/controller/jobs/pod/constants/constants.go GroupNameLabel,
# GroupTotalCountAnnotation; pod_webhook.go validatePodGroupMetadata wants both)
KUEUE_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_POD_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"           # what the Volcano scheduler reads
VOLCANO_GROUP_ANNOTATION = "scheduling.volcano.sh/group-name"  # a constant + vGPU fallback only
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
#: keys that tie a *pod* to a gang: they work only on the pods themselves
POD_GROUP_KEYS = (GROUP_ANNOTATION, VOLCANO_GROUP_ANNOTATION, COSCHEDULING_LABEL, KUEUE_POD_GROUP_LABEL)
#: kinds whose controller creates pods from ``spec.template`` only (core API groups)
TEMPLATED_KINDS = ("Job", "Deployment", "StatefulSet", "ReplicaSet")
#: Volcano creates these queues itself (FACTS §3.1: PodGroup ``queue`` defaults to "default")
VOLCANO_BUILTIN_QUEUES = ("default", "root")
TOPOLOGY_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology",
                        "kueue.x-k8s.io/podset-preferred-topology")
PODGROUP_GROUPS = ("scheduling.volcano.sh", "scheduling.incubator.k8s.io", "scheduling.x-k8s.io",
                   "scheduling.sigs.k8s.io")
CORE_KINDS = {"Pod", "Job", "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Service",
              "Namespace", "ConfigMap", "CronJob", "PriorityClass"}
K8S_SCHEMA_VERSION = "1.37.0"
_TEMPLATE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{.*?\}\}|<[A-Za-z][^<>]*>")


@dataclass(frozen=True)
class PodSet:
    """A group of identical pods: a Volcano task, a Kubeflow replica type, a Job's pods."""

    name: str
    replicas: int | None
    replicas_line: int | None
    gpus_per_pod: int
    gpu_line: int | None
    memory_limit: int | None            # bytes per pod; None if any container has no limit
    memory_limit_text: str | None
    memory_request: int | None
    containers_without_memory_limit: tuple[tuple[str, int | None], ...]
    limit_below_request: tuple[tuple[str, int | None, str, str], ...]  # (container, line, req, lim)
    gpu_request_problems: tuple[tuple[str, int | None, str], ...]
    scheduler_name: str | None
    annotations: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    has_topology_constraint: bool
    line: int | None
    restart_policy: str | None = None   # the pod spec's restartPolicy as written (None: unset)
    restart_policy_line: int | None = None
    spec_line: int | None = None        # where the pod spec starts
    scheduling_group: str | None = None  # spec.schedulingGroup.podGroupName (Kubernetes' own PodGroup)


@dataclass(frozen=True)
class ManifestReading:
    """One YAML document, read for scheduling: who gangs its pods, with how many GPUs each."""

    file: str | None
    doc_index: int
    line: int | None
    kind: str | None
    api_version: str | None
    name: str | None
    namespace: str | None
    gang_size: int | None
    gang_rule: str
    gang_line: int | None
    pod_sets: tuple[PodSet, ...]
    queue: str | None
    queue_source: str | None
    queue_line: int | None
    scheduler_name: str | None
    templates: tuple[tuple[int | None, str, str], ...]     # (line, field path, value)
    validation_errors: tuple[tuple[int | None, str], ...]
    problems: tuple[tuple[int | None, str, str], ...]       # (line, field, message)
    notes: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    is_workload: bool = False
    gpu_quota: tuple[int | None, int | None, int | None] | None = None  # ClusterQueue: nominal, borrowing, lending
    cohort: str | None = None
    cluster_queue: str | None = None          # LocalQueue -> ClusterQueue
    #: (key, value, line) of pod-group keys (POD_GROUP_KEYS) in the metadata of an object whose
    #: pods come from ``spec.template`` (TEMPLATED_KINDS): they never reach the pods
    object_group_keys: tuple[tuple[str, str, int | None], ...] = ()

    @property
    def pods(self) -> int | None:
        if not self.pod_sets:
            return None
        reps = [p.replicas for p in self.pod_sets]
        return None if any(r is None for r in reps) else sum(reps)

    @property
    def gpus_per_pod(self):
        """An int for one pod set, else ``{pod set: GPUs}``."""
        if not self.pod_sets:
            return None
        if len(self.pod_sets) == 1:
            return self.pod_sets[0].gpus_per_pod
        return {p.name: p.gpus_per_pod for p in self.pod_sets}

    @property
    def total_gpus(self) -> int | None:
        if not self.pod_sets:
            return None
        if any(p.replicas is None for p in self.pod_sets):
            return None
        return sum(p.replicas * p.gpus_per_pod for p in self.pod_sets)

    @property
    def memory_limit(self):
        """Memory limit per pod as written (``"32000Mi"``); a dict for several pod sets."""
        if not self.pod_sets:
            return None
        if len(self.pod_sets) == 1:
            return self.pod_sets[0].memory_limit_text
        return {p.name: p.memory_limit_text for p in self.pod_sets}

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_index": self.doc_index, "line": self.line, "kind": self.kind,
            "api_version": self.api_version, "name": self.name, "namespace": self.namespace,
            "gang_size": self.gang_size, "gang_rule": self.gang_rule, "pods": self.pods,
            "gpus_per_pod": self.gpus_per_pod, "total_gpus": self.total_gpus,
            "memory_limit": self.memory_limit, "queue": self.queue,
            "queue_source": self.queue_source, "scheduler_name": self.scheduler_name,
            "pod_sets": [{"name": p.name, "replicas": p.replicas, "gpus_per_pod": p.gpus_per_pod,
                          "memory_limit": p.memory_limit_text,
                          "memory_limit_bytes": p.memory_limit,
                          "topology_constraint": p.has_topology_constraint}
                         for p in self.pod_sets],
            "unresolved_templates": [{"line": ln, "field": f, "value": v}
                                     for ln, f, v in self.templates],
            "validation_errors": [{"line": ln, "message": m} for ln, m in self.validation_errors],
            "problems": [{"line": ln, "field": f, "message": m} for ln, f, m in self.problems],
            "notes": list(self.notes),
            "gpu_quota": None if self.gpu_quota is None else dict(zip(
                ("nominal", "borrowing_limit", "lending_limit"), self.gpu_quota)),
            "cohort": self.cohort, "cluster_queue": self.cluster_queue,
        }


# ----------------------------------------------------------------------------------------------
# small, forgiving accessors: a manifest may hold anything

def _get(obj, *keys):
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def _line(obj, key=None) -> int | None:
    if key is not None and hasattr(obj, "line_of"):
        try:
            return obj.line_of(key)
        except Exception:  # noqa: BLE001 - a list index out of range, an odd key
            return getattr(obj, "line", None)
    return getattr(obj, "line", None)


def _str_map(obj) -> tuple[tuple[str, str], ...]:
    if not isinstance(obj, dict):
        return ()
    return tuple((str(k), str(v)) for k, v in obj.items())


def _int_field(parent, key, problems, where, templates) -> tuple[int | None, int | None, bool]:
    """(value, line, present) of an integer field; templates and bad types are recorded."""
    if not isinstance(parent, dict) or key not in parent or parent.get(key) is None:
        return None, None, False
    value = parent[key]
    line = _line(parent, key)
    if isinstance(value, bool):
        problems.append((line, f"{where}.{key}", f"expected a whole number, got {value!r}"))
        return None, line, True
    if isinstance(value, int):
        if value < 0:
            problems.append((line, f"{where}.{key}", f"{value} is negative"))
            return None, line, True
        return value, line, True
    if isinstance(value, str):
        if _TEMPLATE.search(value):
            templates.append((line, f"{where}.{key}", value))
            return None, line, True
        if value.strip().isdigit():
            return int(value.strip()), line, True
    problems.append((line, f"{where}.{key}", f"expected a whole number, got {value!r}"))
    return None, line, True


def _quantity_int(value) -> int | None:
    """A count such as GPUs: ``1``, ``"1"``; ``None`` if it is not a whole number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _memory(value) -> int | None:
    """Bytes in a Kubernetes memory quantity, or ``None`` if it is not one we can read."""
    if value is None:
        return None
    if isinstance(value, str):
        v = value.strip()
        m = re.fullmatch(r"([0-9]*\.?[0-9]+)([eE][0-9]+)", v)
        if m:
            try:
                return int(float(v))
            except (ValueError, OverflowError):
                return None
        if v.endswith("m"):     # milli-bytes: legal, odd, almost always a typo for M
            try:
                return int(float(v[:-1]) / 1000)
            except (ValueError, OverflowError):
                return None
        if v.endswith(("E", "P", "T", "Ei", "Pi")):
            mult = {"E": 1000 ** 6, "P": 1000 ** 5, "Ei": 1024 ** 6, "Pi": 1024 ** 5}
            for suf, k in mult.items():
                if v.endswith(suf):
                    try:
                        return int(float(v[:-len(suf)]) * k)
                    except (ValueError, OverflowError):
                        return None
    try:
        return parse_memory(value)
    except (CourseError, ValueError, OverflowError):
        return None


# ----------------------------------------------------------------------------------------------

def _pod_set(name: str, replicas: int | None, replicas_line: int | None, template,
             problems: list, templates: list, where: str) -> PodSet:
    """Read a pod template (``{metadata, spec}``) or a bare pod spec."""
    meta = _get(template, "metadata") or {}
    spec = _get(template, "spec")
    if not isinstance(spec, dict):
        spec = {}
    containers = spec.get("containers")
    if isinstance(containers, list):
        check_count("containers", len(containers), line=_line(spec, "containers"),
                    field=f"{where}.spec.containers")
    if not isinstance(containers, list):
        if "containers" in spec:
            problems.append((_line(spec, "containers"), f"{where}.spec.containers",
                             "expected a list of containers"))
        containers = []
    gpus = 0
    gpu_line = None
    mem_total = 0
    mem_text: list[str] = []
    mem_req_total = 0
    no_limit: list[tuple[str, int | None]] = []
    below: list = []
    gpu_problems: list = []
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            problems.append((_line(containers, i), f"{where}.spec.containers[{i}]",
                             "expected a container mapping"))
            continue
        cname = str(c.get("name", f"#{i}"))
        res = c.get("resources") if isinstance(c.get("resources"), dict) else {}
        limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
        requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
        for key in GPU_RESOURCES:
            lim = limits.get(key)
            req = requests.get(key)
            for val, holder, part in ((lim, limits, "limits"), (req, requests, "requests")):
                if isinstance(val, str) and _TEMPLATE.search(val):
                    templates.append((_line(holder, key), f"{where}.{cname}.{part}.{key}", val))
            n_lim, n_req = _quantity_int(lim), _quantity_int(req)
            if lim is not None and n_lim is None and not (isinstance(lim, str) and _TEMPLATE.search(lim)):
                problems.append((_line(limits, key), f"{where}.{cname}.limits.{key}",
                                 f"{lim!r} is not a whole number of GPUs"))
            if req is not None and lim is None:
                gpu_problems.append((cname, _line(requests, key),
                                     f"{key} is requested but has no limit: the API server "
                                     f"requires a limit for extended resources"))
            elif req is not None and n_req is not None and n_lim is not None and n_req != n_lim:
                gpu_problems.append((cname, _line(requests, key),
                                     f"{key} request {n_req} differs from limit {n_lim}: "
                                     f"extended resources cannot be overcommitted"))
            n = n_lim if n_lim is not None else n_req
            if n:
                gpus += n
                gpu_line = gpu_line or _line(limits if lim is not None else requests, key)
        mlim = limits.get("memory")
        mreq = requests.get("memory")
        if mlim is None:
            no_limit.append((cname, _line(c, "resources") if "resources" in c else _line(c)))
        else:
            b = _memory(mlim)
            if b is None:
                problems.append((_line(limits, "memory"), f"{where}.{cname}.limits.memory",
                                 f"{mlim!r} is not a memory quantity"))
            elif mem_total is not None:
                mem_total += b
            mem_text.append(str(mlim))
        if mreq is not None:
            br = _memory(mreq)
            if br is not None:
                mem_req_total += br
                bl = _memory(mlim) if mlim is not None else None
                if bl is not None and bl < br:
                    below.append((cname, _line(limits, "memory"), str(mreq), str(mlim)))
    if no_limit or not containers:
        mem_total = None
    annotations = _str_map(_get(meta, "annotations"))
    labels = _str_map(_get(meta, "labels"))
    topo = bool(_get(spec, "affinity", "podAffinity") or _get(spec, "affinity", "podAntiAffinity")
                or spec.get("topologySpreadConstraints")) \
        or _names_topology(_get(spec, "affinity", "nodeAffinity")) \
        or _names_topology(spec.get("nodeSelector")) \
        or any(k in TOPOLOGY_ANNOTATIONS for k, _ in annotations)
    sched = spec.get("schedulerName")
    return PodSet(
        name=name, replicas=replicas, replicas_line=replicas_line, gpus_per_pod=gpus,
        gpu_line=gpu_line, memory_limit=mem_total,
        memory_limit_text=None if (no_limit or not mem_text) else
        (mem_text[0] if len(mem_text) == 1 else str(mem_total)),
        memory_request=mem_req_total or None,
        containers_without_memory_limit=tuple(no_limit), limit_below_request=tuple(below),
        gpu_request_problems=tuple(gpu_problems),
        scheduler_name=str(sched) if sched is not None else None,
        annotations=annotations, labels=labels, has_topology_constraint=topo,
        line=_line(template),
        restart_policy=str(spec["restartPolicy"]) if spec.get("restartPolicy") is not None else None,
        restart_policy_line=_line(spec, "restartPolicy") if "restartPolicy" in spec else None,
        spec_line=_line(spec),
        scheduling_group=str(_get(spec, "schedulingGroup", "podGroupName"))
        if _get(spec, "schedulingGroup", "podGroupName") is not None else None)


_TOPOLOGY_WORDS = ("topology", "rack", "zone", "block", "island", "nvlink", "hostname", "switch",
                   "superpod", "spine")


def _names_topology(obj) -> bool:
    """Does a nodeSelector / nodeAffinity mention a topology label (rack, zone, block, ...)?
    Selecting an instance type or GPU model does not keep pods close together."""
    if isinstance(obj, dict):
        return any((isinstance(k, str) and any(w in k.lower() for w in _TOPOLOGY_WORDS))
                   or (k == "key" and isinstance(v, str) and any(w in v.lower() for w in _TOPOLOGY_WORDS))
                   or _names_topology(v) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_names_topology(v) for v in obj)
    return False


def api_group(api_version: str | None) -> str:
    """The API group of an ``apiVersion`` (``batch/v1`` -> ``batch``; the core group is ``""``)."""
    if not api_version or "/" not in api_version:
        return ""
    return api_version.split("/", 1)[0]


def read_document(doc, *, file: str | None = None, doc_index: int = 0,
                  validate: bool = True) -> ManifestReading:
    """One YAML document -> :class:`ManifestReading` (never raises on odd content; records it)."""
    problems: list = []
    templates: list = []
    notes: list[str] = []
    if not isinstance(doc, dict):
        problems.append((getattr(doc, "line", None), "", "this document is not a mapping "
                         f"(got {type(doc).__name__}); it is not a Kubernetes object"))
        return ManifestReading(file, doc_index, getattr(doc, "line", None), None, None, None, None,
                               None, "not a Kubernetes object", None, (), None, None, None, None,
                               (), (), tuple(problems))
    kind = doc.get("kind") if isinstance(doc.get("kind"), str) else None
    api = doc.get("apiVersion") if isinstance(doc.get("apiVersion"), str) else None
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = meta.get("name")
    if name is None and meta.get("generateName"):
        name = f"{meta.get('generateName')}*"
    name = str(name) if name is not None else None
    ns = meta.get("namespace")
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    group = api_group(api)
    pod_sets: list[PodSet] = []
    gang_size = None
    gang_rule = "not a workload"
    gang_line = None
    queue = queue_source = None
    queue_line = None
    sched = None
    workload = False
    gpu_quota = cohort = cluster_queue = None
    if kind is None:
        problems.append((_line(doc), "kind", "no 'kind': not a Kubernetes object"))

    def kueue_label(*maps_and_holders):
        for m in maps_and_holders:
            if isinstance(m, dict) and isinstance(m.get(KUEUE_QUEUE_LABEL), str):
                return m[KUEUE_QUEUE_LABEL], _line(m, KUEUE_QUEUE_LABEL)
        return None, None

    if kind == "Job" and group == "batch.volcano.sh":
        workload = True
        tasks = spec.get("tasks")
        if not isinstance(tasks, list):
            tasks = []
            problems.append((_line(spec), "spec.tasks", "a Volcano Job needs a list of tasks"))
        for i, t in enumerate(tasks):
            if not isinstance(t, dict):
                continue
            reps, rl, present = _int_field(t, "replicas", problems, f"spec.tasks[{i}]", templates)
            if not present:     # counted as one pod, and said so
                reps = 1
                notes.append(f"spec.tasks[{i}] has no replicas: counted as 1")
            pod_sets.append(_pod_set(str(t.get("name", f"task{i}")), reps, rl, t.get("template"),
                                     problems, templates, f"spec.tasks[{i}].template"))
        ma, ml, present = _int_field(spec, "minAvailable", problems, "spec", templates)
        if present and ma is not None:
            gang_size, gang_rule, gang_line = ma, "spec.minAvailable", ml
        elif present:
            gang_rule = "spec.minAvailable (unresolved)"
            gang_line = ml
        else:
            total = sum(p.replicas or 0 for p in pod_sets)
            gang_size, gang_rule = total, "spec.minAvailable unset -> sum of task replicas"
        if isinstance(spec.get("queue"), str):
            queue, queue_source, queue_line = spec["queue"], "spec.queue", _line(spec, "queue")
        else:
            notes.append("spec.queue unset: Volcano uses the queue 'default'")
        sched = spec.get("schedulerName") or "volcano"
        if spec.get("networkTopology"):
            pod_sets = [replace(p, has_topology_constraint=True) for p in pod_sets]
    elif kind == "PodGroup" and group in PODGROUP_GROUPS:
        mm, ml, present = _int_field(spec, "minMember", problems, "spec", templates)
        gang_size, gang_line = mm, ml
        gang_rule = "spec.minMember" if present else "spec.minMember unset"
        if isinstance(spec.get("queue"), str):
            queue, queue_source, queue_line = spec["queue"], "spec.queue", _line(spec, "queue")
        if group == "scheduling.incubator.k8s.io":
            notes.append(f"legacy API group {group}: current Volcano uses scheduling.volcano.sh")
    elif kind == "PodGroup" and group == "scheduling.k8s.io":
        # Kubernetes' own PodGroup (v1.37: scheduling.k8s.io/v1beta1, GenericWorkload gate)
        policy = _get(spec, "schedulingPolicy") or {}
        if isinstance(policy, dict) and isinstance(policy.get("gang"), dict):
            mc, ml, present = _int_field(policy["gang"], "minCount", problems,
                                         "spec.schedulingPolicy.gang", templates)
            gang_size, gang_line = mc, ml
            gang_rule = "spec.schedulingPolicy.gang.minCount" if present else "spec.schedulingPolicy.gang.minCount unset"
        else:
            gang_rule = "spec.schedulingPolicy.basic (no gang)"
        notes.append("Kubernetes' own PodGroup: served only with --runtime-config=scheduling.k8s.io/v1beta1=true "
                     "and the GenericWorkload feature gate (off by default in v1.37)")
    elif kind in ("Job", "Pod", "Deployment", "StatefulSet", "ReplicaSet") and group in ("", "batch", "apps"):
        workload = True
        if kind == "Pod":
            pod_sets.append(_pod_set("pod", 1, None, doc, problems, templates, "pod"))
            gang_size, gang_rule = 1, "a single pod"
            group, count = dict(labels).get(KUEUE_POD_GROUP_LABEL), dict(annotations).get(KUEUE_POD_GROUP_COUNT)
            if group is not None or count is not None:
                n, nl, _ = _int_field(meta.get("annotations"), KUEUE_POD_GROUP_COUNT, problems,
                                      "metadata.annotations", templates)
                if group is None or count is None:
                    problems.append((_line(meta, "labels" if group is None else "annotations"),
                                     "metadata", f"Kueue wants both the label {KUEUE_POD_GROUP_LABEL} "
                                     f"and the annotation {KUEUE_POD_GROUP_COUNT}: its webhook "
                                     "rejects a pod with only one"))
                elif n is not None and n < 1:
                    problems.append((nl, f"metadata.annotations.{KUEUE_POD_GROUP_COUNT}",
                                     "a pod group's total count must be at least 1"))
                elif n is not None:
                    gang_size, gang_line = n, nl
                    gang_rule = f"Kueue pod group {group!r}: annotation {KUEUE_POD_GROUP_COUNT}"
        elif kind == "Job":
            par, pl, present = _int_field(spec, "parallelism", problems, "spec", templates)
            if not present:
                par, gang_rule = 1, "spec.parallelism unset -> default 1"
            else:
                gang_rule = "spec.parallelism"
            comp, _, cpresent = _int_field(spec, "completions", problems, "spec", templates)
            if par is not None and cpresent and comp is not None and comp < par:
                notes.append(f"spec.completions {comp} < parallelism {par}: at most {comp} pods run")
                par = comp
            gang_size, gang_line = par, pl
            pod_sets.append(_pod_set("job", par, pl, spec.get("template"), problems, templates,
                                     "spec.template"))
            if isinstance(_get(spec, "scheduling", "schedulingPolicy", "gang"), dict):
                mc = _get(spec, "scheduling", "schedulingPolicy", "gang", "minCount")
                notes.append("spec.scheduling gang (WorkloadWithJob): the Job controller creates a Workload "
                             f"and a PodGroup, minCount {mc if isinstance(mc, int) else 'parallelism'}")
        else:
            reps, rl, present = _int_field(spec, "replicas", problems, "spec", templates)
            if not present:
                reps = 1
            gang_rule = "not a gang object"
            pod_sets.append(_pod_set(kind.lower(), reps, rl, spec.get("template"), problems,
                                     templates, "spec.template"))
        q, ql = kueue_label(meta.get("labels"))
        if q:
            queue, queue_source, queue_line = q, f"label {KUEUE_QUEUE_LABEL}", ql
        if pod_sets:
            if queue is None:
                q, ql = kueue_label(_get(spec, "template", "metadata", "labels"))
                if q:
                    queue, queue_source, queue_line = q, f"pod label {KUEUE_QUEUE_LABEL}", ql
            if queue is None:
                for k, v in pod_sets[0].annotations + annotations:
                    if k == VOLCANO_QUEUE_ANNOTATION:
                        queue, queue_source = v, f"annotation {VOLCANO_QUEUE_ANNOTATION}"
                        break
            sched = pod_sets[0].scheduler_name
    elif group == "kubeflow.org" and isinstance(spec, dict) and \
            any(isinstance(k, str) and k.endswith("ReplicaSpecs") and isinstance(v, dict)
                for k, v in spec.items()):
        workload = True
        key = next(k for k, v in spec.items()
                   if isinstance(k, str) and k.endswith("ReplicaSpecs") and isinstance(v, dict))
        parts = []
        for rname, rs in spec[key].items():
            if not isinstance(rs, dict):
                continue
            reps, rl, present = _int_field(rs, "replicas", problems, f"spec.{key}.{rname}", templates)
            if not present:
                reps = 1
            pod_sets.append(_pod_set(str(rname), reps, rl, rs.get("template"), problems,
                                     templates, f"spec.{key}.{rname}.template"))
            parts.append(f"{rname} {reps if reps is not None else '?'}")
        run_policy = spec.get("runPolicy") if isinstance(spec.get("runPolicy"), dict) else {}
        sp = run_policy.get("schedulingPolicy") if isinstance(run_policy.get("schedulingPolicy"), dict) else {}
        ma, ml, present = _int_field(sp, "minAvailable", problems, "spec.runPolicy.schedulingPolicy", templates)
        if present and ma is not None:
            gang_size, gang_rule, gang_line = ma, "spec.runPolicy.schedulingPolicy.minAvailable", ml
        else:
            reps = [p.replicas for p in pod_sets]
            gang_size = None if any(r is None for r in reps) else sum(reps)
            gang_rule = f"sum of replicas ({' + '.join(parts)})"
        if isinstance(sp.get("queue"), str):
            queue, queue_source, queue_line = sp["queue"], "spec.runPolicy.schedulingPolicy.queue", _line(sp, "queue")
        q, ql = kueue_label(meta.get("labels"))
        if q:
            queue, queue_source, queue_line = q, f"label {KUEUE_QUEUE_LABEL}", ql
        ep = spec.get("elasticPolicy")
        if isinstance(ep, dict):
            notes.append(f"elasticPolicy minReplicas {ep.get('minReplicas')} / maxReplicas "
                         f"{ep.get('maxReplicas')}: the job may run with fewer workers")
        scheds = {p.scheduler_name for p in pod_sets if p.scheduler_name}
        sched = scheds.pop() if len(scheds) == 1 else (", ".join(sorted(scheds)) or None)
        if sp and sched is None:
            sched = "(operator's gang scheduler)"
    elif group == "kueue.x-k8s.io":
        gang_rule = "not a workload (Kueue configuration)"
        if kind == "LocalQueue" and isinstance(spec.get("clusterQueue"), str):
            cluster_queue = spec["clusterQueue"]
            notes.append(f"points to ClusterQueue {cluster_queue}")
        if kind == "ClusterQueue":
            gpu_quota = _cluster_queue_gpus(spec)
            cohort = spec.get("cohort") if isinstance(spec.get("cohort"), str) else None
            if gpu_quota:
                notes.append(f"GPU quota: nominal {gpu_quota[0]}, borrowing limit "
                             f"{gpu_quota[1]}, lending limit {gpu_quota[2]}")
    elif group == "scheduling.volcano.sh" and kind == "Queue":
        gang_rule = "not a workload (Volcano queue)"
    _scan_templates(doc, templates)
    validation: list = []
    if validate and kind in CORE_KINDS and group in ("", "batch", "apps", "scheduling.k8s.io"):
        validation = _validate(doc)
    # queues given only as annotations on the object
    if queue is None:
        for k, v in annotations:
            if k == VOLCANO_QUEUE_ANNOTATION:
                queue, queue_source = v, f"annotation {VOLCANO_QUEUE_ANNOTATION}"
    return ManifestReading(
        file=file, doc_index=doc_index, line=_line(doc), kind=kind, api_version=api, name=name,
        namespace=str(ns) if ns is not None else None, gang_size=gang_size, gang_rule=gang_rule,
        gang_line=gang_line, pod_sets=tuple(pod_sets), queue=queue, queue_source=queue_source,
        queue_line=queue_line, scheduler_name=str(sched) if sched is not None else None,
        templates=tuple(dict.fromkeys(templates)), validation_errors=tuple(validation),
        problems=tuple(problems), notes=tuple(notes), labels=labels, annotations=annotations,
        is_workload=workload, gpu_quota=gpu_quota, cohort=cohort, cluster_queue=cluster_queue,
        object_group_keys=_object_group_keys(meta) if kind in TEMPLATED_KINDS and
        group in ("", "batch", "apps") else ())


def _object_group_keys(meta) -> tuple[tuple[str, str, int | None], ...]:
    out = []
    for holder in (meta.get("annotations"), meta.get("labels")):
        if isinstance(holder, dict):
            out += [(k, str(v), _line(holder, k)) for k, v in holder.items() if k in POD_GROUP_KEYS]
    return tuple(out)


def _list(x) -> list:
    return x if isinstance(x, list) else []


def _cluster_queue_gpus(spec) -> tuple[int | None, int | None, int | None] | None:
    """GPU ``(nominalQuota, borrowingLimit, lendingLimit)`` summed over flavors (FACTS §3.2);
    ``None`` if the ClusterQueue covers no GPU resource; a limit is ``None`` where none is set."""
    found = False
    totals: list[int | None] = [0, None, None]
    for rg in _list(spec.get("resourceGroups")):
        for fl in _list(_get(rg, "flavors")):
            for r in _list(_get(fl, "resources")):
                if isinstance(r, dict) and r.get("name") in GPU_RESOURCES:
                    found = True
                    totals[0] += _quantity_int(r.get("nominalQuota")) or 0
                    for i, key in ((1, "borrowingLimit"), (2, "lendingLimit")):
                        v = _quantity_int(r.get(key))
                        if v is not None:
                            totals[i] = (totals[i] or 0) + v
    return tuple(totals) if found else None


# fields whose text is run by a shell at run time: a '$VAR' there is not a template
_RUNTIME_KEYS = {"command", "args", "env", "script", "value", "lifecycle", "livenessProbe",
                 "readinessProbe", "startupProbe"}


def _scan_templates(obj, out: list, path: str = "") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _RUNTIME_KEYS:
                continue
            p = f"{path}.{k}" if path else str(k)
            if isinstance(v, str) and _TEMPLATE.search(v):
                out.append((_line(obj, k), p, v))
            else:
                _scan_templates(v, out, p)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            p = f"{path}[{i}]"
            if isinstance(v, str) and _TEMPLATE.search(v):
                out.append((_line(obj, i), p, v))
            else:
                _scan_templates(v, out, p)


def _plain(obj):
    """Located YAML -> plain dicts/lists (for the schema validator)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


@lru_cache(maxsize=1)
def _validator_module():
    try:
        import kubernetes_validate
    except ImportError:     # optional extra: courselib[io]
        return None
    return kubernetes_validate


@lru_cache(maxsize=64)
def _schema_validator(kind: str, api_version: str):
    """A jsonschema validator for one kind, built once from the schemas shipped in
    ``kubernetes-validate`` (offline; the shared definitions file is read once, not per document)."""
    kv = _validator_module()
    if kv is None:
        return None
    import jsonschema
    from referencing import Registry, Resource
    from kubernetes_validate import utils

    version = [v for v in utils.all_versions()
               if utils.major_minor(v) <= utils.major_minor(K8S_SCHEMA_VERSION)][-1]
    schema_dir = f"kubernetes-json-schema/v{version}-local-strict"
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(f"{schema_dir}/{kind.lower()}-{api}.json", K8S_SCHEMA_VERSION)
    except (FileNotFoundError, utils.VersionNotSupportedError):
        return None
    defs = _definitions(schema_dir)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@lru_cache(maxsize=2)
def _definitions(schema_dir: str):
    from kubernetes_validate import utils
    return utils.schema_contents(f"{schema_dir}/_definitions.json", K8S_SCHEMA_VERSION)


def _validate(doc) -> list[tuple[int | None, str]]:
    """Errors the real Kubernetes OpenAPI schema finds (offline, schemas of ``kubernetes-validate``),
    at most three, each with the line of the offending field."""
    kind, api = doc.get("kind"), doc.get("apiVersion")
    try:
        validator = _schema_validator(kind, api)
    except Exception as err:  # noqa: BLE001 - a broken schema package: say so, go on
        return [(_line(doc), f"could not validate: {type(err).__name__}")]
    if validator is None:
        return []
    out = []
    try:
        errors = sorted(validator.iter_errors(_plain(doc)), key=lambda e: [str(p) for p in e.path])
    except Exception as err:  # noqa: BLE001 - e.g. an unresolvable reference
        return [(_line(doc), f"could not validate: {type(err).__name__}")]
    for err in errors[:3]:
        path = list(err.path)
        node, line = doc, _line(doc)
        for key in path:
            try:
                line = _line(node, key) or line
                node = node[key]
            except (KeyError, IndexError, TypeError):
                break
        where = ".".join(str(p) for p in path)
        msg = str(err.message).splitlines()[0]
        out.append((line, f"{where}: {msg}" if where else msg))
    return out


def read_manifests_text(text: str, *, file: str | None = None, validate: bool = True) -> list[ManifestReading]:
    """Every non-empty document of a multi-document YAML text, read."""
    if "\x00" in text:
        raise InputError("this is a binary file, not YAML", file=file, line=1)
    docs = load_all_text(text, file=file, duplicates="keep")
    try:
        return [_with_duplicates(read_document(d, file=file, doc_index=i, validate=validate), duplicate_keys(d))
                for i, d in enumerate(docs) if d is not None]
    except InputError as err:  # a model limit (courselib.io.policy) inside a document
        raise err.located(file=file) from None


def _with_duplicates(reading: ManifestReading, duplicates) -> ManifestReading:
    """A key written twice is a problem: YAML keeps the last silently, and kubectl's default
    ``--validate=strict`` (server-side field validation) refuses the object."""
    if not duplicates:
        return reading
    extra = tuple((lines[-1], where, f"key {key!r} appears {len(lines)} times (lines "
                   f"{', '.join(map(str, lines))}); only the last counts here, and kubectl apply "
                   "(--validate=strict, its default) refuses the object")
                  for where, key, lines in duplicates)
    return replace(reading, problems=reading.problems + extra)


def read_manifests(path, *, validate: bool = True) -> list[ManifestReading]:
    """Read the manifest file at ``path`` (never written to)."""
    return read_manifests_text(read_text(path, "manifest"), file=str(path), validate=validate)


# ----------------------------------------------------------------------------------------------
# to the gang scheduler's model

def to_job(reading: ManifestReading, *, duration: float, submit: float = 0.0, priority: int = 0):
    """A workload document as a ``courselib.model.workload.Job``: its GPU pods are the gang.

    Pods without GPUs (a launcher, a parameter server) are left out of the GPU gang and the gang
    minimum is reduced by them; GPU pod sets must agree on GPUs per pod, since a ``Job`` is a
    gang of identical ranks.
    """
    loc = dict(file=reading.file, line=reading.line)
    if not reading.is_workload or not reading.pod_sets:
        raise InputError(f"{reading.kind} {reading.name} is not a workload with pods", **loc)
    if reading.pods is None:
        raise InputError("the number of pods is not known (unresolved template?)", **loc)
    gpu_sets = [p for p in reading.pod_sets if p.gpus_per_pod]
    if not gpu_sets:
        gpu_sets, gpus = list(reading.pod_sets), 0
    else:
        counts = {p.gpus_per_pod for p in gpu_sets}
        if len(counts) > 1:
            raise InputError("GPU pod sets ask for different GPUs per pod: "
                             + ", ".join(f"{p.name}={p.gpus_per_pod}" for p in gpu_sets),
                             hint="convert each pod set as its own job", **loc)
        gpus = counts.pop()
    pods = sum(p.replicas or 0 for p in gpu_sets)
    if pods < 1:
        raise InputError("the workload has no pods to place", **loc)
    others = (reading.pods or 0) - pods
    min_member = None
    if reading.gang_size is not None and reading.gang_rule.startswith(("spec.min", "spec.runPolicy")):
        min_member = max(1, min(pods, reading.gang_size - others))
    if reading.gang_size is not None and reading.gang_rule.startswith("Kueue pod group"):
        pods = min_member = reading.gang_size   # the group's pods, each like this one
    mems = [p.memory_limit for p in gpu_sets if p.memory_limit is not None]
    return Job(name=reading.name or f"doc{reading.doc_index}", pods=pods, gpus_per_pod=gpus,
               submit=submit, duration=duration, min_member=min_member, priority=priority,
               queue=reading.queue or "default", memory_per_pod=max(mems) if mems else 0)


def to_queue(reading: ManifestReading):
    """A Kueue ``ClusterQueue`` as the gang scheduler's ``courselib.model.workload.Queue``
    (GPU quota, cohort, borrowing and lending limits; FACTS §3.2)."""
    if reading.kind != "ClusterQueue":
        raise InputError(f"{reading.kind} {reading.name} is not a ClusterQueue",
                         file=reading.file, line=reading.line)
    nominal, borrowing, lending = reading.gpu_quota or (None, None, None)
    return Queue(reading.name or f"doc{reading.doc_index}", nominal_quota=nominal,
                 cohort=reading.cohort, borrowing_limit=borrowing, lending_limit=lending)
