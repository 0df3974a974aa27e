"""Is Kubernetes' own gang scheduling on? Ask the API server, not the manifest (issue 30).

A pod joins its gang by ``spec.schedulingGroup.podGroupName`` (v1.36 and later; v1.35 had
``spec.workloadRef``). While the ``GenericWorkload`` feature gate is off — the default in every
release so far, v1.37.2 included (``pkg/features/kube_features.go`` L1622–1625) — the API server does
**not** refuse that field: it accepts the object and silently drops it (``pkg/api/pod/util.go``
L2127–2133, ``dropDisabledSchedulingGroup``; v1.35.4's ``dropDisabledWorkloadRef``, L1834–1840, did
the same to ``workloadRef``), and the PodGroup kind itself is not served
(``scheduling.k8s.io/v1beta1`` is off unless ``--runtime-config`` turns it on,
``pkg/controlplane/instance.go`` L501–507). The Job then runs as a plain Job whose pods are
scheduled one at a time — a gang the reader thinks they have and do not.

:func:`check` asks a running control plane exactly that, with a server-side dry run of the book's
example (``examples/files/gang-kubernetes-v1.37.yaml``, :data:`EXAMPLE`: a PodGroup and a Job whose pods name it):
the PodGroup accepted, not served or rejected; ``schedulingGroup`` kept, dropped or rejected.
:func:`source` shows it live on a control plane with the asked-for gate setting, else the run
recorded on one (``kube-gang-gate-off.json``, ``kube-gang-gate-on.json``).
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.live import recorded
from courselib.live.kube import cluster as kube
from courselib.live.kube.result import LIVE_ENV
from courselib.live.kube.validate import Finding, validate_files

FIELD = "spec.template.spec.schedulingGroup"
RECORDED_BY = "courselib.live.kube.gatecheck.record"


#: The book's PodGroup + Job, in the repository's examples/files/.
EXAMPLE = "gang-kubernetes-v1.37.yaml"


@dataclass
class GateCheck:
    """What the API server did with a PodGroup and a Job whose pods name it."""
    gang: bool                 # the control plane's GenericWorkload gate (and v1beta1 API)
    kubernetes: str
    podgroup: str              # "accepted", "not served" or "rejected"
    scheduling_group: str      # "kept", "dropped" or "rejected"
    findings: list = field(default_factory=list)   # [Finding.to_dict()]

    @property
    def silently_dropped(self) -> bool:
        return self.scheduling_group == "dropped"

    def text(self) -> str:
        gate = "on" if self.gang else "off (the default)"
        lines = [f"Kubernetes {self.kubernetes}, GenericWorkload {gate}:",
                 f"- the PodGroup: {self.podgroup}",
                 f"- the Job's spec.template.spec.schedulingGroup: {self.scheduling_group}"]
        if self.silently_dropped:
            lines.append("  (accepted without a word: the pods would be scheduled one at a time, as "
                         "pods of no gang)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return asdict(self)


def judge(findings: list[Finding], *, gang: bool, kubernetes: str) -> GateCheck:
    """The verdict from a dry run of :data:`EXAMPLE`."""
    pg = next(f for f in findings if f.kind == "PodGroup")
    job = next(f for f in findings if f.kind == "Job")
    podgroup = "not served" if not pg.validated else ("rejected" if pg.rejected else "accepted")
    if job.rejected:
        sg = "rejected"
    else:
        sg = "dropped" if any(d["field"] == FIELD for d in job.dropped) else "kept"
    return GateCheck(gang, kubernetes, podgroup, sg, [f.to_dict() for f in findings])


def check(cp, file) -> GateCheck:
    """Dry-run ``file`` (a PodGroup and a Job whose pods name it: :data:`EXAMPLE`) on ``cp``."""
    findings = validate_files(cp, [str(file)])
    return judge(findings, gang=cp.shape.gang, kubernetes=cp.versions.get("kubernetes", "?"))


def recording_name(gang: bool) -> str:
    return f"kube-gang-gate-{'on' if gang else 'off'}.json"


def record(path, result: GateCheck) -> Path:
    """Write a check as JSON (the book's recorded run); never overwrites a file."""
    return recorded.write(path, {"recorded_by": RECORDED_BY,
                                 "recorded_on": f"{recorded.machine_note()}, Kubernetes {result.kubernetes}",
                                 "recorded_at": time.strftime("%Y-%m-%d", time.gmtime()),
                                 "versions": {"kubernetes": result.kubernetes},
                                 "check": result.to_dict()})


def load_recorded(gang: bool) -> tuple[GateCheck, dict]:
    data = recorded.load(recording_name(gang))
    return GateCheck(**data["check"]), data


def source(gang: bool, file) -> recorded.Source[GateCheck]:
    """``file`` (:data:`EXAMPLE`) live on a running control plane whose gate is ``gang`` (with
    ``COURSELIB_LIVE=1``), else the recording made on one."""
    up: list = []

    def unavailable() -> str | None:
        if os.environ.get(LIVE_ENV) != "1":
            return f"{LIVE_ENV} is not 1"
        why = kube.unavailable_reason()
        if why:
            return why
        cp = kube.running()
        if cp is None:
            return "no local control plane is up (`courselib kube up` starts one)"
        if cp.shape.gang != gang:
            return (f"the local control plane runs with GenericWorkload {'on' if cp.shape.gang else 'off'}, "
                    f"this run needs it {'on' if gang else 'off'}")
        up.append(cp)
        return None

    def recording() -> recorded.Recording[GateCheck]:
        result, data = load_recorded(gang)
        return recorded.Recording(result, data["recorded_on"], data["recorded_at"])
    return recorded.Source(lambda: check(up[0], file), recording, unavailable)
