"""The real JobSet controller on the local control plane (``courselib kube up --with jobset``).

The manager is the ``jobset`` binary built from ``sigs.k8s.io/jobset`` (pinned in
``k8s/jobset/go.mod``, built by ``make setup-k8s`` next to the CRD and webhook manifests copied
from the module — never from this repository), run as one more process of the control plane,
recorded by PID and stopped first by ``courselib kube down``.

How it is wired, and why:

- **The CRD is JobSet's own** (``config/components/crd/bases``). The kustomization's patches make
  the API server call a conversion webhook; JobSet v0.12.0 serves one version (``v1alpha2``), so no
  conversion ever happens and the CRD is applied without them.
- **The webhooks are served for real, on loopback.** JobSet's mutating webhook defaults a JobSet
  and its validating webhook checks it (``config/components/webhook/manifests.yaml`` with the
  kustomization's JSON patches, names prefixed ``jobset-`` in namespace ``jobset-system`` as
  ``config/default`` does). JobSet's own certificate rotation writes its certificates to a fixed
  ``/tmp/k8s-webhook-server/serving-certs`` (``pkg/util/cert/cert.go`` L27), a folder every run on
  this machine would share and leave behind; so it is turned off (``internalCertManagement.enable:
  false``), as with cert-manager in a real cluster, and courselib makes the CA and the serving
  certificate in the control plane's own directory and puts the CA into the webhook
  configurations. The certificate names the Service ``jobset-webhook-service.jobset-system.svc``,
  an ``ExternalName`` → ``localhost`` Service (the API server then calls ``https://localhost:PORT``
  and checks that name), as for Kueue.
- **Loopback, non-default ports:** webhook ``extra+3``, health ``extra+4``, metrics ``extra+5``
  (JobSet's defaults are 9443, :8081, :8443 on every interface; Kueue takes extra..extra+2); no
  leader election.
"""
from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import subprocess
import time
from pathlib import Path

from courselib.errors import CourseError
from courselib.live.cleanup import alive
from courselib.live.daemons import check_ports
from courselib.live.kube.api import Api, ApiError
from courselib.live.kube.cluster import KubeUnavailable, http_ok
from courselib.live.kube.config import cache_dir
from courselib.live.kube.cluster import unavailable_reason as kube_unavailable_reason
from courselib.versions import pinned

#: The release the course runs: its row in courselib/data/versions.toml (a test keeps it,
#: k8s/jobset/go.mod and every recorded run in step).
JOBSET_VERSION = pinned("jobset").version
CONFIG_API = "config.jobset.x-k8s.io/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
SYSTEM_NAMESPACE = "jobset-system"
NAME_PREFIX = "jobset-"
WEBHOOK_SERVICE = "jobset-webhook-service"
ROLE = "jobset-manager"


def home() -> Path:
    return cache_dir() / f"jobset-{JOBSET_VERSION}"


def binary() -> Path:
    return home() / "bin" / "jobset"


def manifests() -> Path:
    return home() / "config"


def unavailable_reason() -> str | None:
    """``None`` if JobSet can run here (with the control plane), else the one-line reason."""
    why = kube_unavailable_reason()
    if why:
        return why
    if not os.access(binary(), os.X_OK) or not (manifests() / "crd" / "bases").is_dir():
        return (f"JobSet {JOBSET_VERSION} is not built here ({binary()} or its manifests missing); "
                "build it once with `make setup-k8s`")
    return None


def ports(shape) -> dict[str, int]:
    b = shape.ports["extra"] + 3
    return {"jobset-webhook": b, "jobset-health": b + 1, "jobset-metrics": b + 2}


def cert_dir(cp) -> Path:
    return cp.state_dir / "jobset-certs"


def manager_config(cp) -> dict:
    """The manager's Configuration (``config.jobset.x-k8s.io/v1alpha1``)."""
    p = ports(cp.shape)
    return {"apiVersion": CONFIG_API, "kind": "Configuration",
            "webhook": {"port": p["jobset-webhook"], "host": "127.0.0.1", "certDir": str(cert_dir(cp))},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{p['jobset-health']}"},
            "metrics": {"bindAddress": f"127.0.0.1:{p['jobset-metrics']}"},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 50, "burst": 100}}


# ----------------------------------------------------------------------------- manifests

def _yaml_docs(path: Path) -> list[dict]:
    import yaml
    with open(path) as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def crds() -> list[dict]:
    """JobSet's CRD (one served version: no conversion webhook needed)."""
    return [d for f in sorted((manifests() / "crd" / "bases").glob("*.yaml")) for d in _yaml_docs(f)]


def webhook_configurations(port: int, ca_bundle: str) -> list[dict]:
    """JobSet's webhook configurations, as its kustomization builds them (the JSON patches applied),
    named ``jobset-…``, calling the ExternalName Service at ``port`` with courselib's CA."""
    import yaml
    folder = manifests() / "webhook"
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    out = []
    for res in k.get("resources", []):
        for doc in _yaml_docs(folder / res):
            if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                continue
            doc = copy.deepcopy(doc)
            for p in k.get("patches", []) or []:
                target = p.get("target", {})
                if (target.get("kind"), target.get("name")) != (doc["kind"], doc["metadata"]["name"]):
                    continue
                for op in yaml.safe_load((folder / p["path"]).read_text()):
                    idx = int(op["path"].rsplit("/", 1)[1])
                    if op["op"] == "replace":
                        doc["webhooks"][idx] = op["value"]
            doc["metadata"]["name"] = NAME_PREFIX + doc["metadata"]["name"]
            for hook in doc.get("webhooks", []):
                svc = hook["clientConfig"]["service"]
                svc.update(name=NAME_PREFIX + svc["name"], namespace=SYSTEM_NAMESPACE, port=port)
                hook["clientConfig"]["caBundle"] = ca_bundle
            out.append(doc)
    return out


def service_manifest() -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": WEBHOOK_SERVICE, "namespace": SYSTEM_NAMESPACE,
                         "labels": {"app.kubernetes.io/name": "jobset"}},
            "spec": {"type": "ExternalName", "externalName": "localhost"}}


def make_certs(d: Path) -> str:
    """A CA and a serving certificate for the webhook Service's name; the CA as a base64 bundle."""
    d.mkdir(mode=0o700, exist_ok=True)
    for f in d.iterdir():
        f.unlink()

    def ssl(*args):
        res = subprocess.run(["openssl", *args], cwd=d, capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise CourseError(f"openssl {args[0]} failed: {res.stderr.strip().splitlines()[-1:]}")
    ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=courselib-jobset-ca")
    (d / "san.cnf").write_text(
        "[req]\ndistinguished_name=dn\n[dn]\n[ext]\n"
        f"subjectAltName=DNS:{WEBHOOK_SERVICE}.{SYSTEM_NAMESPACE}.svc,DNS:localhost,IP:127.0.0.1\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "tls.key", "-out", "tls.csr", "-subj", f"/CN={WEBHOOK_SERVICE}.{SYSTEM_NAMESPACE}.svc")
    ssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "tls.crt", "-days", "2", "-extfile", "san.cnf", "-extensions", "ext")
    for f in d.iterdir():
        f.chmod(0o600)
    return base64.b64encode((d / "ca.crt").read_bytes()).decode()


def _apply(api, path: str, body: dict) -> None:
    """Create ``body`` at ``path`` or, if it exists, replace it (keeping its resourceVersion)."""
    name = body["metadata"]["name"]
    try:
        api.raw("POST", path, body)
    except ApiError as err:
        if err.status != 409:
            raise
        cur = api.raw("GET", f"{path}/{name}")
        body = dict(body, metadata=dict(body["metadata"], resourceVersion=cur["metadata"]["resourceVersion"]))
        api.raw("PUT", f"{path}/{name}", body)


def install(api, port: int, ca_bundle: str) -> None:
    """Namespace, webhook Service, the CRD (established) and the webhook configurations."""
    with contextlib.suppress(ApiError):
        api.raw("POST", "/api/v1/namespaces", {"metadata": {"name": SYSTEM_NAMESPACE}})
    _apply(api, f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/services", service_manifest())
    names = []
    for crd in crds():
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
                raise CourseError(f"JobSet's CRD {name} was not established within 60 s")
            time.sleep(0.2)
    for hook in webhook_configurations(port, ca_bundle):
        kind = "mutatingwebhookconfigurations" if hook["kind"].startswith("Mutating") else \
            "validatingwebhookconfigurations"
        _apply(api, f"/apis/admissionregistration.k8s.io/v1/{kind}", hook)


# ----------------------------------------------------------------------------- up / down

def check_alive(cp) -> None:
    for p in cp.procs:
        if p.role == ROLE and not alive(p.pid):
            log = cp.log_tail(ROLE)
            raise CourseError(f"the JobSet manager (PID {p.pid}) exited" + (f": {log}" if log else ""),
                              hint=f"see {cp.state_dir}/log/{ROLE}.log")


def start(cp, *, timeout: float = 120.0, say=lambda m: None) -> None:
    """Install JobSet's CRD and webhooks and start its manager (recorded in ``cp.procs``)."""
    why = unavailable_reason()
    if why:
        raise KubeUnavailable(why)
    p = ports(cp.shape)
    check_ports(p.values(), what=" (JobSet's webhook, health and metrics)")
    api = Api(cp)
    ca = make_certs(cert_dir(cp))
    say(f"installing JobSet {JOBSET_VERSION}'s CRD and webhooks (namespace {SYSTEM_NAMESPACE})")
    install(api, p["jobset-webhook"], ca)
    cfg = cp.state_dir / "jobset-config.json"
    cfg.write_text(json.dumps(manager_config(cp), indent=1))
    say(f"starting the JobSet {JOBSET_VERSION} manager (webhook 127.0.0.1:{p['jobset-webhook']})")
    cp.spawn(ROLE, [str(binary()), "--config", str(cfg), "--kubeconfig", str(cp.state_dir / "extra.kubeconfig"),
                    "--zap-log-level", "3"], env=cp.env())
    try:
        cp.wait_for(lambda: check_alive(cp) or http_ok(f"http://127.0.0.1:{p['jobset-health']}/readyz"),
                    timeout, "the JobSet manager answering /readyz", interval=0.3)
    except BaseException:
        stop(cp)
        raise


def stop(cp, *, say=lambda m: None) -> None:
    """Stop the manager (by PID) and forget it; the CRD and webhooks stay for a restart."""
    mine = [p for p in cp.procs if p.role == ROLE]
    _, left = cp.stop([mine])
    if left:
        raise CourseError(f"the JobSet manager (PID {left}) would not stop")
    cp.procs = [p for p in cp.procs if p.role != ROLE]
    cp.save()
    say("stopped the JobSet manager")
