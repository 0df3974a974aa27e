"""What the pinned Kubernetes says about itself, read from its own source in the Go module cache.

The course names one version (:data:`courselib.live.kube.KUBERNETES_VERSION`) and teaches what
*that* version does. Its feature gates' defaults live in ``pkg/features/kube_features.go``: each gate
maps to a list of ``{Version, Default, PreRelease}`` specs, and the one in force is the last whose
version is not newer than the binary's. :func:`feature_gates` reads that file from the module cache
(``go env GOMODCACHE``; filled by ``make setup-k8s``), with the line each spec is on, so the book can
cite it. Where the module cache is absent (Binder), :func:`feature_gates_or_recorded` falls back to a
recording made by the same function (``courselib kube gates --record``), labelled as such.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from courselib.errors import CourseError
from courselib.live import recorded
from courselib.live.kube.cluster import KUBERNETES_VERSION

#: The gates the course discusses, in the order it discusses them.
COURSE_GATES = ("GenericWorkload", "WorkloadWithJob", "TopologyAwareWorkloadScheduling",
                "CompositePodGroup", "PodGroupPreemptionPolicy", "SchedulerPopFromBackoffQ",
                "OpportunisticBatching", "JobManagedBy")
RECORDING = "kube-feature-gates.json"
FEATURES_FILE = "pkg/features/kube_features.go"


@dataclass(frozen=True)
class Gate:
    """One feature gate as the pinned version sets it: its default, stage, since when, and where."""
    name: str
    default: bool
    stage: str  # ALPHA, BETA, GA, DEPRECATED
    since: str  # the version of the spec in force, e.g. "1.37"
    locked: bool
    line: int  # of that spec in kube_features.go
    history: tuple  # ((version, default, stage), ...) every spec listed


def module_dir(version: str = KUBERNETES_VERSION) -> Path:
    env = os.environ.get("GOMODCACHE")
    if not env:
        try:
            env = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                                 timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            env = ""
    base = Path(env) if env else Path.home() / "go" / "pkg" / "mod"
    return base / f"k8s.io/kubernetes@{version}"


_SPEC = re.compile(r'\{Version:\s*version\.MustParse\("(\d+)\.(\d+)"\),\s*Default:\s*(true|false),\s*'
                   r'PreRelease:\s*featuregate\.(\w+)(,\s*LockToDefault:\s*(true|false))?')


def parse_feature_gates(text: str, binary: str) -> dict[str, Gate]:
    """Every gate of ``defaultVersionedKubernetesFeatureGates`` in ``text``, as of ``binary`` (1.37)."""
    major, minor = (int(x) for x in binary.split("."))
    start = text.find("defaultVersionedKubernetesFeatureGates")
    if start < 0:
        raise CourseError(f"{FEATURES_FILE}: no defaultVersionedKubernetesFeatureGates map")
    base_line = text.count("\n", 0, start) + 1
    body = text[start:]
    out: dict[str, Gate] = {}
    name, specs = None, []
    for k, raw in enumerate(body.splitlines()):
        line = raw.strip()
        m = re.match(r"^(?:\w+\.)?(\w+):\s*\{$", line)
        if m:
            name, specs = m.group(1), []
            continue
        s = _SPEC.search(line)
        if s and name:
            specs.append(((int(s.group(1)), int(s.group(2))), s.group(3) == "true", s.group(4).upper(),
                          s.group(6) == "true", base_line + k))
            continue
        if line == "}," and name:
            live = [sp for sp in specs if sp[0] <= (major, minor)]
            if live:
                v, default, stage, locked, at = live[-1]
                out[name] = Gate(name, default, stage, f"{v[0]}.{v[1]}", locked, at,
                                 tuple((f"{a}.{b}", d, st) for (a, b), d, st, _, _ in specs))
            name = None
        if line.startswith("}") and not line.startswith("},") and name is None and out:
            break
    return out


def feature_gates(names=COURSE_GATES, version: str = KUBERNETES_VERSION) -> list[Gate]:
    """The named gates' state in ``version``, read from its source in the module cache."""
    path = module_dir(version) / FEATURES_FILE
    try:
        text = path.read_text()
    except OSError:
        raise CourseError(f"the Kubernetes {version} source is not in the Go module cache ({path})",
                          hint="run `make setup-k8s` (it downloads the pinned modules)") from None
    binary = ".".join(version.lstrip("v").split(".")[:2])
    gates = parse_feature_gates(text, binary)
    missing = [n for n in names if n not in gates]
    if missing:
        raise CourseError(f"{FEATURES_FILE} of {version} has no gate {missing[0]}",
                          hint="the course's list of gates is out of date for this version")
    return [gates[n] for n in names]


def record(path, gates: list[Gate], version: str = KUBERNETES_VERSION) -> Path:
    return recorded.write(path, {"recorded_by": "courselib kube gates --record", "version": version,
                                 "file": FEATURES_FILE,
                                 "gates": [asdict(g) for g in gates]})


def feature_gates_or_recorded(names=COURSE_GATES) -> tuple[list[Gate], str | None]:
    """The gates from the module cache, else the shipped recording and a label saying so."""
    try:
        return feature_gates(names), None
    except CourseError as err:
        data = recorded.load(RECORDING)
        gates = [Gate(**{**g, "history": tuple(tuple(h) for h in g["history"])}) for g in data["gates"]]
        by = {g.name: g for g in gates}
        return [by[n] for n in names if n in by], (
            f"RECORDED from {data['file']} of Kubernetes {data['version']} (`courselib kube gates "
            f"--record`), shown because {err}")


def format_gates(gates: list[Gate], version: str = KUBERNETES_VERSION) -> str:
    lines = [f"Kubernetes {version}, {FEATURES_FILE}: the spec in force for {version}",
             f"{'feature gate':<34} {'default':<8} {'stage':<11} {'since':<6} line"]
    for g in gates:
        lines.append(f"{g.name:<34} {'on' if g.default else 'off':<8} "
                     f"{g.stage.lower() + (' (locked)' if g.locked else ''):<11} {g.since:<6} {g.line}")
    return "\n".join(lines)
