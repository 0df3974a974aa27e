"""What the local control plane is built from and how its daemons are told to run.

The versions pinned in ``k8s/`` and where ``make setup-k8s`` puts their binaries; a private
certificate authority, serving certificates and one bearer token per identity, made for each run;
the kubeconfigs, the scheduler's configuration and every daemon's command line
(:func:`argv_for`), with the feature gates the shape asks for (native gang scheduling's and the
extensions'). :mod:`courselib.live.kube.cluster` starts what this module describes.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from courselib.errors import CourseError
from courselib.live.daemons import cache_dir
from courselib.versions import pinned

#: The versions the course runs: their rows in courselib/data/versions.toml (a test keeps them,
#: k8s/kube/go.mod, k8s/etcd/go.mod and every recorded run in step).
KUBERNETES_VERSION = pinned("kubernetes").version
ETCD_VERSION = pinned("etcd").version
NAMESPACE = "allornothing"

#: Native gang scheduling in v1.37 (pkg/features/kube_features.go): the Workload/PodGroup API and
#: the scheduler's GangScheduling plugin (GenericWorkload, beta, off by default). ``kube up --gang``
#: turns it on. The Job controller's own integration (WorkloadWithJob, alpha, off) stays off: with it,
#: every new Job would get a PodGroup of its own (a "basic" one unless the Job asks for a gang,
#: pkg/api/job/util.go), while a replay gives each job its PodGroup explicitly.
GANG_FEATURE_GATES = ("GenericWorkload",)
GANG_RUNTIME_CONFIG = ("scheduling.k8s.io/v1beta1=true",)


# ----------------------------------------------------------------------------- binaries

BINARIES = {
    "etcd": ("etcd", ETCD_VERSION),
    "kube-apiserver": ("kube", KUBERNETES_VERSION),
    "kube-scheduler": ("kube", KUBERNETES_VERSION),
    "kube-controller-manager": ("kube", KUBERNETES_VERSION),
}


def binary(name: str) -> Path:
    component, version = BINARIES[name]
    return cache_dir() / f"{component}-{version}" / "bin" / name


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if not os.access(binary(name), os.X_OK)]


# ----------------------------------------------------------------------------- certificates

def _openssl(*args: str, cwd: Path) -> None:
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise CourseError(f"openssl {args[0]} failed: {res.stderr.strip().splitlines()[-1:]}")


def make_pki(d: Path) -> dict[str, str]:
    """A private CA, a serving certificate for 127.0.0.1/localhost, a service-account key pair,
    and one bearer token per identity (admin, scheduler, controller manager)."""
    pki = d / "pki"
    pki.mkdir(mode=0o700)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=courselib-kube-ca",
             cwd=pki)
    (pki / "san.cnf").write_text(
        "[req]\ndistinguished_name=dn\n[dn]\n[ext]\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "serving.key", "-out", "serving.csr", "-subj", "/CN=127.0.0.1", cwd=pki)
    _openssl("x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "serving.crt", "-days", "2", "-extfile", "san.cnf",
             "-extensions", "ext", cwd=pki)
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", "sa.key", cwd=pki)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    tokens = {who: os.urandom(24).hex() for who in ("admin", "scheduler", "controller-manager", "extra")}
    # static token file: token,user,uid,"groups". system:masters: this is a private, loopback-only
    # cluster where every identity may do everything.
    users = {"admin": "courselib-admin", "scheduler": "system:kube-scheduler",
             "controller-manager": "system:kube-controller-manager", "extra": "courselib-extra"}
    (pki / "tokens.csv").write_text("".join(
        f'{tok},{users[who]},{who},"system:masters"\n' for who, tok in tokens.items()))
    for f in pki.iterdir():
        f.chmod(0o600)
    return tokens


def write_kubeconfig(path: Path, server: str, ca: Path, token: str, user: str) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "courselib",
        "clusters": [{"name": "courselib", "cluster": {"server": server,
                                                       "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "courselib", "context": {"cluster": "courselib", "user": user,
                                                       "namespace": NAMESPACE}}],
    }, indent=1))
    path.chmod(0o600)


# ----------------------------------------------------------------------------- configuration

def scheduler_config(cp) -> str:
    """KubeSchedulerConfiguration: the default profile, no leader election. Only the queue's
    backoff is shortened (1 s instead of 1–10 s): it changes when a retry happens, never what
    it decides, and lets a replay settle in seconds."""
    return json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cp.state_dir / "scheduler.kubeconfig")},
        "leaderElection": {"leaderElect": False},
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 1,
    }, indent=1)


def feature_gates(shape) -> str:
    """``--feature-gates`` for the core components (native gang scheduling's, the extensions')."""
    return ",".join(f"{g}={'true' if on else 'false'}" for g, on in shape.feature_gates().items())


def argv_for(cp, role: str, tokens: dict[str, str] | None = None) -> list[str]:
    d, p = cp.state_dir, cp.shape.ports
    pki = d / "pki"
    gates = feature_gates(cp.shape)
    if role == "etcd":
        return [str(binary("etcd")), "--name", "courselib", "--data-dir", str(d / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{p['etcd']}",
                "--advertise-client-urls", f"http://127.0.0.1:{p['etcd']}",
                "--listen-peer-urls", f"http://127.0.0.1:{p['etcd-peer']}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{p['etcd-peer']}",
                "--initial-cluster", f"courselib=http://127.0.0.1:{p['etcd-peer']}",
                "--log-level", "warn",
                "--quota-backend-bytes", str(2 * 1024 ** 3), "--unsafe-no-fsync"]
    if role == "kube-apiserver":
        argv = [str(binary("kube-apiserver")),
                "--etcd-servers", f"http://127.0.0.1:{p['etcd']}",
                "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
                "--secure-port", str(p["kube-apiserver"]),
                "--tls-cert-file", str(pki / "serving.crt"),
                "--tls-private-key-file", str(pki / "serving.key"),
                "--client-ca-file", str(pki / "ca.crt"),
                "--token-auth-file", str(pki / "tokens.csv"),
                "--authorization-mode", "RBAC",
                "--service-account-issuer", f"https://127.0.0.1:{p['kube-apiserver']}",
                "--service-account-key-file", str(pki / "sa.pub"),
                "--service-account-signing-key-file", str(pki / "sa.key"),
                "--service-cluster-ip-range", "10.96.0.0/16",
                # No kubelet and no service accounts to mount: pods need no token.
                "--disable-admission-plugins", "ServiceAccount",
                # The `kubernetes` Service's endpoints would name the loopback address, which the
                # endpoint reconciler refuses; nothing in this cluster uses that Service.
                "--endpoint-reconciler-type", "none",
                "--cert-dir", str(d / "apiserver-certs"),
                "--profiling=false", "--v=1"]
        if gates:
            argv += ["--feature-gates", gates]
        if cp.shape.gang:
            argv += ["--runtime-config", ",".join(GANG_RUNTIME_CONFIG)]
        return argv
    if role == "kube-scheduler":
        argv = [str(binary("kube-scheduler")), "--config", str(d / "scheduler-config.json"),
                "--bind-address", "127.0.0.1", "--secure-port", str(p["kube-scheduler"]),
                "--cert-dir", str(d / "scheduler-certs"),
                "--authentication-kubeconfig", str(d / "scheduler.kubeconfig"),
                "--authorization-kubeconfig", str(d / "scheduler.kubeconfig"),
                "--authorization-always-allow-paths", "/healthz,/readyz,/livez,/metrics",
                "--v=2"]
        if gates:
            argv += ["--feature-gates", gates]
        return argv
    if role == "kube-controller-manager":
        argv = [str(binary("kube-controller-manager")),
                "--kubeconfig", str(d / "controller-manager.kubeconfig"),
                "--authentication-kubeconfig", str(d / "controller-manager.kubeconfig"),
                "--authorization-kubeconfig", str(d / "controller-manager.kubeconfig"),
                "--authorization-always-allow-paths", "/healthz,/readyz,/livez,/metrics",
                "--bind-address", "127.0.0.1", "--secure-port", str(p["kube-controller-manager"]),
                "--cert-dir", str(d / "controller-manager-certs"),
                "--leader-elect=false", "--use-service-account-credentials=false",
                # The Job controller (creates a Job's pods), the garbage collector (deletes them with
                # their Job). No node-lifecycle controller: fake nodes send no heartbeats and must
                # stay Ready.
                "--controllers", "job-controller,garbage-collector-controller"
                + (",podgroup-protection-controller" if cp.shape.gang else ""),
                "--v=1"]
        if cp.shape.api_qps:
            # the Job controller's client: how fast a Job's pods are created (default 20/s, burst 30)
            argv += ["--kube-api-qps", str(cp.shape.api_qps),
                     "--kube-api-burst", str(cp.shape.api_qps * 3 // 2)]
        if gates:
            argv += ["--feature-gates", gates]
        return argv
    raise ValueError(role)
