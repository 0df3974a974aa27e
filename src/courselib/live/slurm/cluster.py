"""A real Slurm on one machine: munge, one ``slurmctld`` and N ``slurmd`` with emulated GPUs.

Everything lives in a temporary state directory and listens on non-default ports, so a system
Slurm (if any) is never touched: a private ``munged`` socket and key, ``slurm.conf`` /
``gres.conf`` / ``cgroup.conf`` written for this run, and one ``slurmd -N nodeK`` per node
(Slurm's "multiple slurmd" mode: every node is ``localhost`` on its own port). GPUs are
emulated through ``gres.conf`` (``Name=gpu Count=G``): the scheduler counts and allocates them
exactly as it would real ones. The recipe is DESIGN.md §4, first seen working with Slurm 22.05; the
course now runs the release pinned in ``courselib/data/versions.toml`` (26.05), Debian's own packages
in a root of their own (:mod:`courselib.live.slurm.root`, built by ``make setup-slurm``).

Every process started is recorded in a state file in this user's private directory
(:func:`courselib.live.state.private_dir`: mode 0700, created by us, verified before use), with
its PID *and* start time, so ``status`` and ``down`` find the cluster from any later command and
``down`` stops exactly those processes (plus job steps whose environment carries this cluster's
marker and random token), never anything chosen by name, and never a reused PID. The state
directory carries the same token; ``down`` removes it only if it still does. A record that does
not parse is a one-line error, and nothing is stopped or removed. All of that is the shared
daemon storey (:mod:`courselib.live.daemons`); what is Slurm's is here.

**How the daemons are launched** is one piece, :class:`courselib.live.daemons.Launcher`, saved in
the record: by default :class:`~courselib.live.slurm.root.RootLauncher`, the pinned release's root
(each command ``chroot``-ed in a private mount namespace, so no mount outlives it); the host's own
Slurm, if one is installed, is never used unless ``up(shape, launcher=HOST)`` asks for it. Every
daemon and every ``sbatch``/``squeue``/``scontrol`` goes through ``launcher.command``, and ``down``
calls ``launcher.undo()`` after the last daemon stopped (it fails if a mount is still held).
"""
from __future__ import annotations

import contextlib
import os
import re
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from courselib.errors import CourseError, InputError, PrivilegeError  # noqa: F401 (slurm.InputError)
from courselib.live.cleanup import stop_pids
from courselib.live.daemons import HOST, Daemon, Launcher, System, bring_up, check_ports, record_fields, status_of
from courselib.live.daemons import marked_pids as daemon_marked_pids
from courselib.live.nodes import NodesShape, parse_features  # noqa: F401 (slurm.parse_features)
from courselib.live.slurm.root import RootLauncher, built, pinned_version, root_dir
from courselib.live.state import StateFile
from courselib.model import topology
from courselib.model.workload import ClusterSpec, slurm_topology_problem, topology_problem
from courselib.versions import pinned

#: Debian packages that provide what this module runs (in the root ``make setup-slurm`` builds).
DEBIAN_PACKAGES = tuple(pinned("slurm").get("debian_packages", "").split())
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")

#: SlurmctldPort; node K listens on BASE_PORT + K. Slurm's defaults are 6817/6818.
BASE_PORT = 17800
PARTITION = "batch"
#: Environment variable carried by every daemon and job of a cluster: its state directory.
MARKER = "COURSELIB_SLURM_DIR"
#: Environment variable carried with the marker: this cluster's random token.
TOKEN_ENV = "COURSELIB_SLURM_TOKEN"
#: Environment variable naming the state file instead of ``<private dir>/slurm.json`` (its
#: directory must be private too).
STATE_ENV = "COURSELIB_SLURM_STATE"

# The scheduler reacts within about a second, so a replay can run in seconds instead of hours.
# bf_resolution=1 keeps backfill's time grid at one second; bf_continue lets one backfill pass
# finish; sched_min_interval lowers the gap between event-triggered main-scheduler passes.
#: REPLAY_BF_INTERVAL: the backfill interval, in the seconds of a replay's as-submitted workload (what the
#: model of a replay is run with: its own default is slurm.conf's 30 s)
REPLAY_BF_INTERVAL = 1.0
SCHEDULER_PARAMETERS = (f"bf_interval={REPLAY_BF_INTERVAL:g},bf_resolution=1,bf_continue,"
                        "sched_interval=1,sched_min_interval=100000")


class SlurmUnavailable(PrivilegeError):
    """This machine cannot run the local Slurm (not root, or Slurm/munge not installed)."""


# ----------------------------------------------------------------------------- the shape

@dataclass(frozen=True)
class NodeShape:
    """One emulated node: its name, slurmd port, GPUs and feature labels (``--constraint``)."""
    name: str
    port: int
    gpus: int
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterShape(NodesShape):
    """The cluster ``up`` builds: ``nodes`` nodes with ``gpus_per_node`` emulated GPUs each.

    ``features`` is a tuple of ``(name, where)``: ``where`` is ``None`` (every node), a count
    ``k`` (the first ``k`` nodes, ``node1`` upwards) or a tuple of 1-based node numbers.
    ``cpus_per_node`` is what Slurm is told (``SlurmdParameters=config_overrides``), large
    enough that CPUs never limit a GPU job.
    """
    nodes: int = 4
    gpus_per_node: int = 8
    features: tuple = ()
    cpus_per_node: int = 64
    base_port: int = BASE_PORT
    #: the model's tree ((level, size), ...), outermost first; () = no TopologyPlugin
    topology: tuple = ()
    #: ``tree`` (topology.conf SwitchName lines) or ``block`` (BlockName lines and BlockSizes)
    topology_plugin: str = "tree"
    block_sizes: tuple = ()   # BlockSizes in nodes (block only)

    def __post_init__(self):
        self.check_nodes(max_nodes=64, node_hint="each node is one slurmd process on this machine",
                         ports=65, name_pattern=r"[A-Za-z][A-Za-z0-9_.-]*",
                         what="a feature name (letters, digits, _ . -)")
        topo = tuple((str(level), int(size)) for level, size in self.topology)
        object.__setattr__(self, "topology", topo)
        object.__setattr__(self, "block_sizes", tuple(int(b) for b in self.block_sizes))
        problem = (topology_problem(self.nodes, topo) or
                   slurm_topology_problem(self.nodes, topo, self.topology_plugin, self.block_sizes)
                   if topo or self.topology_plugin != "tree" else None)
        if problem:
            raise InputError(problem, field="--topology",
                             hint="write --topology rack:8,block:4 (outermost first, sizes in nodes)")

    def spec(self) -> ClusterSpec:
        """The model's cluster for this shape's nodes and topology (features aside)."""
        return ClusterSpec(self.nodes, max(self.gpus_per_node, 1), topology=self.topology,
                           slurm_topology=self.topology_plugin, block_sizes=self.block_sizes)

    def topology_args(self) -> str:
        """`` --topology rack:8,block:4 --slurm-topology block`` (empty without a topology)."""
        if not self.topology:
            return ""
        out = " --topology " + ",".join(f"{level}:{size}" for level, size in self.topology)
        if self.topology_plugin != "tree":
            out += f" --slurm-topology {self.topology_plugin}"
        if self.block_sizes:
            out += " --block-sizes " + ",".join(map(str, self.block_sizes))
        return out

    def node_shapes(self) -> list[NodeShape]:
        return [NodeShape(f"node{k}", self.base_port + k, self.gpus_per_node, self.features_of(k))
                for k in range(1, self.nodes + 1)]

    @property
    def ctld_port(self) -> int:
        return self.base_port

    def describe(self) -> str:
        if not self.topology:
            return self.describe_nodes()
        tree = " > ".join(f"{level} of {size}" for level, size in self.topology)
        return f"{self.describe_nodes()}, topology/{self.topology_plugin} ({tree})"

    def cli_args(self) -> str:
        """The ``courselib slurm up`` arguments that build this shape (where expressible)."""
        return self.nodes_args() + self.topology_args() + self.port_arg(BASE_PORT)

    def to_json(self) -> dict:
        out = self.nodes_json()
        if self.topology:
            out.update(topology=[list(t) for t in self.topology], topology_plugin=self.topology_plugin,
                       block_sizes=list(self.block_sizes))
        return out

    @classmethod
    def from_json(cls, d: dict) -> "ClusterShape":
        return cls(**cls.nodes_from_json(d, BASE_PORT),
                   topology=tuple(tuple(t) for t in d.get("topology", ())),
                   topology_plugin=d.get("topology_plugin", "tree"),
                   block_sizes=tuple(d.get("block_sizes", ())))

    def same_nodes(self, other: "ClusterShape") -> bool:
        """Same nodes, GPUs, per-node features and topology (ports and how features are written aside)."""
        return self.same_features(other) and (self.topology, self.topology_plugin, self.block_sizes) == (
            other.topology, other.topology_plugin, other.block_sizes)


def render_topology_conf(shape: ClusterShape) -> str:
    """``topology.conf`` for the shape's tree (``topology.conf.5``): for ``tree`` one switch per
    domain (its name the model's, ``rack0``, ``block1``), the innermost level's switches listing
    their nodes, the others their switches, and a root switch over the outermost level so that
    any job may span; for ``block`` one ``BlockName`` per domain of the innermost level (the base
    blocks) and ``BlockSizes`` (:func:`courselib.model.topology.slurm_block_sizes`)."""
    spec = shape.spec()
    lines = [f"# Written by `courselib slurm up`: topology/{shape.topology_plugin} over "
             + ", ".join(f"{level} ({size} nodes)" for level, size in shape.topology)]

    def nodes(r: range) -> str:
        return f"node[{r.start + 1}-{r.stop}]" if len(r) > 1 else f"node{r.start + 1}"
    if shape.topology_plugin == "block":
        level = shape.topology[-1][0]
        for d, r in enumerate(topology.domains_of(spec, level)):
            lines.append(f"BlockName={level}{d} Nodes={nodes(r)}")
        lines.append("BlockSizes=" + ",".join(map(str, topology.slurm_block_sizes(spec))))
        return "\n".join(lines) + "\n"
    levels = [level for level, _ in shape.topology]
    for li in range(len(levels) - 1, -1, -1):             # leaves first, as topology.conf.5 shows
        level = levels[li]
        for d, r in enumerate(topology.domains_of(spec, level)):
            if li == len(levels) - 1:
                lines.append(f"SwitchName={level}{d} Nodes={nodes(r)}")
            else:
                child, ratio = levels[li + 1], shape.topology[li][1] // shape.topology[li + 1][1]
                lines.append(f"SwitchName={level}{d} Switches={child}[{d * ratio}-{(d + 1) * ratio - 1}]"
                             if ratio > 1 else f"SwitchName={level}{d} Switches={child}{d}")
    top, count = levels[0], shape.nodes // shape.topology[0][1]
    if count > 1:
        lines.append(f"SwitchName=root Switches={top}[0-{count - 1}]")
    return "\n".join(lines) + "\n"


def render_slurm_conf(shape: ClusterShape, state_dir: Path) -> str:
    """The ``slurm.conf`` for ``shape`` with every path inside ``state_dir``."""
    d = state_dir
    lines = [
        "# Written by `courselib slurm up`: a private cluster on this machine (DESIGN.md §4).",
        "ClusterName=courselib",
        "SlurmctldHost=localhost",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"SlurmctldPort={shape.ctld_port}",
        f"SlurmdPort={shape.base_port + 1}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={d}/munge/munge.socket",
        f"StateSaveLocation={d}/ctld",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        f"SchedulerParameters={SCHEDULER_PARAMETERS}",
        "PriorityType=priority/basic",
        *([f"TopologyPlugin=topology/{shape.topology_plugin}"] if shape.topology else []),
        "GresTypes=gpu",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "MinJobAge=3600",
        "KillWait=2",
        "InactiveLimit=0",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=300",
        "MessageTimeout=10",
        "TreeWidth=65533",
    ]
    for node in shape.node_shapes():
        feature = f" Feature={','.join(node.features)}" if node.features else ""
        gres = f" Gres=gpu:{node.gpus}" if node.gpus else ""
        lines.append(f"NodeName={node.name} NodeHostname=localhost NodeAddr=127.0.0.1 "
                     f"Port={node.port} CPUs={shape.cpus_per_node} RealMemory=1000{gres}"
                     f"{feature} State=UNKNOWN")
    # MaxNodes = the partition's size: a job asking for more nodes is accepted and waits with
    # reason PartitionNodeLimit (EnforcePartLimits=NO) instead of being refused by sbatch.
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE "
                 f"MaxNodes={shape.nodes} OverSubscribe=NO State=UP")
    return "\n".join(lines) + "\n"


def render_gres_conf(shape: ClusterShape, state_dir: Path) -> str:
    """Emulated GPUs: one device file per GPU (``dev/gpuK``, made by :func:`make_gpu_files`).

    Slurm only counts GPUs that have a ``File=``; nothing is ever bound to these files.
    """
    lines = ["# Emulated GPUs: Slurm counts and allocates them; no device is bound."]
    if shape.gpus_per_node:
        files = f"gpu[0-{shape.gpus_per_node - 1}]" if shape.gpus_per_node > 1 else "gpu0"
        lines.append(f"NodeName=node[1-{shape.nodes}] Name=gpu File={state_dir}/dev/{files}")
    return "\n".join(lines) + "\n"


def make_gpu_files(shape: ClusterShape, state_dir: Path) -> None:
    """Character devices that alias /dev/null (1,3): slurmd wants a device behind each GPU."""
    (state_dir / "dev").mkdir(exist_ok=True)
    for k in range(shape.gpus_per_node):
        path = state_dir / "dev" / f"gpu{k}"
        try:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        except PermissionError:  # no CAP_MKNOD: a plain file also works (slurmd logs a warning)
            path.touch(mode=0o600)


def render_cgroup_conf(version: str = "unknown") -> str:
    """``cgroup.conf``: no cgroup at all where Slurm can say so (``CgroupPlugin=disabled``, from
    24.05: ``cgroup.conf.5``), so no slurmd touches the host's cgroup tree; before that
    (``TaskPlugin=task/none``, ``proctrack/linuxproc``) the plugin is only named so that slurmd
    starts on both cgroup v1 and v2 hosts."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found and (int(found.group(1)), int(found.group(2))) >= (24, 5):
        return "CgroupPlugin=disabled\n"
    plugin = "cgroup/v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists() else "cgroup/v1"
    return f"CgroupPlugin={plugin}\nIgnoreSystemd=yes\n"


# ----------------------------------------------------------------------------- preflight

def course_launcher() -> RootLauncher:
    """How the course runs Slurm: the pinned release from its own root (a new launcher each time)."""
    return RootLauncher()


def missing_commands(launcher: Launcher | None = None) -> list[str]:
    launcher = launcher or course_launcher()
    return [c for c in DAEMONS + CLIENTS if launcher.which(c) is None]


def check_available(launcher: Launcher | None = None) -> None:
    """Raise :class:`SlurmUnavailable` naming what is missing and how to get it."""
    launcher = launcher or course_launcher()
    if isinstance(launcher, RootLauncher) and launcher.root == root_dir() and not built():
        raise SlurmUnavailable(
            f"the course's Slurm {pinned_version()} is not built here (no {root_dir()})",
            hint="build it once with `make setup-slurm` (as root: Debian's mmdebstrap, about 175 MB)")
    missing = missing_commands(launcher)
    if missing:
        where = launcher.describe()
        raise SlurmUnavailable(
            f"Slurm is not complete in {where} ({', '.join(missing)} not found)",
            hint=f"rebuild it: remove {root_dir().parent} and run `make setup-slurm`"
                 if isinstance(launcher, RootLauncher) else
                 f"install the Debian packages: apt-get install {' '.join(DEBIAN_PACKAGES)}")
    if os.geteuid() != 0:
        raise SlurmUnavailable(
            "a local Slurm runs its daemons as root (SlurmUser=root, munged)",
            hint="run as root (CI does); elsewhere the chapter shows a recorded run")


def unavailable_reason(launcher: Launcher | None = None) -> str | None:
    """``None`` if this machine can run the local Slurm, else the one-line reason."""
    try:
        check_available(launcher)
    except SlurmUnavailable as err:
        return str(err)
    return None


# ----------------------------------------------------------------------------- state

def _record() -> StateFile:
    env = os.environ.get(STATE_ENV)
    return StateFile.at(env, "slurm") if env else StateFile("slurm")


def state_file() -> Path:
    """Where the running cluster is recorded: ``<private dir>/slurm.json`` (``$COURSELIB_SLURM_STATE``
    overrides; its directory is verified private either way)."""
    return _record().path


#: A process ``up`` started (the shared record of :mod:`courselib.live.daemons`).
Proc = Daemon


@dataclass
class Cluster(System):
    """A running (or starting) cluster: its shape, directory, every process started and how they
    are launched (spawn, wait, stop: :class:`courselib.live.daemons.System`)."""
    shape: ClusterShape
    state_dir: Path
    procs: list[Daemon] = field(default_factory=list)
    started_at: float = 0.0
    token: str = ""
    launcher: Launcher = HOST  # up() passes the course's launcher

    @property
    def conf(self) -> Path:
        return self.state_dir / "slurm.conf"

    def env(self) -> dict[str, str]:
        """The environment for client commands (``sbatch``, ``squeue``) against this cluster."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        env[MARKER] = str(self.state_dir)
        env[TOKEN_ENV] = self.token
        for k in [k for k in env if k.startswith(("SBATCH_", "SQUEUE_", "SLURM_"))
                  and k != "SLURM_CONF"]:
            del env[k]
        return env

    def to_json(self) -> dict:
        return {"shape": self.shape.to_json(), "state_dir": str(self.state_dir), "token": self.token,
                "started_at": self.started_at, "procs": [p.to_json() for p in self.procs],
                "launcher": self.launcher.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "Cluster":
        """Read a record back; anything not as :meth:`to_json` writes it raises (one line, via StateFile)."""
        state_dir, token, procs, started = record_fields(d)
        return cls(ClusterShape.from_json(d["shape"]), state_dir, procs, started, token,
                   Launcher.from_json(d.get("launcher")))

    def save(self) -> None:
        _record().save(self.to_json())

    def log_files(self, role: str) -> list[Path]:
        # the daemon's own log (slurm.conf, munged --log-file), then what it printed
        return [self.state_dir / "log" / f"{role}.log", self.state_dir / "log" / f"{role}.stderr"]

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> str:
        """Run a Slurm client command against this cluster (through its launcher); its stdout."""
        return self.run_full(*argv, check=check, timeout=timeout).stdout

    def run_full(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """:meth:`run`, with the whole result (exit status, stderr)."""
        try:
            res = subprocess.run(self.launcher.command(argv), env=self.env(), capture_output=True,
                                 text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CourseError(f"{' '.join(argv)} did not answer in {timeout:g} s",
                              hint=f"see the logs in {self.state_dir}/log") from None
        if check and res.returncode != 0:
            msg = (res.stderr or res.stdout).strip().splitlines()
            raise CourseError(f"{' '.join(argv[:2])} failed: {msg[-1] if msg else res.returncode}",
                              hint=f"see the logs in {self.state_dir}/log")
        return res


def load_cluster() -> Cluster | None:
    """The cluster recorded in the state file, or ``None``; a one-line error if the record is not
    one this courselib wrote (nothing is stopped or removed then)."""
    return _record().load(Cluster.from_json)


# ----------------------------------------------------------------------------- processes

def is_ours(proc: Daemon) -> bool:
    """Is ``proc.pid`` still the process we started (same start time, same boot)?"""
    return proc.is_ours()


def marked_pids(state_dir: Path, token: str) -> list[int]:
    """PIDs whose environment carries this cluster's marker and token (job steps and their children)."""
    return daemon_marked_pids({MARKER: str(state_dir), TOKEN_ENV: token}) if token else []


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "job"


# ----------------------------------------------------------------------------- up / down

def status(cluster: Cluster | None = None) -> dict:
    """What is recorded and what is really running, as a dict (for ``status --json``)."""
    cluster = cluster or load_cluster()
    out = status_of(cluster, _record())
    if cluster is not None:
        out.update(shape=cluster.shape.describe(), slurm_conf=str(cluster.conf),
                   launcher=cluster.launcher.describe(), version=version(cluster.launcher))
        if out["up"]:
            out["nodes"] = node_states(cluster)
    return out


def node_states(cluster: Cluster) -> list[dict]:
    """``sinfo``'s view: each node's state, GPUs and features."""
    text = cluster.run("sinfo", "-N", "-h", "-o", "%N|%T|%G|%f", check=False, timeout=10)
    out = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 4:
            out.append({"node": parts[0], "state": parts[1], "gres": parts[2],
                        "features": [] if parts[3] in ("(null)", "") else parts[3].split(",")})
    return out


def version(launcher: Launcher | None = None) -> str:
    """The Slurm release ``launcher`` runs, as ``slurmctld -V`` says it (``26.05.5``), or ``unknown``."""
    launcher = launcher or course_launcher()
    try:
        out = subprocess.run(launcher.command([launcher.which("slurmctld") or "slurmctld", "-V"]),
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    found = re.fullmatch(r"slurm(?:-wlm)? (\d+\.\d+\.\d+\S*)", out.strip())  # Debian: slurm-wlm 26.05.5
    return found.group(1) if found else "unknown"


def up(shape: ClusterShape, *, timeout: float = 60.0, say=lambda msg: None,
       launcher: Launcher | None = None) -> Cluster:
    """Start (or find already running) a cluster of ``shape``; idempotent. ``launcher``: how its
    daemons and client commands are launched (default: the course's Slurm from its own root).

    On any error, and on Ctrl-C or SIGTERM, every process started so far is stopped, the
    launcher's set-up undone and the state directory removed before the exception propagates.
    """
    launcher = launcher or course_launcher()
    check_available(launcher)
    existing = load_cluster()
    if existing is not None:
        if existing.all_ours():
            if not existing.shape.same_nodes(shape):
                raise CourseError(
                    f"a different local Slurm is already up ({existing.shape.describe()})",
                    hint="run `courselib slurm down` first")
            say(f"already up: {existing.shape.describe()} (state in {existing.state_dir})")
            return existing
        say("found a stale record of a cluster; cleaning it up")
        down(existing)

    check_ports([shape.ctld_port] + [n.port for n in shape.node_shapes()])
    return bring_up("courselib-slurm-",
                    lambda token, d: Cluster(shape, d, started_at=time.time(), token=token,
                                             launcher=launcher),
                    lambda cluster: _start(cluster, timeout=timeout, say=say), down)


def _start(cluster: Cluster, *, timeout: float, say) -> None:
    d, shape = cluster.state_dir, cluster.shape
    for sub in ("munge", "ctld", "spool", "run", "log"):
        (d / sub).mkdir(mode=0o700)
    cluster.save()
    cluster.launcher.setup(d)  # recorded first: a later `down` undoes it
    for node in shape.node_shapes():
        (d / "spool" / node.name).mkdir(mode=0o700)
    os.chmod(d, 0o755)  # munged refuses group/other-writable directories on its socket path
    (d / "slurm.conf").write_text(render_slurm_conf(shape, d))
    (d / "gres.conf").write_text(render_gres_conf(shape, d))
    if shape.topology:  # slurmctld reads it beside slurm.conf
        (d / "topology.conf").write_text(render_topology_conf(shape))
    make_gpu_files(shape, d)
    (d / "cgroup.conf").write_text(render_cgroup_conf(version(cluster.launcher)))
    key = d / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)

    env = cluster.env()
    cluster.save()
    which = cluster.launcher.which

    say(f"starting munged (private socket {d}/munge/munge.socket)")
    cluster.spawn("munged", [which("munged"), "--foreground", "--force",
                             f"--socket={d}/munge/munge.socket", f"--key-file={key}",
                             f"--pid-file={d}/run/munged.pid", f"--log-file={d}/log/munged.log",
                             f"--seed-file={d}/munge/munged.seed", "--num-threads=4"], env=env)
    cluster.wait_for(lambda: (d / "munge" / "munge.socket").exists(), 10, "munged's socket")

    say(f"starting slurmctld on port {shape.ctld_port}")
    cluster.spawn("slurmctld", [which("slurmctld"), "-D", "-i", "-f", str(cluster.conf)], env=env)
    cluster.wait_for(lambda: _ping(cluster), timeout, "slurmctld answering `scontrol ping`")

    for node in shape.node_shapes():
        say(f"starting slurmd {node.name} on port {node.port} ({node.gpus} GPUs"
            + (f", features {','.join(node.features)})" if node.features else ")"))
        cluster.spawn(f"slurmd-{node.name}",
                      [which("slurmd"), "-D", "-f", str(cluster.conf), "-N", node.name], env=env)
    names = f"node[1-{shape.nodes}]" if shape.nodes > 1 else "node1"
    cluster.wait_for(lambda: _all_nodes_registered(cluster), timeout, "every slurmd registering",
                     interval=0.3)
    cluster.run("scontrol", "update", f"nodename={names}", "state=resume", check=False)
    cluster.wait_for(lambda: _all_nodes_idle(cluster), timeout, "every node becoming idle",
                     interval=0.3)
    say(f"up: {shape.describe()}; SLURM_CONF={cluster.conf}")


def _ping(cluster: Cluster) -> bool:
    try:
        out = cluster.run("scontrol", "ping", check=False, timeout=5)
    except CourseError:
        return False
    return "is UP" in out


def _all_nodes_registered(cluster: Cluster) -> bool:
    states = node_states(cluster)
    return len(states) == cluster.shape.nodes and all(
        "NOT_RESPONDING" not in s["state"].upper() and not s["state"].endswith("*")
        and s["state"].lower() not in ("unknown", "down*") for s in states)


def _all_nodes_idle(cluster: Cluster) -> bool:
    states = node_states(cluster)
    return len(states) == cluster.shape.nodes and all(s["state"] == "idle" for s in states)


def down(cluster: Cluster | None = None, *, say=lambda msg: None) -> dict:
    """Stop every process of the recorded cluster by PID; remove its directory and record.

    Order: running jobs are cancelled, then job steps (found by the environment marker),
    slurmd's, slurmctld and munged. Returns what was stopped and anything that survived.
    """
    cluster = cluster or load_cluster()
    if cluster is None:
        say("no local Slurm is recorded; nothing to stop")
        return {"stopped": [], "left": []}
    dir_ours = cluster.owns_dir()
    ctld_alive = any(p.role == "slurmctld" and p.is_ours() for p in cluster.procs)
    if ctld_alive and dir_ours and cluster.conf.exists():
        with contextlib.suppress(CourseError):
            cluster.run("scancel", "--full", f"--partition={PARTITION}", check=False, timeout=10)
    stopped: list[dict] = []
    left: list[int] = []
    # Job steps and their children first: they are not our children, but carry our marker.
    # (A daemon's own helpers, such as slurmctld's slurmscriptd, go with their daemon.)
    ours = {p.pid for p in cluster.procs}
    steps = [p for p in marked_pids(cluster.state_dir, cluster.token)
             if p not in ours and _ppid(p) not in ours]
    if steps:
        names = {p: _comm(p) for p in steps}
        left += stop_pids(steps, grace=3.0)
        stopped += [{"role": names[p], "pid": p} for p in steps]
    done, gone = cluster.stop([[p for p in cluster.procs if p.role.startswith("slurmd")],
                               [p for p in cluster.procs if p.role == "slurmctld"],
                               [p for p in cluster.procs if p.role == "munged"]])
    stopped += done
    left += gone
    # Anything a slurmd forked late (a step starting while we stopped it).
    late = [p for p in marked_pids(cluster.state_dir, cluster.token) if p not in ours]
    if late:
        names = {p: _comm(p) for p in late}
        left += stop_pids(late, grace=2.0)
        stopped += [{"role": names[p], "pid": p} for p in late]
    say(f"stopped {len(stopped)} process{'es' if len(stopped) != 1 else ''}"
        + (f"; {len(left)} would not stop: {left}" if left else ""))
    out = {"stopped": stopped, "left": left, "kept_dir": None}
    if not left:
        out.update(cluster.forget(_record()))
        if out["not_undone"]:
            say(f"could not undo: {'; '.join(out['not_undone'])}; {cluster.state_dir} and the record "
                "are kept (run `courselib slurm down` again)")
        elif out["kept_dir"]:
            say(f"left {out['kept_dir']} in place: it is not the directory this cluster made (no token of ours)")
    return out


def require_up() -> Cluster:
    """The running cluster, or an error that says how to start one."""
    cluster = load_cluster()
    check_available(cluster.launcher if cluster is not None else None)
    if cluster is None or not cluster.all_ours():
        raise CourseError("no local Slurm is up", hint="start one with `courselib slurm up`")
    return cluster
