"""Read the pods in a Kubernetes manifest, just far enough to compute QoS and ``oom_score_adj``.

Accepts a Pod, or any workload that carries a pod template: ``spec.template`` (Job,
Deployment, StatefulSet, ReplicaSet, DaemonSet), ``spec.jobTemplate.spec.template`` (CronJob),
``spec.tasks[].template`` (Volcano Job) and ``spec.<x>ReplicaSpecs.<role>.template`` (Kubeflow).
Reads each container's cpu/memory ``requests`` and ``limits``, the pod-level ``spec.resources``
(Kubernetes v1.34+) and the pod's ``priorityClassName``; a bad quantity or a missing
``containers`` list is one located line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from courselib.errors import InputError
from courselib.io.policy import check_count
from courselib.io.yamlfile import load_all_text, read_text
from courselib.model.qos import Container, Pod, Resources

_SUFFIX = {
    "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10 ** 3), "M": Fraction(10 ** 6), "G": Fraction(10 ** 9), "T": Fraction(10 ** 12),
    "P": Fraction(10 ** 15), "E": Fraction(10 ** 18),
    "Ki": Fraction(2 ** 10), "Mi": Fraction(2 ** 20), "Gi": Fraction(2 ** 30), "Ti": Fraction(2 ** 40),
    "Pi": Fraction(2 ** 50), "Ei": Fraction(2 ** 60),
}
_QTY = re.compile(r"^([+]?[0-9]*\.?[0-9]+)(?:([eE][-+]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse_quantity(value) -> Fraction:
    """A Kubernetes resource quantity (``500m``, ``1``, ``0.5``, ``2Gi``, ``129e6``) as an exact number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{value!r} is not a quantity", hint="write e.g. 500m, 1, 256Mi, 2Gi")
    m = _QTY.match(str(value).strip())
    if not m:
        raise InputError(f"{value!r} is not a Kubernetes quantity",
                         hint="memory: 256Mi, 2Gi or bytes; cpu: 500m or 1 (suffixes are case-sensitive)")
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * _SUFFIX[m.group(3) or ""]


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


@dataclass(frozen=True)
class PodReading:
    """One pod (template) found in a file: where it was, and the model pod."""

    file: str
    line: int | None
    kind: str
    name: str
    where: str          # e.g. "spec.template" or "spec.tasks[0].template"
    pod: Pod


def _resources(c: dict, *, file: str, where: str) -> tuple[dict[str, int], dict[str, int]]:
    res = c.get("resources") or {}
    if not isinstance(res, dict):
        raise InputError("expected a mapping with requests/limits", file=file,
                         line=getattr(c, "line_of", lambda k: None)("resources"), field=f"{where}.resources")
    out = []
    for kind in ("requests", "limits"):
        block = res.get(kind) or {}
        if not isinstance(block, dict):
            raise InputError("expected a mapping such as {cpu: 500m, memory: 256Mi}", file=file,
                             line=res.line_of(kind) if hasattr(res, "line_of") else None,
                             field=f"{where}.resources.{kind}")
        values = {}
        for name in ("cpu", "memory"):
            if name not in block or block[name] is None:
                continue
            try:
                q = parse_quantity(block[name])
            except InputError as err:
                raise InputError(err.message, file=file,
                                 line=block.line_of(name) if hasattr(block, "line_of") else None,
                                 field=f"{where}.resources.{kind}.{name}", hint=err.hint) from None
            # Kubernetes rounds up: Value() for memory bytes, MilliValue() for cpu
            values[name] = _ceil(q * 1000) if name == "cpu" else _ceil(q)
        out.append(values)
    return out[0], out[1]


def _containers(spec: dict, key: str, *, file: str, where: str) -> tuple[Container, ...]:
    items = spec.get(key) or []
    if not isinstance(items, list):
        raise InputError("expected a list of containers", file=file,
                         line=spec.line_of(key) if hasattr(spec, "line_of") else None, field=f"{where}.{key}")
    check_count("containers", len(items), file=file, field=f"{where}.{key}",
                line=spec.line_of(key) if hasattr(spec, "line_of") else None)
    out = []
    for i, c in enumerate(items):
        cw = f"{where}.{key}[{i}]"
        if not isinstance(c, dict):
            raise InputError("expected a container (name, image, resources)", file=file,
                             line=items.line_of(i) if hasattr(items, "line_of") else None, field=cw)
        requests, limits = _resources(c, file=file, where=cw)
        sidecar = key == "initContainers" and c.get("restartPolicy") == "Always"
        out.append(Container(str(c.get("name", f"{key}[{i}]")), requests, limits, sidecar))
    return tuple(out)


def _pod(spec, *, file: str, where: str, name: str) -> Pod:
    if not isinstance(spec, dict):
        raise InputError("expected a pod spec (a mapping with 'containers')", file=file,
                         line=getattr(spec, "line", None), field=where)
    if not spec.get("containers"):
        raise InputError("a pod needs at least one container", file=file,
                         line=getattr(spec, "line", None), field=f"{where}.containers",
                         hint="add 'containers: [{name: app, image: ..., resources: ...}]'")
    pcn = spec.get("priorityClassName")
    pod_resources = None
    if spec.get("resources") is not None:   # pod-level resources: {} is set but empty
        requests, limits = _resources(spec, file=file, where=where)
        blocks = [spec["resources"].get(k) for k in ("requests", "limits")] \
            if isinstance(spec["resources"], dict) else []
        huge = frozenset(str(n) for b in blocks if isinstance(b, dict) for n in b
                         if str(n).startswith("hugepages-"))
        pod_resources = Resources(requests, limits, huge)
    return Pod(name, _containers(spec, "containers", file=file, where=where),
               _containers(spec, "initContainers", file=file, where=where),
               str(pcn) if pcn is not None else None, pod_resources)


def _templates(doc: dict) -> list[tuple[str, object]]:
    """``(where, pod spec)`` for every pod template in a workload document."""
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return []
    if doc.get("kind") == "Pod":
        return [("spec", spec)]
    out = []
    if isinstance(spec.get("template"), dict):
        out.append(("spec.template.spec", spec["template"].get("spec")))
    jt = spec.get("jobTemplate")
    if isinstance(jt, dict) and isinstance(jt.get("spec"), dict) and isinstance(jt["spec"].get("template"), dict):
        out.append(("spec.jobTemplate.spec.template.spec", jt["spec"]["template"].get("spec")))
    tasks = spec.get("tasks")
    if isinstance(tasks, list):
        for i, t in enumerate(tasks):
            if isinstance(t, dict) and isinstance(t.get("template"), dict):
                out.append((f"spec.tasks[{i}].template.spec", t["template"].get("spec")))
    for key, value in spec.items():
        if str(key).endswith("ReplicaSpecs") and isinstance(value, dict):
            for role, rs in value.items():
                if isinstance(rs, dict) and isinstance(rs.get("template"), dict):
                    out.append((f"spec.{key}.{role}.template.spec", rs["template"].get("spec")))
    return out


def read_pods_text(text: str, *, file: str = "<pod>") -> list[PodReading]:
    """Every pod and pod template in a (multi-document) YAML text."""
    out = []
    for doc in load_all_text(text, file=file):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError("expected a Kubernetes object (kind, metadata, spec)", file=file,
                             line=getattr(doc, "line", None))
        kind = str(doc.get("kind", "?"))
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        name = str(meta.get("name") or meta.get("generateName") or "?")
        for where, spec in _templates(doc):
            out.append(PodReading(file, getattr(spec, "line", None), kind, name, where,
                                  _pod(spec, file=file, where=where, name=name)))
    if not out:
        raise InputError("no Pod and no pod template (spec.template) found", file=file,
                         hint="give a Pod, or a Job/Deployment/StatefulSet with spec.template")
    return out


def read_pods(path) -> list[PodReading]:
    """Every pod and pod template in the YAML file at ``path``."""
    return read_pods_text(read_text(path, "pod"), file=str(path))
