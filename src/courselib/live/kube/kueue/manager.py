"""Real Kueue's manager on the local control plane (``courselib kube up --with kueue``).

The manager is the ``kueue`` binary built from ``sigs.k8s.io/kueue`` (pinned in
``k8s/kueue/go.mod``, built by ``make setup-k8s`` next to its own CRDs and webhook manifests, copied
from the module — never from this repository). It runs against the local API server as one more
process of the control plane, recorded by PID and stopped first by ``courselib kube down``.

How it is wired, and why:

- **CRDs and webhooks are Kueue's own**, as its ``config/default`` kustomization assembles them:
  the CRD bases with the conversion-webhook patches listed in ``config/components/crd/
  kustomization.yaml``, the webhook configurations of ``config/components/webhook/manifests.yaml``
  with that kustomization's patches, everything renamed ``kueue-…`` in namespace
  ``kueue-system`` (``config/default/kustomization.yaml``: ``namePrefix: kueue-``).
- **Webhooks are served for real, on loopback.** Kueue's internal certificate management (on by
  default) makes the serving certificate and injects its CA into the webhook configurations and
  CRDs, as in a real cluster. The certificate names the Service ``kueue-webhook-service.
  kueue-system.svc``; that Service is of type ``ExternalName`` → ``localhost``, so the API server
  (``ResolveCluster`` in k8s.io/apiserver ``pkg/util/proxy/proxy.go``: an ExternalName service is
  reached at its external name and the webhook's port) calls ``https://localhost:PORT`` and checks
  the certificate against the service name. Kueue waits for the certificate to appear in its
  ``certDir`` (cert-controller's ``ensureCertsMounted``): a kubelet would mount the Secret there;
  with no kubelet, courselib copies the Secret's files, once, as a kubelet would. So Jobs are
  created as a user creates them — with the ``kueue.x-k8s.io/queue-name`` label only — and Kueue's
  own mutating webhook suspends them (``suspend: true`` by hand is not needed).
- **Loopback, non-default ports:** webhook ``extra``, health ``extra+1``, metrics ``extra+2``
  (Kueue's defaults are 9443, :8081, :8443 on every interface); no leader election; the
  visibility server (feature ``VisibilityOnDemand``, beta and on in v0.17) is turned off, as it
  would listen on every interface.
- **Config API ``config.kueue.x-k8s.io/v1beta2``**, the version Kueue v0.17 ships and stores,
  decoded strictly (``pkg/config/config.go`` L57: an unknown field such as v1beta1's
  ``waitForPodsReady.enable`` is refused). Its defaults, read from ``apis/config/v1beta2/defaults.go``
  L97–103 and ``pkg/config/validation.go`` L201–208 of v0.17.1: with ``waitForPodsReady`` present it
  is on, and ``timeout`` **must be given** ("must be specified"; no default in v0.17 — the 30-minute
  default, and waitForPodsReady on without the block, came with v0.19: v0.19.2
  ``apis/config/v1beta2/defaults.go`` L48, L99–112); ``blockAdmission`` false; ``recoveryTimeout`` =
  ``timeout``; ``requeuingStrategy.timestamp`` ``Eviction``; backoff base 60 s, max 3600 s; no
  backoff limit. (``v1beta1``: ``enable: true`` gives a 5-minute timeout and ``blockAdmission`` true
  — ``apis/config/v1beta1/defaults.go`` L46, L97–101.) :func:`load_config` asks the real manager
  binary how it reads a configuration, without a control plane.
"""
from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import ssl
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.live.daemons import check_ports
from courselib.live.kube.api import Api, ApiError
from courselib.live.kube.cluster import KubeUnavailable, http_ok
from courselib.live.kube.config import cache_dir
from courselib.live.kube.cluster import unavailable_reason as kube_unavailable_reason
from courselib.model.policies.kueue import DEFAULT_ON_SINCE, kueue_minor
from courselib.model.policies.kueue import FLAVOR as MODEL_FLAVOR
from courselib.versions import pinned

#: The release the course runs: its row in courselib/data/versions.toml (a test keeps it, k8s/kueue/go.mod
#: and every recorded run in step).
KUEUE_VERSION = pinned("kueue").version
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
SYSTEM_NAMESPACE = "kueue-system"
NAME_PREFIX = "kueue-"
WEBHOOK_SERVICE = "kueue-webhook-service"
WEBHOOK_SECRET = "kueue-webhook-server-cert"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FLAVOR = MODEL_FLAVOR    # the model names the flavor in its refusals, as Kueue does
ROLE = "kueue-manager"


# ----------------------------------------------------------------------------- what is built

def home() -> Path:
    return cache_dir() / f"kueue-{KUEUE_VERSION}"


def binary() -> Path:
    return home() / "bin" / "kueue"


def manifests() -> Path:
    return home() / "config"


def binary_reason() -> str | None:
    """``None`` if the manager binary is built here, else the one-line reason (what
    :mod:`courselib.live.kube.kueue.config` needs: no control plane)."""
    if not os.access(binary(), os.X_OK):
        return (f"Kueue {KUEUE_VERSION} is not built here ({binary()} is missing); "
                "build it once with `make setup-k8s`")
    return None


def unavailable_reason() -> str | None:
    """``None`` if Kueue can run here (with the control plane), else the one-line reason."""
    why = kube_unavailable_reason()
    if why:
        return why
    if not os.access(binary(), os.X_OK) or not all(
            (manifests() / sub / "kustomization.yaml").is_file() for sub in ("crd", "webhook", "internalcert")):
        return (f"Kueue {KUEUE_VERSION} is not built here ({binary()} or its manifests missing); "
                "build it once with `make setup-k8s`")
    return None


# ----------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class PodsReady:
    """The manager's ``waitForPodsReady``, in real seconds (``enabled=False``: left out).

    The defaults are short stand-ins for Kueue's real-time timers (a replay's clock is virtual:
    see :mod:`courselib.live.kube.kueue.replay`): long enough that a replay settles well inside them,
    short enough that an eviction costs seconds; the backoff cap keeps Kueue's own ratio to the
    base (3600 s / 60 s)."""
    enabled: bool = True
    timeout: int = 20
    backoff_base: int = 10
    backoff_max: int = 600
    backoff_limit: int | None = None
    block_admission: bool = False

    def __post_init__(self):
        for name in ("timeout", "backoff_base", "backoff_max"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise InputError(f"waitForPodsReady {name} {v!r}: a whole number of seconds ≥ 1",
                                 field=name)
        if self.backoff_limit is not None and (not isinstance(self.backoff_limit, int)
                                               or self.backoff_limit < 0):
            raise InputError(f"backoff limit {self.backoff_limit!r}: a count ≥ 0, or none",
                             field="backoff_limit")

    def to_config(self) -> dict | None:
        if not self.enabled:
            return None
        strategy = {"timestamp": "Eviction", "backoffBaseSeconds": self.backoff_base,
                    "backoffMaxSeconds": self.backoff_max}
        if self.backoff_limit is not None:
            strategy["backoffLimitCount"] = self.backoff_limit
        return {"timeout": f"{self.timeout}s", "blockAdmission": self.block_admission,
                "requeuingStrategy": strategy}

    @classmethod
    def from_json(cls, d: dict | None) -> "PodsReady":
        return cls(**d) if d else cls()


def ports(shape) -> dict[str, int]:
    b = shape.ports["extra"]
    return {"webhook": b, "health": b + 1, "metrics": b + 2}


def manager_config(cp, settings: PodsReady) -> dict:
    """The manager's Configuration (``config.kueue.x-k8s.io/v1beta2``)."""
    p = ports(cp.shape)
    cfg = {
        "apiVersion": CONFIG_API, "kind": "Configuration",
        "namespace": SYSTEM_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{p['health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{p['metrics']}"},
        "webhook": {"port": p["webhook"], "host": "127.0.0.1",
                    "certDir": str(cert_dir(cp))},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": True, "webhookServiceName": WEBHOOK_SERVICE,
                                   "webhookSecretName": WEBHOOK_SECRET},
        # the shipped config's client limits (config/components/manager/controller_manager_config.yaml)
        "clientConnection": {"qps": 50, "burst": 100},
        # batch/v1 Jobs only; the replay's label reaches the Workloads (so a replay watches its own)
        "integrations": {"frameworks": ["batch/job"] + (["jobset.x-k8s.io/jobset"] if "jobset" in cp.shape.with_
                                                         else []),
                         "labelKeysToCopy": ["courselib/replay"]},
        "featureGates": {"VisibilityOnDemand": False},
    }
    wfpr = settings.to_config()
    if wfpr is not None:
        cfg["waitForPodsReady"] = wfpr
    elif kueue_minor(KUEUE_VERSION) >= DEFAULT_ON_SINCE:
        # from v0.19 a configuration without the block runs it anyway (30 min): only the gate stops it
        cfg["featureGates"]["DisableWaitForPodsReady"] = True
    return cfg


def metrics(cp) -> str:
    """The manager's Prometheus metrics (its secure port; Kueue checks our token with the API
    server's TokenReview and SubjectAccessReview, as controller-runtime's filter does)."""
    token = json.loads(cp.kubeconfig.read_text())["users"][0]["user"]["token"]
    req = urllib.request.Request(f"https://127.0.0.1:{ports(cp.shape)['metrics']}/metrics",
                                 headers={"Authorization": f"Bearer {token}"})
    ctx = ssl._create_unverified_context()  # controller-runtime's own self-signed certificate
    with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
        return r.read().decode()


def cert_dir(cp) -> Path:
    return cp.state_dir / "kueue-certs"


# ----------------------------------------------------------------------------- manifests

def _yaml_docs(path: Path) -> list[dict]:
    import yaml
    with open(path) as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def _merge(base: dict, patch: dict) -> dict:
    """A strategic merge as kustomize does it for these patches: maps merge, lists of named
    entries (webhooks) merge by ``name``, anything else is replaced."""
    out = dict(base)
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        elif isinstance(v, list) and isinstance(out.get(k), list) and all(
                isinstance(x, dict) and "name" in x for x in v + out[k]):
            merged = [dict(x) for x in out[k]]
            for item in v:
                idx = next((i for i, x in enumerate(merged) if x["name"] == item["name"]), None)
                if idx is None:
                    merged.append(item)
                else:
                    merged[idx] = _merge(merged[idx], item)
            out[k] = merged
        else:
            out[k] = v
    return out


def _service_ref(ref: dict, port: int) -> dict:
    """``webhook-service`` in ``system`` → Kueue's deployed names, at our port."""
    ref = dict(ref)
    ref["name"] = NAME_PREFIX + ref["name"]
    ref["namespace"] = SYSTEM_NAMESPACE
    ref["port"] = port
    return ref


def _kustomization(folder: Path) -> tuple[list[str], list[dict]]:
    """The resources and the patches (file or inline) a kustomization lists."""
    import yaml
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    patches = []
    for p in k.get("patches", []) or []:
        if "path" in p:
            patches += _yaml_docs(folder / p["path"])
        elif "patch" in p:
            patches += [d for d in yaml.safe_load_all(p["patch"]) if d]
    return list(k.get("resources", []) or []), patches


def crds(port: int) -> list[dict]:
    """Kueue's CRDs as its kustomization builds them (bases + conversion-webhook patches)."""
    folder = manifests() / "crd"
    resources, patches = _kustomization(folder)
    out = []
    for res in resources:
        for doc in _yaml_docs(folder / res):
            for patch in patches:
                if patch.get("metadata", {}).get("name") == doc["metadata"]["name"]:
                    doc = _merge(doc, {"spec": patch.get("spec", {})})
            conv = doc.get("spec", {}).get("conversion", {}).get("webhook", {})
            if "clientConfig" in conv:
                conv["clientConfig"]["service"] = _service_ref(conv["clientConfig"]["service"], port)
            out.append(doc)
    return out


def webhook_configurations(port: int) -> list[dict]:
    """Kueue's Mutating/ValidatingWebhookConfigurations (kustomization patches applied)."""
    folder = manifests() / "webhook"
    resources, patches = _kustomization(folder)
    out = []
    for res in resources:
        for doc in _yaml_docs(folder / res):
            if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                continue  # the Service: replaced by an ExternalName one (service_manifest)
            for patch in patches:
                if (patch.get("kind"), patch.get("metadata", {}).get("name")) == \
                        (doc["kind"], doc["metadata"]["name"]):
                    doc = _merge(doc, {"webhooks": patch.get("webhooks", [])})
            doc = copy.deepcopy(doc)
            doc["metadata"]["name"] = NAME_PREFIX + doc["metadata"]["name"]
            for hook in doc.get("webhooks", []):
                hook["clientConfig"]["service"] = _service_ref(hook["clientConfig"]["service"], port)
            out.append(doc)
    return out


def service_manifest() -> dict:
    """The webhook Service: ExternalName → localhost (see the module docstring)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": WEBHOOK_SERVICE, "namespace": SYSTEM_NAMESPACE,
                         "labels": {"app.kubernetes.io/name": "kueue"}},
            "spec": {"type": "ExternalName", "externalName": "localhost"}}


# ----------------------------------------------------------------------------- up / down

def _apply(api, path: str, body: dict) -> None:
    """Create ``body`` at ``path`` or, if it exists, replace it (keeping its resourceVersion)."""
    name = body["metadata"]["name"]
    try:
        api.raw("POST", path, body)
    except ApiError as err:
        if err.status != 409:
            raise
        cur = api.raw("GET", f"{path}/{name}")
        body = dict(body, metadata=dict(body["metadata"],
                                        resourceVersion=cur["metadata"]["resourceVersion"]))
        api.raw("PUT", f"{path}/{name}", body)


def install(api, port: int) -> None:
    """Namespace, webhook Service, CRDs (established) and webhook configurations."""
    with contextlib.suppress(ApiError):
        api.raw("POST", "/api/v1/namespaces", {"metadata": {"name": SYSTEM_NAMESPACE}})
    _apply(api, f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/services", service_manifest())
    for doc in _yaml_docs(manifests() / "internalcert" / "secret.yaml"):
        # the empty Secret Kueue's certificate rotator fills (config/components/internalcert)
        body = {"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": NAME_PREFIX + doc["metadata"]["name"],
                             "namespace": SYSTEM_NAMESPACE}}
        with contextlib.suppress(ApiError):
            api.raw("POST", f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets", body)
    names = []
    for crd in crds(port):
        _apply(api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        names.append(crd["metadata"]["name"])
    deadline = time.monotonic() + 60
    for name in names:
        while True:
            cur = api.raw("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (cur.get("status") or {}).get("conditions") or []):
                break
            if time.monotonic() > deadline:
                raise CourseError(f"Kueue's CRD {name} was not established within 60 s")
            time.sleep(0.2)
    for hook in webhook_configurations(port):
        kind = "mutatingwebhookconfigurations" if hook["kind"].startswith("Mutating") else \
            "validatingwebhookconfigurations"
        _apply(api, f"/apis/admissionregistration.k8s.io/v1/{kind}", hook)


def _mount_secret(api, cp, deadline: float) -> None:
    """Copy Kueue's webhook certificate Secret into its certDir, as a kubelet mounts a Secret."""
    d = cert_dir(cp)
    path = f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets/{WEBHOOK_SECRET}"
    while True:
        check_alive(cp)
        try:
            data = api.raw("GET", path).get("data") or {}
        except ApiError as err:
            if err.status != 404:
                raise
            data = {}
        if data.get("tls.crt") and data.get("tls.key"):
            for key, value in data.items():
                f = d / key
                f.write_bytes(base64.b64decode(value))
                f.chmod(0o600)
            return
        if time.monotonic() > deadline:
            raise CourseError("Kueue made no webhook certificate in time",
                              hint=f"see {cp.state_dir}/log/{ROLE}.log")
        time.sleep(0.2)


def check_alive(cp) -> None:
    """A one-line error if the manager has exited (with its log's last error)."""
    for p in cp.procs:
        if p.role == ROLE and not p.is_ours():
            log = cp.log_tail(ROLE)
            raise CourseError(f"the Kueue manager (PID {p.pid}) exited" + (f": {log}" if log else ""),
                              hint=f"see {cp.state_dir}/log/{ROLE}.log")


def settings_of(cp) -> PodsReady | None:
    """The settings the running manager was started with (``None``: not started)."""
    f = cp.state_dir / "kueue-settings.json"
    try:
        return PodsReady.from_json(json.loads(f.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def start(cp, settings: PodsReady | None = None, *, timeout: float = 120.0, say=lambda m: None) -> None:
    """Install Kueue's CRDs and webhooks and start its manager (recorded in ``cp.procs``)."""
    settings = settings or PodsReady()
    why = unavailable_reason()
    if why:
        raise KubeUnavailable(why)
    p = ports(cp.shape)
    check_ports(p.values(), what=" (Kueue's webhook, health and metrics)")
    api = Api(cp)
    say(f"installing Kueue {KUEUE_VERSION}'s CRDs and webhooks (namespace {SYSTEM_NAMESPACE})")
    install(api, p["webhook"])
    d = cert_dir(cp)
    d.mkdir(mode=0o700, exist_ok=True)
    for f in d.iterdir():
        f.unlink()
    cfg = cp.state_dir / "kueue-config.json"
    cfg.write_text(json.dumps(manager_config(cp, settings), indent=1))
    (cp.state_dir / "kueue-settings.json").write_text(json.dumps(asdict(settings)))
    wfpr = settings.to_config()
    say(f"starting the Kueue {KUEUE_VERSION} manager (webhook 127.0.0.1:{p['webhook']}, "
        f"waitForPodsReady {'timeout ' + wfpr['timeout'] if wfpr else 'off'})")
    cp.spawn(ROLE, [str(binary()), "--config", str(cfg),
                    "--kubeconfig", str(cp.state_dir / "extra.kubeconfig"),
                    "--zap-log-level", "3"], env=cp.env())
    try:
        deadline = time.monotonic() + timeout
        _mount_secret(api, cp, deadline)
        cp.wait_for(lambda: check_alive(cp) or http_ok(f"http://127.0.0.1:{p['health']}/readyz"),
                    max(1.0, deadline - time.monotonic()), "the Kueue manager answering /readyz",
                    interval=0.3)
    except BaseException:
        stop(cp)
        raise


def stop(cp, *, say=lambda m: None) -> None:
    """Stop the manager (by PID) and forget it; the CRDs and webhooks stay for a restart."""
    mine = [p for p in cp.procs if p.role == ROLE]
    _, left = cp.stop([mine])
    if left:
        raise CourseError(f"the Kueue manager (PID {left}) would not stop")
    cp.procs = [p for p in cp.procs if p.role != ROLE]
    cp.save()
    say("stopped the Kueue manager")
