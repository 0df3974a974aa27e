"""A real Kubernetes control plane on one machine, with fake GPU nodes (``courselib kube up``).

Four real programs, built from the Go modules pinned in ``k8s/`` (``make setup-k8s``): **etcd**,
**kube-apiserver**, **kube-scheduler** and **kube-controller-manager** (its Job controller and
garbage collector). Everything lives in a temporary state directory and listens on loopback on
non-default ports (18000 upwards; Kubernetes' own are 2379, 6443, 10257, 10259), with its own
certificate authority, serving certificates and bearer tokens made for this run.

There is no kubelet. The nodes are **Node objects** registered through the API with
``nvidia.com/gpu`` capacity, feature labels (``feature.node.kubernetes.io/<name>``, Node Feature
Discovery's convention) and a ``Ready`` condition; the node-lifecycle controller is not run, so
they stay Ready. A pod's ``spec.nodeName`` — the scheduler's binding — is the decision the course
studies. courselib plays the kubelet's part for *status only*, as KWOK does
(:mod:`courselib.live.kube_replay`): a bound pod is marked Running and Ready, and Succeeded when
its job has trained for its duration.

Every process started is recorded by PID in a state file, so ``status`` and ``down`` find the
control plane from any later command, and ``down`` stops exactly those processes (the shared
daemon storey, :mod:`courselib.live.daemons`).

**Extensions** join at named points (:mod:`courselib.live.kube.extension`): ``kube up --with NAME``
asks the extension registered as NAME for its feature gates, node labels and ports, and starts it
once the core is up; ``down`` stops its daemons first. This module names no extension.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path

from courselib.errors import CourseError, InputError, PrivilegeError
from courselib.live.cleanup import cleanup_on_signals
from courselib.live.daemons import HOST, Daemon, Launcher, System, bring_up, check_ports, status_of
from courselib.live.kube import extension
from courselib.live.kube.config import (ETCD_VERSION, GANG_FEATURE_GATES, KUBERNETES_VERSION,  # noqa: F401
                                        NAMESPACE, argv_for, cache_dir, feature_gates, make_pki,
                                        missing_binaries, scheduler_config, write_kubeconfig)
from courselib.live.nodes import NodesShape, parse_features
from courselib.live.state import StateFile
from courselib.model.workload import topology_problem

#: etcd client, etcd peer, kube-apiserver, kube-scheduler, kube-controller-manager, then extras.
BASE_PORT = 18000
#: The gate of native topology-aware PodGroup scheduling (KEP-5732): on with ``--gang`` on a topology.
TOPOLOGY_GATE = "TopologyAwareWorkloadScheduling"
#: Where a node's feature labels live: ``feature.node.kubernetes.io/nvlink: "true"``.
FEATURE_PREFIX = "feature.node.kubernetes.io/"
GPU = "nvidia.com/gpu"
MARKER = "COURSELIB_KUBE_DIR"
#: The record of the running control plane, in courselib's private state directory.
STATE = StateFile("kube")


class KubeUnavailable(PrivilegeError):
    """This machine cannot run the local control plane (binaries not built, or no openssl)."""


def check_available(client: bool = True) -> None:
    """Raise :class:`KubeUnavailable` naming what is missing and how to get it (``client``: also
    the Kubernetes Python client, whose import takes a second or two)."""
    missing = missing_binaries()
    if missing:
        raise KubeUnavailable(
            f"the Kubernetes {KUBERNETES_VERSION} control plane is not built here "
            f"({', '.join(missing)} not in {cache_dir()})",
            hint="build it once with `make setup-k8s` (needs Go 1.26 and the Go module proxy)")
    if shutil.which("openssl") is None:
        raise KubeUnavailable("openssl is not installed (it makes the control plane's certificates)",
                              hint="apt-get install openssl")
    if not client:
        return
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        raise KubeUnavailable("the Kubernetes Python client is not installed",
                              hint="pip install 'courselib[live]' (or `make setup`)") from None


def unavailable_reason() -> str | None:
    """``None`` if this machine can run the local control plane, else the one-line reason."""
    try:
        check_available()
    except KubeUnavailable as err:
        return str(err)
    return None


# ----------------------------------------------------------------------------- the shape

@dataclass(frozen=True)
class KubeShape(NodesShape):
    """The control plane ``up`` builds: ``nodes`` fake nodes with ``gpus_per_node`` GPUs each.

    ``features`` as in :class:`courselib.live.slurm.ClusterShape`: ``(name, where)`` with
    ``where`` ``None`` (every node), ``k`` (node1..nodek) or a tuple of 1-based node numbers.
    ``gang`` turns on v1.37's native gang scheduling (:data:`GANG_FEATURE_GATES`). ``with_``
    names the extensions that join it (``kube up --with``). ``topology``: the workload's tree of
    levels, ``((level, size), ...)`` outermost first (``ClusterSpec.topology``, ``kube up
    --topology rack:8,block:4``); the extension a topology implies (``Extension.implied_by``: the
    topology set-up) labels the nodes by level. ``api_qps``: the controller manager's client rate
    (``--kube-api-qps``, burst ``1.5×``); ``None`` keeps the default (20 requests/s,
    burst 30), which a recorded run keeps, since it decides how fast a Job's pods are created.
    """
    nodes: int = 4
    gpus_per_node: int = 8
    features: tuple = ()
    gang: bool = False
    cpus_per_node: int = 64
    memory_per_node: str = "1024Gi"
    base_port: int = BASE_PORT
    with_: tuple[str, ...] = ()
    api_qps: int | None = None
    topology: tuple = ()

    MAX_NODES = 5000

    def __post_init__(self):
        self.check_nodes(max_nodes=self.MAX_NODES, node_hint="each node is one Node object in the local "
                         "API server", ports=16, name_pattern=r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?",
                         what="a label name (letters, digits, _ . -; at most 63)")
        if self.api_qps is not None and not 1 <= self.api_qps <= 10000:
            raise InputError(f"client rate {self.api_qps}: choose 1 to 10000 requests/s", field="--api-qps")
        for name in self.with_:
            extension.get(name)  # a one-line error for a name no extension is registered under
        topo = tuple((str(level), int(size)) for level, size in self.topology)
        problem = topology_problem(self.nodes, topo)
        if problem:
            raise InputError(problem, field="--topology", hint="write LEVEL:SIZE,... outermost first, "
                             "e.g. rack:8,block:4 (size = consecutive nodes in one domain)")
        object.__setattr__(self, "topology", topo)

    def extensions(self) -> list[extension.Extension]:
        """The extensions that join this control plane, in the order given, then those the shape
        implies (the topology set-up, when it has a topology)."""
        named = [extension.get(name) for name in self.with_]
        return named + [ext for ext in extension.implied(self) if ext not in named]

    def core_gates(self) -> dict[str, bool]:
        """Native gang scheduling's gates, and on a topology also TopologyAwareWorkloadScheduling
        (alpha, off by default, needs GenericWorkload: ``pkg/features/kube_features.go`` L2231–2233,
        L2892): with it the scheduler tries one placement per topology domain for a PodGroup with
        ``schedulingConstraints.topology``. Not on without a topology: it words every failed PodGroup
        cycle as a placement search ("0/1 placements are available, ...")."""
        gates = {g: True for g in GANG_FEATURE_GATES} if self.gang else {}
        if self.gang and self.topology:
            gates[TOPOLOGY_GATE] = True
        return gates

    def feature_gates(self) -> dict[str, bool]:
        """The gates the core components run with: native gang scheduling's, and the extensions'."""
        gates = self.core_gates()
        for ext in self.extensions():
            gates.update(ext.feature_gates(self))
        return gates

    @property
    def ports(self) -> dict[str, int]:
        b = self.base_port
        return {"etcd": b, "etcd-peer": b + 1, "kube-apiserver": b + 2, "kube-scheduler": b + 3,
                "kube-controller-manager": b + 4, "extra": b + 5}

    def describe(self) -> str:
        return (self.describe_nodes()
                + (f"; topology {topology_arg(self.topology)}" if self.topology else "")
                + ("; native gang scheduling on" if self.gang else "")
                + (" with topology-aware PodGroups" if self.gang and self.topology else "")
                + "".join(f"; with {w}" for w in self.with_))

    def cli_args(self) -> str:
        """The ``courselib kube up`` arguments that build this shape (where expressible)."""
        out = self.nodes_args()
        if self.topology:
            out += f" --topology {topology_arg(self.topology)}"
        if self.gang:
            out += " --gang"
        for w in self.with_:
            out += f" --with {w}"
        if self.api_qps:
            out += f" --api-qps {self.api_qps}"
        return out + self.port_arg(BASE_PORT)

    def to_json(self) -> dict:
        return {**self.nodes_json(), "gang": self.gang, "memory_per_node": self.memory_per_node,
                "with": list(self.with_), "api_qps": self.api_qps,
                "topology": [list(x) for x in self.topology]}

    @classmethod
    def from_json(cls, d: dict) -> "KubeShape":
        return cls(**cls.nodes_from_json(d, BASE_PORT), gang=d.get("gang", False),
                   memory_per_node=d.get("memory_per_node", "1024Gi"), with_=tuple(d.get("with", ())),
                   api_qps=d.get("api_qps"), topology=tuple(tuple(x) for x in d.get("topology", ())))

    def same_nodes(self, other: "KubeShape") -> bool:
        """Same nodes, GPUs, per-node features, topology and gang setting (ports, extensions and
        the client rate aside)."""
        return (self.gang, self.cpus_per_node, self.topology) == (other.gang, other.cpus_per_node,
                                                                  other.topology) and \
            self.same_features(other)


def topology_arg(topology) -> str:
    """``rack:8,block:4``: a topology as ``kube up --topology`` writes it."""
    return ",".join(f"{level}:{size}" for level, size in topology)


def parse_topology(text: str | None) -> tuple:
    """``rack:8,block:4`` -> ``(("rack", 8), ("block", 4))`` (a one-line error otherwise)."""
    if not text:
        return ()
    out = []
    for part in text.split(","):
        level, _, size = part.strip().partition(":")
        if not level or not size.strip().isdigit():
            raise InputError(f"{part.strip()!r}: write LEVEL:SIZE, e.g. rack:8", field="--topology")
        out.append((level.strip(), int(size)))
    return tuple(out)


# ----------------------------------------------------------------------------- state

def state_file() -> Path:
    """Where the running control plane is recorded (``kube.json`` in the private state directory)."""
    return STATE.path


#: A process ``up`` started (the shared record of :mod:`courselib.live.daemons`).
Proc = Daemon


@dataclass
class ControlPlane(System):
    """A running (or starting) control plane: its shape, directory, every process started and how
    they are launched (spawn, wait, stop: :class:`courselib.live.daemons.System`)."""
    shape: KubeShape
    state_dir: Path
    token: str
    procs: list[Daemon] = field(default_factory=list)
    started_at: float = 0.0
    versions: dict = field(default_factory=dict)
    launcher: Launcher = HOST

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.shape.ports['kube-apiserver']}"

    def to_json(self) -> dict:
        return {"shape": self.shape.to_json(), "state_dir": str(self.state_dir), "token": self.token,
                "started_at": self.started_at, "versions": self.versions,
                "procs": [p.to_json() for p in self.procs], "launcher": self.launcher.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "ControlPlane":
        if not isinstance(d["state_dir"], str) or not isinstance(d["token"], str):
            raise ValueError("state_dir and token must be text")
        return cls(KubeShape.from_json(d["shape"]), Path(d["state_dir"]), d["token"],
                   [Daemon.from_json(p) for p in d["procs"]], float(d.get("started_at", 0.0)),
                   dict(d.get("versions", {})), Launcher.from_json(d.get("launcher")))

    def save(self) -> None:
        STATE.save(self.to_json())

    def api(self):
        """A ``kubernetes.client.ApiClient`` for this control plane (the admin's token)."""
        from kubernetes import client, config
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg)
        cfg.retries = 3
        return client.ApiClient(cfg)

    def env(self) -> dict[str, str]:
        """The environment every daemon of the control plane starts with (its marker inside)."""
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.state_dir),
                MARKER: str(self.state_dir), "LANG": "C"}

    def restart(self, role: str, argv: list[str], *, ready=None, timeout: float = 60.0) -> Daemon:
        """Stop ``role``'s daemon (by PID) and start ``argv`` in its place; wait for ``ready()``."""
        old = [p for p in self.procs if p.role == role]
        _, left = self.stop([old])
        if left:
            raise CourseError(f"{role} (PID {left}) would not stop", hint=self.log_hint())
        self.procs = [p for p in self.procs if p.role != role]
        daemon = self.spawn(role, argv, env=self.env())
        if ready is not None:
            self.wait_for(ready, timeout, f"{role} answering again", interval=0.3)
        return daemon


def is_ours(proc: Daemon) -> bool:
    """Is ``proc.pid`` still the very process we started (same start time, same boot)?"""
    return proc.is_ours()


def load() -> ControlPlane | None:
    """The control plane recorded in the state file, or ``None`` (a malformed one: one line)."""
    return STATE.load(ControlPlane.from_json)


def running() -> ControlPlane | None:
    """The recorded control plane if every one of its processes is still ours, else ``None``."""
    cp = load()
    if cp is not None and cp.all_ours():
        return cp
    return None


def require_up() -> ControlPlane:
    check_available()
    cp = running()
    if cp is None:
        raise CourseError("no local Kubernetes control plane is up",
                          hint="start one with `courselib kube up`")
    return cp


# ----------------------------------------------------------------------------- up / down

def _https_ok(url: str, ca: Path | None = None, token: str | None = None) -> bool:
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def scheduler_metrics(cp: ControlPlane) -> str:
    """The scheduler's Prometheus metrics text (its secure port; /metrics is always allowed)."""
    url = f"https://127.0.0.1:{cp.shape.ports['kube-scheduler']}/metrics"
    ctx = ssl._create_unverified_context()  # its own self-signed serving certificate
    with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
        return r.read().decode()


def up(shape: KubeShape, *, timeout: float = 90.0, say=lambda msg: None) -> ControlPlane:
    """Start (or find already running) a control plane of ``shape`` with its fake nodes and the
    extensions it names; idempotent. On a control plane that is up, a missing extension joins it.

    On any error, and on Ctrl-C or SIGTERM, every process started so far is stopped and the
    state directory removed before the exception propagates.
    """
    check_available()
    existing = load()
    if existing is not None:
        if existing.all_ours():
            if not existing.shape.same_nodes(shape):
                raise CourseError(f"a different local control plane is already up "
                                  f"({existing.shape.describe()})",
                                  hint="run `courselib kube down` first")
            missing = [w for w in shape.with_ if w not in existing.shape.with_]
            if missing:  # extensions join a control plane that is up
                join(existing, missing, timeout=timeout, say=say)
                return existing
            say(f"already up: {existing.shape.describe()} (state in {existing.state_dir})")
            return existing
        say("found a stale record of a control plane; cleaning it up")
        down(existing)
    for ext in shape.extensions():
        why = ext.unavailable()
        if why:
            raise KubeUnavailable(why)
    check_ports(list(shape.ports.values())[:5])
    versions = {"kubernetes": KUBERNETES_VERSION, "etcd": ETCD_VERSION}
    return bring_up("courselib-kube-",
                    lambda token, d: ControlPlane(shape, d, token, started_at=time.time(),
                                                  versions=versions),
                    lambda cp: _start(cp, timeout=timeout, say=say), down)


def _start(cp: ControlPlane, *, timeout: float, say) -> None:
    d, p = cp.state_dir, cp.shape.ports
    for sub in ("log", "etcd"):
        (d / sub).mkdir(mode=0o700)
    os.chmod(d, 0o700)
    cp.save()
    tokens = make_pki(d)
    ca = d / "pki" / "ca.crt"
    write_kubeconfig(cp.kubeconfig, cp.server, ca, tokens["admin"], "courselib-admin")
    write_kubeconfig(d / "scheduler.kubeconfig", cp.server, ca, tokens["scheduler"], "scheduler")
    write_kubeconfig(d / "controller-manager.kubeconfig", cp.server, ca,
                     tokens["controller-manager"], "controller-manager")
    write_kubeconfig(d / "extra.kubeconfig", cp.server, ca, tokens["extra"], "extra")
    (d / "scheduler-config.json").write_text(scheduler_config(cp))

    env = cp.env()
    gates = feature_gates(cp.shape)
    say(f"starting etcd {ETCD_VERSION} on 127.0.0.1:{p['etcd']}")
    cp.spawn("etcd", argv_for(cp, "etcd"), env=env)
    cp.wait_for(lambda: http_ok(f"http://127.0.0.1:{p['etcd']}/health"), 30, "etcd answering /health")

    say(f"starting kube-apiserver {KUBERNETES_VERSION} on {cp.server}"
        + (f" (feature gates {gates})" if gates else ""))
    cp.spawn("kube-apiserver", argv_for(cp, "kube-apiserver"), env=env)
    cp.wait_for(lambda: _https_ok(f"{cp.server}/readyz", ca, tokens["admin"]), timeout,
                "kube-apiserver answering /readyz", interval=0.5)

    say(f"starting kube-scheduler on 127.0.0.1:{p['kube-scheduler']}")
    cp.spawn("kube-scheduler", argv_for(cp, "kube-scheduler"), env=env)
    say(f"starting kube-controller-manager on 127.0.0.1:{p['kube-controller-manager']}"
        + (f" (client rate {cp.shape.api_qps} requests/s)" if cp.shape.api_qps else ""))
    cp.spawn("kube-controller-manager", argv_for(cp, "kube-controller-manager"), env=env)
    cp.wait_for(lambda: _https_ok(f"https://127.0.0.1:{p['kube-scheduler']}/readyz"), timeout,
                "kube-scheduler answering /readyz", interval=0.5)
    cp.wait_for(_controller_manager_ready(cp), timeout, "kube-controller-manager answering /healthz",
                interval=0.5)

    api = cp.api()
    _ensure_namespace(api)
    say(f"registering {cp.shape.nodes} fake GPU nodes ({cp.shape.gpus_per_node} x {GPU} each)")
    register_nodes(api, cp.shape)
    for ext in cp.shape.extensions():
        _start_extension(cp, ext, timeout=timeout, say=say)
    say(f"up: {cp.shape.describe()}; KUBECONFIG={cp.kubeconfig}")


def _controller_manager_ready(cp: ControlPlane):
    url = f"https://127.0.0.1:{cp.shape.ports['kube-controller-manager']}/healthz"
    return lambda: _https_ok(url)


def _start_extension(cp: ControlPlane, ext: extension.Extension, *, timeout: float, say) -> None:
    check_ports(ext.ports(cp.shape).values(), what=f" ({ext.name}'s)")
    ext.start(cp, timeout=timeout, say=say)
    cp.save()


def join(cp: ControlPlane, names, *, timeout: float = 120.0, say=lambda msg: None) -> ControlPlane:
    """Start the extensions ``names`` on the running control plane (``kube up --with`` on one that
    is up) and record them in its shape. One that needs a feature gate the running components lack
    needs ``down`` and ``up``."""
    with cleanup_on_signals():
        for name in names:
            ext = extension.get(name)
            why = ext.unavailable()
            if why:
                raise KubeUnavailable(why)
            lacking = {g: v for g, v in ext.feature_gates(cp.shape).items()
                       if cp.shape.feature_gates().get(g) != v}
            if lacking:
                raise CourseError(f"{name} needs the feature gates {lacking}, which the running control "
                                  "plane was started without",
                                  hint="run `courselib kube down`, then `courselib kube up "
                                       f"{replace(cp.shape, with_=cp.shape.with_ + (name,)).cli_args()}`")
            _start_extension(cp, ext, timeout=timeout, say=say)
            cp.shape = replace(cp.shape, with_=tuple(cp.shape.with_) + (name,))
            cp.save()
            if any(ext.node_labels(cp.shape, k) for k in range(1, cp.shape.nodes + 1)):
                register_nodes(cp.api(), cp.shape, relabel=True)  # its labels on the nodes up
    return cp


def leave(cp: ControlPlane, names, *, say=lambda msg: None) -> ControlPlane:
    """Stop the extensions ``names`` on the running control plane and forget them in its shape (what
    they installed, such as CRDs, stays)."""
    for name in names:
        if name in cp.shape.with_:
            extension.get(name).stop(cp, say=say)
            cp.shape = replace(cp.shape, with_=tuple(w for w in cp.shape.with_ if w != name))
            cp.save()
    return cp


def set_api_qps(cp: ControlPlane, qps: int | None, *, say=lambda msg: None) -> ControlPlane:
    """Restart only the controller manager with client rate ``qps`` (``None``: the default); the
    other daemons, the nodes and the extensions stay."""
    if cp.shape.api_qps == qps:
        return cp
    cp.shape = replace(cp.shape, api_qps=qps)
    cp.save()
    say("restarting kube-controller-manager with client rate "
        + (f"{qps} requests/s" if qps else "20 requests/s (the default)"))
    cp.restart("kube-controller-manager", argv_for(cp, "kube-controller-manager"),
               ready=_controller_manager_ready(cp))
    return cp


def http_ok(url: str) -> bool:
    """Does ``url`` answer 200 (plain HTTP, two seconds)?"""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _ensure_namespace(api) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as err:
        if err.status != 409:
            raise


def node_name(k: int) -> str:
    return f"node{k}"


def node_body(shape: KubeShape, k: int) -> dict:
    """A fake GPU node, as a kubelet would register it (labels, capacity, Ready); the extensions
    add their labels (``node_labels``)."""
    labels = {"kubernetes.io/hostname": node_name(k), "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64"}
    labels.update({FEATURE_PREFIX + f: "true" for f in shape.features_of(k)})
    for ext in shape.extensions():
        labels.update(ext.node_labels(shape, k))
    resources = {"cpu": str(shape.cpus_per_node), "memory": shape.memory_per_node, "pods": "110",
                 GPU: str(shape.gpus_per_node), "ephemeral-storage": "1Ti"}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name(k), "labels": labels,
                         "annotations": {"courselib/fake-node": "no kubelet; status set by courselib"}},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "fake node (courselib)", "lastHeartbeatTime": now,
                                       "lastTransitionTime": now}],
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": node_name(k)}],
                       "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                    "kubeletVersion": KUBERNETES_VERSION, "kubeProxyVersion": "",
                                    "machineID": "", "systemUUID": "", "bootID": "",
                                    "kernelVersion": "", "osImage": "fake", "containerRuntimeVersion": ""}}}


def reshape(cp: ControlPlane, shape: KubeShape, *, say=lambda msg: None) -> ControlPlane:
    """Make the running control plane's fake nodes those of ``shape`` (nodes, GPUs, feature labels),
    adding, changing and deleting Node objects; the processes stay. Native gang scheduling is a
    feature gate of the running binaries, so a different ``gang`` setting needs `down` and `up`."""
    if shape.gang != cp.shape.gang:
        raise CourseError("the workload needs native gang scheduling " + ("on" if shape.gang else "off")
                          + ", the running control plane has it " + ("on" if cp.shape.gang else "off"),
                          hint="run `courselib kube down`, then `courselib kube up " + shape.cli_args() + "`")
    if shape.core_gates() != cp.shape.core_gates():
        want = TOPOLOGY_GATE in shape.core_gates()
        raise CourseError(f"the workload needs {TOPOLOGY_GATE} {'on' if want else 'off'} (native gang "
                          f"scheduling {'on a topology' if want else 'without one'}), the running control "
                          f"plane has it {'off' if want else 'on'}",
                          hint="run `courselib kube down`, then `courselib kube up " + shape.cli_args() + "`")
    if cp.shape.same_nodes(shape):
        return cp
    from kubernetes import client
    api = cp.api()
    core = client.CoreV1Api(api)
    keep = {node_name(k) for k in range(1, shape.nodes + 1)}
    for n in core.list_node().items:
        if n.metadata.name not in keep:
            core.delete_node(n.metadata.name)
    new = KubeShape(shape.nodes, shape.gpus_per_node, shape.features, gang=cp.shape.gang,
                    cpus_per_node=shape.cpus_per_node, memory_per_node=shape.memory_per_node,
                    base_port=cp.shape.base_port, with_=cp.shape.with_, api_qps=cp.shape.api_qps,
                    topology=shape.topology)
    register_nodes(api, new, relabel=True)
    say(f"reshaped the fake nodes: {cp.shape.describe()} -> {new.describe()}")
    cp.shape = new
    cp.save()
    return cp


def register_nodes(api, shape: KubeShape, *, relabel: bool = False) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    core = client.CoreV1Api(api)
    for k in range(1, shape.nodes + 1):
        body = node_body(shape, k)
        try:
            core.create_node(body)
        except ApiException as err:
            if err.status != 409:
                raise
            if relabel:  # an existing node: its labels become exactly the shape's
                old = core.read_node(node_name(k)).metadata.labels or {}
                labels = {key: None for key in old if key not in body["metadata"]["labels"]}
                labels.update(body["metadata"]["labels"])
                core.patch_node(node_name(k), {"metadata": {"labels": labels}})
        # The API server drops status on create: set it through the status subresource.
        core.patch_node_status(node_name(k), {"status": body["status"]})
        # Admission (TaintNodesByCondition) gives a new node the taint not-ready:NoSchedule; the
        # node-lifecycle controller would lift it once the node is Ready. It is not run here
        # (fake nodes send no heartbeats), so courselib lifts it as that controller would.
        core.patch_node(node_name(k), {"spec": {"taints": None}})


def status(cp: ControlPlane | None = None) -> dict:
    """What is recorded and what is really running (for ``status --json``)."""
    cp = cp or load()
    out = status_of(cp, STATE)
    if cp is None:
        return out
    out.update(shape=cp.shape.describe(), kubeconfig=str(cp.kubeconfig), server=cp.server,
               versions=cp.versions, api_qps=cp.shape.api_qps)
    if out["up"]:
        with contextlib.suppress(Exception):
            from kubernetes import client
            nodes = client.CoreV1Api(cp.api()).list_node().items
            out["nodes"] = len(nodes)
            out["gpus"] = sum(int(n.status.allocatable.get(GPU, 0)) for n in nodes)
    return out


def down(cp: ControlPlane | None = None, *, say=lambda msg: None) -> dict:
    """Stop every process of the recorded control plane by PID; remove its directory and record.

    Order: the controllers first (the extensions' and the core's, so nothing reacts to the
    shutdown), then the API server, then etcd.
    """
    cp = cp or load()
    if cp is None:
        say("no local Kubernetes control plane is recorded; nothing to stop")
        return {"stopped": [], "left": []}
    rank = {"etcd": 3, "kube-apiserver": 2}
    stopped, left = cp.stop([p for p in cp.procs if rank.get(p.role, 0) == level] for level in (0, 2, 3))
    say(f"stopped {len(stopped)} process{'es' if len(stopped) != 1 else ''}"
        + (f"; {len(left)} would not stop: {left}" if left else ""))
    if not left:
        cp.forget(STATE)  # only a directory holding our token, only our record
    return {"stopped": stopped, "left": left}


parse_shape_features = parse_features  # ``--features nvlink:2,ib``, as for Slurm
