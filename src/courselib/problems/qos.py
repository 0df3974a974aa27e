"""Practice: a pod's QoS class and the ``oom_score_adj`` the kubelet writes for each container.

The problem is a Pod manifest (written here as YAML text) and the node's memory capacity; the
solution comes from :mod:`courselib.model.qos` (``GetPodQOS`` and ``policy.go``: k8s-docs-qos, k8s-kubelet-qos-policy).
Traps by difficulty:

- easy: one container; BestEffort, Guaranteed or Burstable with a memory request.
- medium: two containers; limits without requests (defaulted to the limits: Guaranteed), a
  container with cpu only (Burstable, and no memory request gives 1000 - 0 = 1000 -> 999),
  a memory request near the capacity (the clamp at 3, not the docs' 2), a cpu limit missing.
- hard: init containers (they count for QoS), a sidecar (``restartPolicy: Always``: never above
  the smallest regular container), requests != limits per resource, decimal vs binary units
  (``1G`` is not ``1Gi``), the node's *allocatable* shown next to its capacity (the kubelet uses
  capacity), and priority classes (only ``system-node-critical`` forces -997).
"""
from __future__ import annotations

from courselib.io.pod import parse_quantity
from courselib.model.qos import (BESTEFFORT, BESTEFFORT_OOM_SCORE_ADJ, BURSTABLE,
                                 GUARANTEED, GUARANTEED_OOM_SCORE_ADJ, QOS_RESOURCES,
                                 SYSTEM_NODE_CRITICAL, Container, Pod, pod_oom_score_adj)
from courselib.problems.base import Problem, Solution, rng
from courselib.problems.render import table

TOPIC = "qos"
SUMMARY = "a pod's QoS class and the oom_score_adj of each container (Kubernetes kubelet)"

GiB = 2 ** 30
_APPS = ("trainer", "server", "worker", "app", "api", "inference", "etl", "notebook")
_SIDECARS = ("log-shipper", "metrics", "proxy", "envoy", "fluent-bit")
_INITS = ("fetch-weights", "init-db", "wait-for-master", "download-data", "setup")
_IMAGES = {"trainer": "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", "server": "nginx:1.27",
           "worker": "python:3.11-slim", "app": "python:3.11-slim", "api": "python:3.11-slim",
           "inference": "nvcr.io/nvidia/tritonserver:24.08-py3", "etl": "python:3.11-slim",
           "notebook": "jupyter/base-notebook:2024-07-29"}


# --- generation ------------------------------------------------------------------------------

def _mem(r, lo_mi: int, hi_mi: int, *, decimal: bool = False) -> str:
    """A memory quantity between lo and hi MiB, written the way people write them."""
    mi = r.randrange(lo_mi, hi_mi + 1, 64)
    if decimal:                       # the 1G-is-not-1Gi trap: a power of ten
        return f"{max(1, mi // 1000)}G" if mi >= 1000 and r.random() < 0.5 else f"{mi}M"
    return f"{mi // 1024}Gi" if mi % 1024 == 0 and r.random() < 0.7 else f"{mi}Mi"


def _cpu(r) -> str:
    m = r.choice((100, 250, 500, 750, 1000, 2000, 4000))
    return f"{m // 1000}" if m % 1000 == 0 and r.random() < 0.6 else f"{m}m"


def _resources(r, shape: str, *, decimal: bool = False, big: bool = False) -> dict:
    """requests/limits for one container of the given shape."""
    lo, hi = (2048, 12288) if big else (128, 4096)
    cpu, mem = _cpu(r), _mem(r, lo, hi, decimal=decimal)
    if shape == "none":
        return {}
    if shape == "equal":                 # requests == limits, both resources
        return {"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": cpu, "memory": mem}}
    if shape == "limits-only":           # defaulting copies limits into requests
        return {"limits": {"cpu": cpu, "memory": mem}}
    if shape == "memory-request":
        return {"requests": {"memory": mem}}
    if shape == "cpu-only":
        return {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
    if shape == "no-cpu-limit":         # memory request == limit, cpu request only
        return {"requests": {"cpu": cpu, "memory": mem}, "limits": {"memory": mem}}
    if shape == "burst":                 # requests below limits, per resource
        mem_lim = _mem(r, int(parse_quantity(mem) // 2 ** 20) + 64, int(parse_quantity(mem) // 2 ** 20) * 2 + 64,
                       decimal=decimal)
        which = r.choice(("both", "cpu", "memory"))
        req_cpu = cpu if which == "memory" else r.choice(("100m", "250m", "50m"))
        lim_cpu = cpu if which == "memory" else _cpu_above(r, req_cpu)
        return {"requests": {"cpu": req_cpu, "memory": mem},
                "limits": {"cpu": lim_cpu, "memory": mem if which == "cpu" else mem_lim}}
    if shape == "huge-request":          # request close to the node: the clamp at 3
        return {"requests": {"memory": "__huge__"}, "limits": {"memory": "__huge__"}}
    raise ValueError(shape)


def _cpu_above(r, req: str) -> str:
    base = int(parse_quantity(req) * 1000)
    return f"{base * r.choice((2, 4, 8))}m"


def _container(r, name: str, shape: str, **kw) -> dict:
    c = {"name": name, "image": _IMAGES.get(name, "busybox:1.36")}
    res = _resources(r, shape, **kw)
    if res:
        c["resources"] = res
    return c


def _fill_huge(pod: dict, capacity: int, r) -> None:
    """Replace the ``__huge__`` placeholder by a request within 0.3% of the capacity."""
    for key in ("initContainers", "containers"):
        for c in pod.get(key, []):
            res = c.get("resources", {})
            for part in res.values():
                if part.get("memory") == "__huge__":
                    mi = capacity // 2 ** 20 - r.randrange(0, 24)
                    part["memory"] = f"{mi}Mi"


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    capacity_gi = r.choice((8, 16, 32, 64, 128, 256) if difficulty != "easy" else (8, 16, 32, 64))
    capacity = capacity_gi * GiB
    allocatable = None
    priority = None
    app = r.choice(_APPS)
    containers: list[dict] = []
    inits: list[dict] = []
    if difficulty == "easy":
        shape = r.choice(("none", "equal", "memory-request", "burst", "memory-request"))
        containers.append(_container(r, app, shape))
    elif difficulty == "medium":
        shapes = ("equal", "limits-only", "memory-request", "cpu-only", "no-cpu-limit", "burst", "none")
        first = r.choice(shapes + ("huge-request",))
        second = r.choice(shapes) if first != "huge-request" else "none"
        if r.random() < 0.3:             # a fully Guaranteed-looking pod, one by defaulting
            first, second = r.choice((("limits-only", "equal"), ("equal", "limits-only"),
                                      ("limits-only", "limits-only")))
        side = r.choice(_SIDECARS)
        containers += [_container(r, app, first), _container(r, side, second)]
        if r.random() < 0.25:
            priority = "system-cluster-critical"
    else:
        shapes = ("equal", "limits-only", "memory-request", "cpu-only", "no-cpu-limit", "burst", "none")
        decimal = r.random() < 0.5
        target = r.choice(("guaranteed", "burstable", "burstable", "besteffort-but-init"))
        n = r.randint(2, 3)
        names = [app] + r.sample(_SIDECARS, n - 1)
        if target == "guaranteed":
            cs = [r.choice(("equal", "limits-only")) for _ in names]
            init_shapes = [r.choice(("equal", "limits-only"))]
            if r.random() < 0.5:         # one init container that breaks it
                init_shapes[0] = r.choice(("memory-request", "no-cpu-limit"))
        elif target == "besteffort-but-init":
            cs = ["none"] * n
            init_shapes = [r.choice(("memory-request", "cpu-only", "none", "none"))]
        else:
            cs = [r.choice(shapes) for _ in names]
            cs[0] = r.choice(("burst", "memory-request", "no-cpu-limit", "equal"))
            init_shapes = [r.choice(shapes)]
        for name, shape in zip(names, cs):
            containers.append(_container(r, name, shape, decimal=decimal, big=name == app))
        init_name = r.choice(_INITS)
        inits.append(_container(r, init_name, init_shapes[0], decimal=decimal))
        if r.random() < 0.6:             # a native sidecar: an init container with restartPolicy Always
            side_shape = r.choice(("memory-request", "burst", "none", "equal"))
            if target == "besteffort-but-init" and init_shapes[0] == "none":
                side_shape = "none"          # a truly BestEffort pod, sidecar and all
            side = _container(r, "sidecar-" + r.choice(("log", "proxy", "agent")), side_shape, decimal=decimal)
            side["restartPolicy"] = "Always"
            inits.append(side)
        allocatable = capacity - r.choice((1, 2, 4)) * GiB - r.randrange(0, 512) * 2 ** 20
        priority = r.choice((None, None, "system-cluster-critical", SYSTEM_NODE_CRITICAL, "high-priority"))
    pod = {"name": f"{app}-{r.randrange(1000, 9999)}", "priorityClassName": priority,
           "initContainers": inits, "containers": containers}
    _fill_huge(pod, capacity, r)
    data = {"pod": pod, "node": {"capacity": f"{capacity_gi}Gi",
                                 "allocatable": None if allocatable is None else f"{allocatable // 2 ** 20}Mi"}}
    question = ("What is the pod's QoS class, and which oom_score_adj does the kubelet write for each "
                "of its containers (init containers included)?")
    node = f"The node has {capacity_gi}Gi of memory (capacity)"
    if allocatable is not None:
        node += f"; kubectl describe node shows allocatable memory {allocatable // 2 ** 20}Mi"
    text = "\n".join(["A pod is scheduled on a node.", node + ".", "", manifest(pod), "", question])
    return Problem(TOPIC, seed, difficulty, text, data, question)


def manifest(pod: dict) -> str:
    """The pod as the YAML a user would write (only the fields that matter, in the usual order)."""
    out = ["apiVersion: v1", "kind: Pod", "metadata:", f"  name: {pod['name']}", "spec:"]
    if pod.get("priorityClassName"):
        out.append(f"  priorityClassName: {pod['priorityClassName']}")
    for key in ("initContainers", "containers"):
        if not pod.get(key):
            continue
        out.append(f"  {key}:")
        for c in pod[key]:
            out.append(f"  - name: {c['name']}")
            out.append(f"    image: {c['image']}")
            if "restartPolicy" in c:
                out.append(f"    restartPolicy: {c['restartPolicy']}")
            res = c.get("resources")
            if not res:
                out.append("    resources: {}")
                continue
            out.append("    resources:")
            for kind in ("requests", "limits"):
                if kind in res:
                    out.append(f"      {kind}:")
                    out += [f"        {k}: {v}" for k, v in res[kind].items()]
    return "\n".join(out)


# --- solution --------------------------------------------------------------------------------

def _model_container(c: dict, init: bool) -> Container:
    res = c.get("resources", {})

    def values(kind):
        out = {}
        for name, q in res.get(kind, {}).items():
            x = parse_quantity(q)
            out[name] = -((-(x * 1000).numerator) // (x * 1000).denominator) if name == "cpu" \
                else -((-x.numerator) // x.denominator)
        return out
    return Container(c["name"], values("requests"), values("limits"),
                     sidecar=init and c.get("restartPolicy") == "Always")


def model_pod(data: dict) -> tuple[Pod, int]:
    """The problem's pod as :class:`courselib.model.qos.Pod`, and the memory capacity in bytes."""
    pod = data["pod"]
    model = Pod(pod["name"], tuple(_model_container(c, False) for c in pod["containers"]),
                tuple(_model_container(c, True) for c in pod.get("initContainers", [])),
                pod.get("priorityClassName"))
    return model, int(parse_quantity(data["node"]["capacity"]))


def _fmt(res: dict, name: str) -> str:
    v = res.get(name)
    if v is None:
        return "-"
    return f"{v}m" if name == "cpu" else f"{v} B"


def solve(problem: Problem) -> Solution:
    pod, capacity = model_pod(problem.data)
    defaulted = pod.defaulted()
    qos, rows = pod_oom_score_adj(pod, capacity)
    steps: list[str] = []
    everyone = [(c, d, False) for c, d in zip(pod.containers, defaulted.containers)] + \
               [(c, d, True) for c, d in zip(pod.init_containers, defaulted.init_containers)]
    filled = [f"{c.name}.{k}" for c, d, _ in everyone for k in QOS_RESOURCES
              if k not in c.requests and k in d.requests]
    steps.append("Defaulting first: a limit without a request gets request = limit [k8s-docs-qos]. "
                 + (f"Filled in: {', '.join(filled)}." if filled else "Nothing to fill in here."))
    rows_t = [("container", "init", "cpu req", "cpu lim", "mem req", "mem lim", "both limits?")]
    for c, d, init in everyone:
        kind = "sidecar" if c.sidecar else ("yes" if init else "no")
        both = all(d.limits.get(k, 0) > 0 for k in QOS_RESOURCES)
        rows_t.append((c.name, kind, _fmt(d.requests, "cpu"), _fmt(d.limits, "cpu"),
                       _fmt(d.requests, "memory"), _fmt(d.limits, "memory"), "yes" if both else "no"))
    steps.append("Only cpu and memory count, and init containers count like the others "
                 "(GetPodQOS):\n" + table(rows_t, indent=""))
    any_set = any(d.requests.get(k, 0) > 0 or d.limits.get(k, 0) > 0
                  for _, d, _ in everyone for k in QOS_RESOURCES)
    if qos == BESTEFFORT:
        why = "no container sets a cpu or memory request or limit: BestEffort."
    elif qos == GUARANTEED:
        why = ("every container has both a cpu and a memory limit, and the pod's summed requests equal "
               "its summed limits for both: Guaranteed.")
    else:
        missing = [c.name for c, d, _ in everyone if not all(d.limits.get(k, 0) > 0 for k in QOS_RESOURCES)]
        why = "something is set" + (" (only in an init container)" if any_set and all(
            not any(d.requests.get(k, 0) or d.limits.get(k, 0) for k in QOS_RESOURCES)
            for _, d, init in everyone if not init) else "") + ", but "
        why += (f"{', '.join(missing)} {'lacks' if len(missing) == 1 else 'lack'} a cpu or memory limit"
                if missing
                else "the summed requests differ from the summed limits") + ": Burstable."
    steps.append(f"QoS class: {why}")
    if pod.priority_class_name == SYSTEM_NODE_CRITICAL:
        steps.append("priorityClassName system-node-critical: the kubelet gives every container -997 "
                     "whatever the QoS class [k8s-kubelet-qos-policy].")
    elif pod.priority_class_name:
        steps.append(f"priorityClassName {pod.priority_class_name} changes nothing: only "
                     "system-node-critical forces -997 [k8s-kubelet-qos-policy].")
    if qos == GUARANTEED and pod.priority_class_name != SYSTEM_NODE_CRITICAL:
        steps.append(f"Guaranteed: every container gets guaranteedOOMScoreAdj = {GUARANTEED_OOM_SCORE_ADJ}.")
    elif qos == BESTEFFORT and pod.priority_class_name != SYSTEM_NODE_CRITICAL:
        steps.append(f"BestEffort: every container gets besteffortOOMScoreAdj = {BESTEFFORT_OOM_SCORE_ADJ}.")
    elif qos == BURSTABLE and pod.priority_class_name != SYSTEM_NODE_CRITICAL:
        alloc = problem.data["node"].get("allocatable")
        steps.append(f"Burstable: oom_score_adj = 1000 - 1000*memory_request/capacity (integer division), "
                     f"clamped to [3, 999]; capacity = {problem.data['node']['capacity']} = {capacity} B"
                     + (f" (the machine's capacity, not allocatable {alloc})" if alloc else "") + ".")
        min_regular = min(d.requests.get("memory", 0) for d in defaulted.containers)
        for (c, d, init), row in zip(everyone, rows):
            req = d.requests.get("memory", 0)
            raw = 1000 - (1000 * req) // capacity
            line = f"{c.name}: 1000 - 1000*{req}//{capacity} = {raw}"
            if c.sidecar:
                floor_ = 1000 - (1000 * min_regular) // capacity
                line += (f"; a sidecar is never above the smallest regular container "
                         f"(1000 - 1000*{min_regular}//{capacity} = {floor_}): min = {min(raw, floor_)}")
                raw = min(raw, floor_)
            if raw < 3:
                line += "; below 1000 + (-997) = 3, so 3 (the docs' 2 is stale [k8s-kubelet-qos-policy, k8s-docs-node-pressure])"
            elif raw == 1000:
                line += "; exactly 1000 would tie with BestEffort, so 999"
            steps.append(line + f" -> {row.oom_score_adj}")
    answer = {"qos_class": qos,
              "oom_score_adj": {row.name: row.oom_score_adj for row in rows}}
    steps.append("Under node memory pressure the kernel adds oom_score_adj × (totalpages/1000) to each "
                 "process's pages, so lower numbers are killed later.")
    return Solution(answer, steps)
