"""``courselib kube validate``: every document of a manifest, dry-run against the real API server.

Each document is sent as a server-side **dry run** (``dryRun=All``, ``fieldValidation=Strict``): the
API server runs defaulting, validation and admission exactly as for a real ``kubectl apply`` and
stores nothing. A rejection is printed as one located line per cause — file, line, document, field
and the server's own message — so a reader sees what a cluster would say about the file before it
is submitted. Schema-only checkers (``kubernetes-validate``) cannot catch what the server's
validation code checks, such as a Job's ``restartPolicy``.

Custom resources need their definitions: the Volcano PodGroup, Queue and Job kinds are defined by
courselib's own stand-in CRDs (``courselib/data/crds/volcano-standin.yaml``, written from Volcano's
API reference: Volcano's Go module is not served here, so its generated CRDs cannot be read);
a kind the server does not serve is reported as not validated, never as accepted.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from courselib.errors import CourseError
from courselib.io.yamlfile import load_all_text, read_text
from courselib.live import recorded
from courselib.live.kube import cluster as kube
from courselib.live.kube.api import Api, ApiError
from courselib.live.kube.cluster import NAMESPACE, ControlPlane
from courselib.live.kube.result import LIVE_ENV

#: API groups whose kinds come from courselib's stand-in CRDs.
STANDIN_GROUPS = {"scheduling.volcano.sh", "batch.volcano.sh"}


@dataclass
class Finding:
    file: str
    document: int  # 1-based
    line: int | None
    kind: str
    name: str
    rejected: bool
    validated: bool = True
    causes: list = field(default_factory=list)  # [{"field", "line", "message"}]
    message: str = ""
    dropped: list = field(default_factory=list)  # [{"field", "line"}]: accepted, but not stored

    def to_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        where = f"{self.file}:{self.line}" if self.line else self.file
        what = f"document {self.document} ({self.kind}/{self.name})"
        if not self.validated:
            return [f"{where}: {what}: not validated: {self.message}"]
        if not self.rejected:
            out = [f"{where}: {what}: accepted by the API server (dry run)"]
            for d in self.dropped:
                loc = f"{self.file}:{d['line']}" if d.get("line") else where
                out.append(f"{loc}: {what}: {d['field']}: accepted but DROPPED by the API server "
                           "(not stored: a field behind a feature gate that is off on this server)")
            return out
        if not self.causes:
            return [f"{where}: {what}: rejected: {self.message}"]
        out = []
        for c in self.causes:
            loc = f"{self.file}:{c['line']}" if c.get("line") else where
            out.append(f"{loc}: {what}: {c['field'] or '(object)'}: {c['message']}")
        return out

    def text(self) -> str:
        return "\n".join(self.lines())


def _path_line(doc, dotted: str) -> int | None:
    """The line of the deepest part of ``dotted`` (``spec.template.spec.restartPolicy``) in ``doc``."""
    node, line = doc, getattr(doc, "line", None)
    for part in dotted.replace("]", "").replace("[", ".").split("."):
        if not part:
            continue
        if isinstance(node, dict) and part in node:
            line = node.line_of(part) if hasattr(node, "line_of") else line
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            line = node.line_of(int(part)) if hasattr(node, "line_of") else line
            node = node[int(part)]
        else:
            break
    return line


class _Discovery:
    """Which resource (plural, namespaced) serves an apiVersion + kind, from the server's discovery."""

    def __init__(self, api: Api):
        self.api, self.cache = api, {}

    def resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        if api_version not in self.cache:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            try:
                data = self.api.raw("GET", path)
            except ApiError as err:
                if err.status == 404:
                    self.cache[api_version] = {}
                    return None
                raise
            self.cache[api_version] = {r["kind"]: (r["name"], r["namespaced"])
                                       for r in data.get("resources", []) if "/" not in r["name"]}
        return self.cache[api_version].get(kind)

    def forget(self, api_version: str) -> None:
        self.cache.pop(api_version, None)


def standin_crds() -> list[dict]:
    text = resources.files("courselib.data").joinpath("crds/volcano-standin.yaml").read_text()
    return [json.loads(json.dumps(d)) for d in load_all_text(text, file="volcano-standin.yaml") if d]


def ensure_standin_crds(api: Api, timeout: float = 30.0) -> None:
    """Create courselib's stand-in Volcano CRDs (once) and wait until they are served."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd in standin_crds():
        api.create(path, crd, ok_exists=True)
    deadline = time.monotonic() + timeout
    for crd in standin_crds():
        name = crd["metadata"]["name"]
        while True:
            got = api.raw("GET", f"{path}/{name}")
            # a CRD just created may come back with "conditions": null (seen on v1.37.2 in a busy run)
            conds = {c["type"]: c["status"] for c in (got.get("status") or {}).get("conditions") or []}
            if conds.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise CourseError(f"the stand-in CRD {name} was not established in {timeout:g} s")
            time.sleep(0.2)


def validate_docs(api: Api, docs: list, file: str, disc: _Discovery | None = None) -> list[Finding]:
    disc = disc or _Discovery(api)
    out = []
    for k, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        line = getattr(doc, "line", None)
        if not isinstance(doc, dict):
            out.append(Finding(file, k, line, "?", "?", True, message="not a mapping (a Kubernetes "
                               "object is apiVersion, kind, metadata, ...)"))
            continue
        kind, api_version = str(doc.get("kind", "?")), str(doc.get("apiVersion", ""))
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        name = str(meta.get("name") or meta.get("generateName") or "?")
        if not api_version or kind == "?":
            out.append(Finding(file, k, line, kind, name, True,
                               message="apiVersion and kind are required"))
            continue
        res = disc.resource(api_version, kind)
        if res is None:
            out.append(Finding(file, k, line, kind, name, False, validated=False,
                               message=f"the API server does not serve {kind} in {api_version} "
                                       "(no such built-in kind, and no CRD for it)"))
            continue
        plural, namespaced = res
        ns = meta.get("namespace") or NAMESPACE
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        path = f"{base}/namespaces/{ns}/{plural}" if namespaced else f"{base}/{plural}"
        body = json.loads(json.dumps(doc))
        if namespaced:
            body.setdefault("metadata", {})["namespace"] = ns
        try:
            stored = api.create(path, body, dry_run=True)
        except ApiError as err:
            if err.status == 404 and namespaced and ns != NAMESPACE:
                # the document's namespace does not exist here: check it in ours instead
                body["metadata"]["namespace"] = NAMESPACE
                try:
                    stored = api.create(f"{base}/namespaces/{NAMESPACE}/{plural}", body, dry_run=True)
                except ApiError as err2:
                    err = err2
                else:
                    out.append(Finding(file, k, line, kind, name, False,
                                       dropped=_dropped(doc, stored or {})))
                    continue
            causes = [{"field": c.get("field", ""), "line": _path_line(doc, c.get("field", "")),
                       "message": c.get("message", "")}
                      for c in (err.body.get("details") or {}).get("causes", []) or []]
            if not causes and err.body.get("message"):
                causes = []
            out.append(Finding(file, k, line, kind, name, True, causes=causes,
                               message=err.body.get("message", str(err))))
            continue
        out.append(Finding(file, k, line, kind, name, False, dropped=_dropped(doc, stored or {})))
    return out


def _dropped(sent, stored, path: str = "", top=None) -> list[dict]:
    """Keys of ``sent`` that the stored object lacks (defaulting adds fields; dropping is news)."""
    top = sent if top is None else top
    out: list[dict] = []
    if isinstance(sent, dict) and isinstance(stored, dict):
        for key, value in sent.items():
            where = f"{path}.{key}" if path else str(key)
            if where in ("metadata.namespace", "status"):
                continue
            if key not in stored:
                out.append({"field": where, "line": _path_line(top, where)})
            else:
                out += _dropped(value, stored[key], where, top)
    elif isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        for i, (a, b) in enumerate(zip(sent, stored)):
            out += _dropped(a, b, f"{path}[{i}]", top)
    return out


def validate_files(cp: ControlPlane, files: list[str]) -> list[Finding]:
    api = Api(cp)
    disc = _Discovery(api)
    parsed = []
    for f in files:
        docs = load_all_text(read_text(f, "manifest"), file=f)
        parsed.append((f, docs))
    groups = {str(d.get("apiVersion", "")).split("/")[0] for _, docs in parsed for d in docs
              if isinstance(d, dict)}
    if groups & STANDIN_GROUPS:
        ensure_standin_crds(api)
        for v in list(disc.cache):
            disc.forget(v)
    out = []
    for f, docs in parsed:
        out += validate_docs(api, docs, f, disc)
    return out


RECORDED_BY = "courselib kube validate --record"


def record(path, findings: list[Finding], versions: dict) -> Path:
    """Write a validation as JSON (the chapter's recorded run); never overwrites a file."""
    return recorded.write(path, {"recorded_by": RECORDED_BY, "recorded_on": recorded.machine_note(),
                                 "recorded_at": time.strftime("%Y-%m-%d", time.gmtime()),
                                 "versions": versions, "findings": [f.to_dict() for f in findings]})


def load_recorded(name: str) -> tuple[list[Finding], dict]:
    data = recorded.load(f"kube-validate-{name}.json")
    return [Finding(**f) for f in data["findings"]], data


def source(name: str, files: list[str]) -> recorded.Source[list[Finding]]:
    """Validate ``files`` on the local control plane if one is up (and ``COURSELIB_LIVE=1``), else
    the recording ``name`` (``courselib/data/recorded/kube-validate-NAME.json``;
    :func:`courselib.live.recorded.live_or_recorded`)."""

    up: list = []

    def unavailable() -> str | None:
        why = None if os.environ.get(LIVE_ENV) == "1" else f"{LIVE_ENV} is not 1"
        why = why or kube.unavailable_reason()
        if why is None:
            up.extend(filter(None, [kube.running()]))
            if not up:
                why = "no local control plane is up (`courselib kube up` starts one)"
        return why

    def recording() -> recorded.Recording[list[Finding]]:
        findings, data = load_recorded(name)
        return recorded.Recording(findings, f"Kubernetes {data['versions'].get('kubernetes')}, "
                                            f"{data['recorded_on']}", data["recorded_at"])
    return recorded.Source(lambda: validate_files(up[0], files), recording, unavailable)
