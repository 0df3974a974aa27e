"""A real container and a real image build, from a base image the course makes itself.

No registry can be reached from the machines the course runs on, so every image starts from a
base built here, locally and reproducibly: a root filesystem holding Debian's statically linked
``busybox`` (package ``busybox-static``) and nothing else, written as an OCI image layout (one
uncompressed layer, every timestamp 0, entries sorted; the same busybox gives the same digest).
It is labelled as what it is: the **stand-in** for the ``nvidia/cuda`` base the seed's
Dockerfile names — no CUDA, no Python, no driver.

- :func:`run_container` runs a command as PID 1 of a real container from that image under a real
  OCI runtime (``runc`` from Debian; ``crun`` too where present and usable — Debian's crun 1.8
  refuses a hybrid cgroup v1/v2 host — and the result names the one that ran). It reports what
  the process saw inside (its PID, hostname, ``/``, network interfaces, ``/proc/1/cgroup``,
  namespaces, kernel release) and what the host saw of the same process (its PID there,
  ``NSpid``, namespace inodes, cgroup path), its exit status, and the cgroup's OOM counter.
- :class:`Builder` drives a real builder (``buildah bud --layers``, Debian) with the flags this
  machine needs: ``--isolation chroot`` (no nested runtime), ``--storage-driver vfs`` (no
  overlay mounts to leave behind), a private ``--root``/``--runroot`` and a signature policy of
  our own. :mod:`courselib.live.container.rebuild` uses it for ``courselib docker rebuild``.

Everything lives under one temporary directory (:class:`Workspace`): the image layout, the
bundle, the runtime's state, the builder's storage. Closing it — also on an error, Ctrl-C or
SIGTERM — deletes every container it created (which removes their cgroups), unmounts anything
left mounted below it and removes the directory. Without root, or without the packages, a
:class:`~courselib.errors.PrivilegeError` says so and nothing is touched.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.errors import CourseError, InputError, PrivilegeError
from courselib.live import recorded as _recorded
from courselib.live.cleanup import cleanup_on_signals, signals_held
from courselib.live.memcg import KernelLog
from courselib.live.proc import namespaces, remove_cgroup
from courselib.live.recorded import OutOfTime
from courselib.model.badness import Task
from courselib.model.memcg import OomScenario, ProcessSpec
from courselib.units import PAGE_SIZE

#: Debian packages this module runs (one per line in .ci/apt-packages.txt).
DEBIAN_PACKAGES = ("runc", "buildah", "busybox-static")
#: What the base image stands in for: the seed Dockerfile's ``FROM``.
STAND_IN_FOR = "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
BASE_IMAGE = "localhost/courselib/cuda-stand-in:busybox"
BASE_LABELS = {
    "org.opencontainers.image.title": "courselib stand-in base image",
    "org.opencontainers.image.description":
        f"STAND-IN for {STAND_IN_FOR}: Debian's busybox-static and nothing else, built locally by "
        "courselib because no registry can be reached. No CUDA, no Python, no GPU driver.",
    "org.courselib.stand-in-for": STAND_IN_FOR,
}
RUNTIMES = ("runc", "crun")
HOSTNAME = "courselib-ctr"
MARKER = "--courselib-inside-end--"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# PID 1 of the container: report what it sees (to stdout, up to MARKER), wait for the host to
# look at it from outside (one line on stdin), then exec the user's command, which keeps PID 1.
_WRAPPER = r"""
echo "pid $$"
echo "hostname $(hostname)"
echo "kernel $(uname -r)"
for n in /proc/1/ns/*; do echo "ns ${n##*/} $(readlink "$n")"; done
while read -r l; do echo "cgroup $l"; done < /proc/1/cgroup
for f in /* /.[!.]*; do [ -e "$f" ] && echo "root ${f#/}"; done
ip -o link | while read -r l; do echo "link $l"; done
ip -o addr | while read -r l; do echo "addr $l"; done
echo "%s"
read -r go
exec "$@" </dev/null
""" % MARKER


# ----------------------------------------------------------------------------- preflight

def _which(cmd: str) -> str | None:
    return shutil.which(cmd) or next((p for p in (f"/usr/sbin/{cmd}", f"/sbin/{cmd}")
                                      if os.access(p, os.X_OK)), None)


def is_static_elf(path: str | Path) -> bool:
    """True if ``path`` is an ELF executable with no program interpreter (statically linked)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:   # 64-bit ELF only
                return False
            phoff = int.from_bytes(head[32:40], "little")
            phentsize = int.from_bytes(head[54:56], "little")
            phnum = int.from_bytes(head[56:58], "little")
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
    except OSError:
        return False
    return not any(int.from_bytes(table[i:i + 4], "little") == 3      # PT_INTERP
                   for i in range(0, len(table), phentsize))


def find_busybox() -> Path:
    for cand in ("/bin/busybox", "/usr/bin/busybox"):
        if is_static_elf(cand):
            return Path(cand)
    raise PrivilegeError("no statically linked busybox on this machine (the base image is built from it)",
                         hint="install the Debian package busybox-static")


def check_runtime() -> None:
    """Raise :class:`PrivilegeError` (nothing touched) unless a container can run here."""
    if not any(_which(r) for r in RUNTIMES):
        raise PrivilegeError("no OCI runtime is installed (runc or crun)",
                             hint="install the Debian package runc; the chapter shows a recorded run")
    if os.geteuid() != 0:
        raise PrivilegeError("running a container needs root here (the runtime creates namespaces, "
                             "a cgroup and mounts); nothing was touched",
                             hint="run as root (CI does); the chapter shows a recorded run")
    find_busybox()


def check_builder() -> None:
    if _which("buildah") is None:
        raise PrivilegeError("the image builder buildah is not installed",
                             hint="install the Debian package buildah; the chapter shows a recorded run")
    if os.geteuid() != 0:
        raise PrivilegeError("building images with buildah needs root here; nothing was touched",
                             hint="run as root (CI does); the chapter shows a recorded run")
    find_busybox()


def unavailable_reason(*, builder: bool = False) -> str | None:
    """``None`` if containers (and, with ``builder``, image builds) can run here, else why not."""
    try:
        check_runtime()
        if builder:
            check_builder()
    except PrivilegeError as err:
        return str(err)
    return None


def tool_version(cmd: str) -> str:
    path = _which(cmd)
    if path is None:
        return f"{cmd} (not installed)"
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    first = out.strip().splitlines()[0] if out.strip() else cmd
    return first


# ----------------------------------------------------------------------------- the base image

def _tar_entry(tf: tarfile.TarFile, name: str, kind: bytes, *, data: bytes = b"", mode: int = 0o755,
               link: str = "") -> None:
    ti = tarfile.TarInfo(name)
    ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname, ti.mode, ti.type = 0, 0, 0, "", "", mode, kind
    if kind == tarfile.SYMTYPE:
        ti.linkname = link
    if kind == tarfile.REGTYPE:
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    else:
        tf.addfile(ti)


def base_layer(busybox: Path) -> bytes:
    """The base image's only layer: busybox, a symlink per applet, /etc/passwd and empty mount points."""
    binary = busybox.read_bytes()
    listed = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True, timeout=10)
    applets = sorted(a for a in listed.stdout.split() if a and a != "bin/busybox")
    dirs = {"bin", "dev", "etc", "proc", "root", "sys", "tmp"}
    for a in applets:
        d = os.path.dirname(a)
        while d:
            dirs.add(d)
            d = os.path.dirname(d)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for d in sorted(dirs):
            _tar_entry(tf, d, tarfile.DIRTYPE, mode=0o1777 if d == "tmp" else 0o755)
        _tar_entry(tf, "bin/busybox", tarfile.REGTYPE, data=binary)
        for a in applets:
            _tar_entry(tf, a, tarfile.SYMTYPE, link="/bin/busybox")
        _tar_entry(tf, "etc/passwd", tarfile.REGTYPE, data=b"root:x:0:0:root:/root:/bin/sh\n", mode=0o644)
        _tar_entry(tf, "etc/group", tarfile.REGTYPE, data=b"root:x:0:\n", mode=0o644)
    return buf.getvalue()


@dataclass(frozen=True)
class BaseImage:
    """The stand-in base as an OCI image layout on disk."""

    layout: Path
    manifest_digest: str
    config_digest: str
    layer_digest: str
    layer_bytes: int
    busybox_version: str

    def describe(self) -> dict:
        return {"name": BASE_IMAGE, "stand_in_for": STAND_IN_FOR, "manifest": self.manifest_digest,
                "layer": self.layer_digest, "layer_bytes": self.layer_bytes,
                "busybox": self.busybox_version, "labels": BASE_LABELS}


def _blob(layout: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return "sha256:" + digest


def write_base_image(layout: Path) -> BaseImage:
    """Write the stand-in base image as an OCI image layout at ``layout`` (a new directory)."""
    busybox = find_busybox()
    layer = base_layer(busybox)
    (layout / "blobs" / "sha256").mkdir(parents=True)
    layer_digest = _blob(layout, layer)
    version = subprocess.run([str(busybox)], capture_output=True, text=True, timeout=10).stdout
    version = (version.splitlines() or ["BusyBox"])[0].split(" multi-call")[0]
    config = json.dumps({
        "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine),
        "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Env": [PATH_ENV], "Cmd": ["/bin/sh"], "Labels": BASE_LABELS},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created": "1970-01-01T00:00:00Z",
                     "created_by": f"courselib: {version} (Debian busybox-static), stand-in for {STAND_IN_FOR}"}],
    }, sort_keys=True).encode()
    config_digest = _blob(layout, config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest,
                    "size": len(layer)}],
        "annotations": {"org.opencontainers.image.ref.name": "busybox"},
    }, sort_keys=True).encode()
    manifest_digest = _blob(layout, manifest)
    (layout / "index.json").write_text(json.dumps({
        "schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
            "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": "busybox"}}]}))
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return BaseImage(layout, manifest_digest, config_digest, layer_digest, len(layer), version)


# ----------------------------------------------------------------------------- the workspace

def _mounts_below(root: Path) -> list[str]:
    """Mount points at or below ``root`` (from /proc/self/mountinfo), deepest first."""
    out = []
    prefix = str(root).rstrip("/") + "/"
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 4:
            point = parts[4].replace("\\040", " ")
            if point == str(root) or point.startswith(prefix):
                out.append(point)
    return sorted(set(out), key=len, reverse=True)


#: One path component of an image name, as the reference grammar of the builder's image library has it
#: (lowercase letters and digits, joined by ".", "_", "__" or dashes).
_NAME_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")


def builder_safe(path: Path) -> bool:
    """Whether an OCI layout under ``path`` can be pulled by Debian 12's buildah (1.28): it names the
    pulled image after the layout's path, and refuses the pull ("invalid reference format") when a
    component is not a lowercase image-name component (a capital, a trailing "_" or ".")."""
    return all(_NAME_COMPONENT.fullmatch(part) for part in Path(path).parts[1:])


def workspace_parent() -> Path:
    """Where workspaces go: the temporary directory (``TMPDIR``) if the builder can use a path under it,
    else /tmp or /var/tmp; a one-line error if none of them is usable."""
    tmp = Path(tempfile.gettempdir())
    for parent in (tmp, Path("/tmp"), Path("/var/tmp")):
        if builder_safe(parent) and parent.is_dir() and os.access(parent, os.W_OK | os.X_OK):
            return parent
    raise CourseError(f"no temporary directory the image builder can use: {tmp} (TMPDIR) has a component "
                      "that is not a lowercase image-name component, and /tmp and /var/tmp are not writable",
                      hint="set TMPDIR to a writable directory named in lowercase letters, digits and "
                           "single . _ - between them, e.g. TMPDIR=/tmp")


class Workspace:
    """One temporary directory for a run or a build; :meth:`close` leaves nothing behind."""

    def __init__(self, prefix: str = "courselib-container-"):
        # a name the builder accepts inside an image reference (mkdtemp's "_" may not be), under a
        # parent whose path it accepts too (workspace_parent)
        parent = workspace_parent()
        while True:
            root = parent / f"{prefix}{os.getpid()}-{secrets.token_hex(4)}"
            try:
                root.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        self.root = root
        self.containers: list[tuple[str, str]] = []     # (runtime path, container id)
        self.cgroups: list[str] = []                    # cgroupsPath of each container
        self.builder: Builder | None = None
        self._base: BaseImage | None = None

    @property
    def runtime_root(self) -> Path:
        return self.root / "runtime"

    def base(self) -> BaseImage:
        if self._base is None:
            self._base = write_base_image(self.root / "base-image")
        return self._base

    def close(self) -> dict:
        """Delete containers, unmount leftovers, remove cgroups and the directory; what was cleaned."""
        report = {"containers": [], "unmounted": [], "cgroups": []}
        for runtime, cid in self.containers:
            subprocess.run([runtime, "--root", str(self.runtime_root), "delete", "--force", cid],
                           capture_output=True, timeout=30)
            report["containers"].append(cid)
        self.containers.clear()
        if self.builder is not None:
            self.builder.remove_all()
        for point in _mounts_below(self.root):
            subprocess.run(["umount", "-l", point], capture_output=True, timeout=30)
            report["unmounted"].append(point)
        for rel in self.cgroups:
            for d in cgroup_dirs(rel):
                if d.exists():
                    with contextlib.suppress(CourseError):
                        remove_cgroup(d)
                    report["cgroups"].append(str(d))
        shutil.rmtree(self.root, ignore_errors=True)
        return report

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def workspace(prefix: str = "courselib-container-"):
    """A :class:`Workspace`, closed on exit, also on an error, Ctrl-C or SIGTERM."""
    with cleanup_on_signals():
        with signals_held():       # no signal between creating the directory and owning it
            ws = Workspace(prefix)
        try:
            yield ws
        finally:
            ws.close()


def cgroup_dirs(rel: str, cgroupfs: str | Path = "/sys/fs/cgroup") -> list[Path]:
    """Every directory a cgroup path ``rel`` has on this host (each v1 hierarchy, and v2)."""
    root = Path(cgroupfs)
    rel = rel.lstrip("/")
    if (root / "cgroup.controllers").exists():
        return [root / rel]
    return [d / rel for d in sorted(root.iterdir()) if d.is_dir()]


# ----------------------------------------------------------------------------- running a container

@dataclass
class ContainerRun:
    """What a real container did: inside view, outside view, exit status, OOM counter."""

    command: list[str]
    runtime: str                                  # the runtime that ran it, with its version
    runtimes_tried: list[dict] = field(default_factory=list)
    image: dict = field(default_factory=dict)
    memory_limit: int | None = None
    inside: dict = field(default_factory=dict)
    outside: dict = field(default_factory=dict)
    exit_code: int | None = None
    oom_killed: bool = False
    oom_kill_count: int = 0
    memory_events: dict = field(default_factory=dict)
    kernel_log: list[str] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    left_behind: dict = field(default_factory=dict)
    recorded: bool = False
    recorded_on: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _parse_inside(lines: list[str]) -> dict:
    out: dict = {"namespaces": {}, "cgroup": [], "root": [], "interfaces": [], "addresses": []}
    for line in lines:
        key, _, rest = line.partition(" ")
        if key == "pid":
            out["pid"] = int(rest)
        elif key in ("hostname", "kernel"):
            out[key] = rest
        elif key == "ns":
            kind, _, target = rest.partition(" ")
            m = re.match(r"^\w+:\[(\d+)\]$", target)
            if m:
                out["namespaces"][kind] = int(m.group(1))
        elif key == "cgroup":
            out["cgroup"].append(rest)
        elif key == "root":
            out["root"].append(rest)
        elif key == "link":
            m = re.match(r"^\d+:\s*([^:@\s]+)", rest)
            if m:
                out["interfaces"].append(m.group(1))
        elif key == "addr":
            parts = rest.split()
            if len(parts) >= 4:
                out["addresses"].append(f"{parts[1]} {parts[2]} {parts[3]}")
    return out


def _outside_view(pid: int) -> dict:
    status = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        status[k] = v.strip()
    ns = {k: n.inode for k, n in namespaces(pid).items()}
    host = {k: n.inode for k, n in namespaces("self").items()}
    return {
        "pid": pid,
        "nspid": [int(x) for x in status.get("NSpid", str(pid)).split()],
        "rss_kib": int(status.get("VmRSS", "0 kB").split()[0]),
        "cgroup": Path(f"/proc/{pid}/cgroup").read_text().splitlines(),
        "namespaces": ns,
        "host_namespaces": host,
        "new_namespaces": sorted(k for k in ns if ns[k] != host.get(k)),
        "hostname": socket.gethostname(),
        "kernel": os.uname().release,
    }


def _memory_counters(rel: str) -> tuple[int, dict]:
    """(oom_kill count, the cgroup's memory events) of the container's memory cgroup."""
    root = Path("/sys/fs/cgroup")
    v2 = root / rel.lstrip("/")
    if (root / "cgroup.controllers").exists():
        events = {}
        with contextlib.suppress(OSError):
            for line in (v2 / "memory.events").read_text().splitlines():
                k, _, v = line.partition(" ")
                events[k] = int(v)
        return events.get("oom_kill", 0), {"file": "memory.events", **events}
    d = root / "memory" / rel.lstrip("/")
    events = {}
    with contextlib.suppress(OSError):
        for line in (d / "memory.oom_control").read_text().splitlines():
            k, _, v = line.partition(" ")
            events[k] = int(v)
    with contextlib.suppress(OSError, ValueError):
        events["max_usage_in_bytes"] = int((d / "memory.max_usage_in_bytes").read_text())
    return events.get("oom_kill", 0), {"file": "memory.oom_control", **events}


def _bundle(ws: Workspace, runtime: str, name: str, args: list[str], memory: int | None) -> tuple[Path, str]:
    """An OCI bundle: the base image's layer unpacked as rootfs, the runtime's default config edited."""
    base = ws.base()
    bundle = ws.root / "bundles" / name
    rootfs = bundle / "rootfs"
    rootfs.mkdir(parents=True)
    layer = (base.layout / "blobs" / "sha256" / base.layer_digest.split(":", 1)[1]).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(layer)) as tf:
        tf.extractall(rootfs, filter="tar") if hasattr(tarfile, "data_filter") else tf.extractall(rootfs)
    spec = subprocess.run([runtime, "spec", "--bundle", str(bundle)], capture_output=True, text=True, timeout=30)
    if spec.returncode != 0:
        raise CourseError(f"{runtime} spec failed: {spec.stderr.strip()[-200:]}")
    cfg = json.loads((bundle / "config.json").read_text())
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/bin/sh", "-c", _WRAPPER, "courselib-pid1", *args]
    cfg["process"]["env"] = [PATH_ENV, "HOME=/root"]
    cfg["root"] = {"path": "rootfs", "readonly": False}
    cfg["hostname"] = HOSTNAME
    linux = cfg.setdefault("linux", {})
    kinds = {n["type"] for n in linux.get("namespaces", [])}
    for kind in ("pid", "network", "ipc", "uts", "mount", "cgroup"):
        if kind not in kinds:
            linux.setdefault("namespaces", []).append({"type": kind})
    rel = f"/courselib-ctr-{os.getpid()}-{name}"
    linux["cgroupsPath"] = rel
    res = linux.setdefault("resources", {})
    if memory is not None:
        res["memory"] = {"limit": memory, "swap": memory}   # swap = limit: no swap on top of it
    (bundle / "config.json").write_text(json.dumps(cfg, indent=1))
    ws.cgroups.append(rel)
    return bundle, rel


def _run_one(ws: Workspace, runtime: str, name: str, args: list[str], memory: int | None,
             timeout: float) -> ContainerRun:
    bundle, rel = _bundle(ws, runtime, name, args, memory)
    pid_file = bundle / "container.pid"
    # runc keeps a stopped container (and its cgroup, with the OOM counter) until `delete`;
    # crun 1.8 has no --keep, so there the kernel log is the OOM report.
    keep = Path(runtime).name == "runc"
    cmd = [runtime, "--root", str(ws.runtime_root), "run", *(["--keep"] if keep else []),
           "--bundle", str(bundle), "--pid-file", str(pid_file), name]
    log = KernelLog()
    started = time.monotonic()
    run = ContainerRun(command=list(args), runtime=tool_version(runtime), memory_limit=memory)
    proc = None
    try:
        with signals_held():       # a signal cannot fall between starting the runtime and recording it
            ws.containers.append((runtime, name))
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
        inside_lines = []
        deadline = time.monotonic() + timeout
        while True:
            line = proc.stdout.readline()
            if not line:
                break
            if line.rstrip("\n") == MARKER:
                break
            inside_lines.append(line.rstrip("\n"))
            if time.monotonic() > deadline:
                raise CourseError(f"the container did not report within {timeout:g} s")
        if not inside_lines:
            proc.wait(timeout=timeout)
            err = proc.stderr.read().strip()
            raise _RuntimeFailed(err.splitlines()[-1] if err else f"{runtime} exited {proc.returncode}")
        run.inside = _parse_inside(inside_lines)
        pid = _wait_pid(pid_file, runtime, ws.runtime_root, name, timeout)
        run.outside = _outside_view(pid)
        proc.stdin.write("go\n")
        proc.stdin.close()
        proc.stdin = None          # communicate() must not flush it
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            subprocess.run([runtime, "--root", str(ws.runtime_root), "kill", name, "KILL"],
                           capture_output=True, timeout=10)
            out, err = proc.communicate(timeout=30)
            err += f"\ncourselib: killed after {timeout:g} s"
        run.seconds = round(time.monotonic() - started, 3)
        run.stdout, run.stderr = out, err
        run.exit_code = proc.returncode
        run.kernel_log = _kernel_lines(log.read(), rel)
        if keep:
            run.oom_kill_count, run.memory_events = _memory_counters(rel)
        else:
            run.oom_kill_count = sum(1 for ln in run.kernel_log if ln.startswith("oom-kill:"))
            run.memory_events = {"file": "kernel log (the runtime removed the cgroup)"}
        run.oom_killed = run.oom_kill_count > 0
        run.image = ws.base().describe()
        return run
    finally:
        log.close()
        if proc is not None and proc.poll() is None:
            subprocess.run([runtime, "--root", str(ws.runtime_root), "kill", name, "KILL"],
                           capture_output=True, timeout=10)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr) if proc is not None else ():
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.close()
        subprocess.run([runtime, "--root", str(ws.runtime_root), "delete", "--force", name],
                       capture_output=True, timeout=30)
        with contextlib.suppress(ValueError):
            ws.containers.remove((runtime, name))


def _kernel_lines(lines: list[str], rel: str) -> list[str]:
    """The kernel's OOM report lines about this container's cgroup, and the kill lines they name."""
    name = rel.lstrip("/")
    ours = [ln for ln in lines if name in ln]
    pids = {m.group(1) for ln in ours for m in [re.search(r"task_memcg=/?" + re.escape(name) + r",.*?pid=(\d+)", ln)] if m}
    return [ln for ln in lines if ln in ours or any(f"Killed process {p} " in ln for p in pids)]


def _wait_pid(pid_file: Path, runtime: str, root: Path, name: str, timeout: float) -> int:
    """The container's PID 1 as the host numbers it (the runtime writes it once the process runs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            return int(pid_file.read_text().strip())
        state = subprocess.run([runtime, "--root", str(root), "state", name], capture_output=True,
                               text=True, timeout=10)
        with contextlib.suppress(ValueError, KeyError):
            pid = int(json.loads(state.stdout)["pid"])
            if pid > 0:
                return pid
        time.sleep(0.02)
    raise CourseError(f"the runtime did not say the container's PID within {timeout:g} s")


class _RuntimeFailed(CourseError):
    """The runtime refused to start the container (e.g. crun on a hybrid cgroup host)."""


def run_container(args: list[str], *, memory: int | None = None, timeout: float = 60.0,
                  runtimes: tuple[str, ...] = RUNTIMES) -> ContainerRun:
    """Run ``args`` as PID 1 of a real container from the stand-in base image; what it saw and did.

    Tries each installed runtime in ``runtimes`` until one starts the container; the result names
    the one that ran and why any other did not. Nothing is left behind (see :class:`Workspace`).
    """
    if not args:
        raise InputError("no command to run in the container", field="CMD",
                         hint="e.g. courselib live container -- hostname")
    check_runtime()
    tried: list[dict] = []
    with workspace() as ws:
        for n, name in enumerate(r for r in runtimes if _which(r)):
            path = _which(name)
            try:
                run = _run_one(ws, path, f"c{n}", args, memory, timeout)
            except _RuntimeFailed as err:
                tried.append({"runtime": tool_version(name), "ran": False, "error": err.message})
                continue
            tried.append({"runtime": run.runtime, "ran": True})
            run.runtimes_tried = tried
            break
        else:
            raise CourseError("no OCI runtime could start the container: "
                              + "; ".join(f"{t['runtime']}: {t['error']}" for t in tried),
                              hint="see the runtime's message")
    run.left_behind = leftovers(ws)
    return run


def leftovers(ws: Workspace) -> dict:
    """What a closed workspace left on the machine (all empty when the clean-up worked)."""
    return {"directory": ws.root.exists(), "mounts": _mounts_below(ws.root),
            "cgroups": [str(d) for rel in ws.cgroups for d in cgroup_dirs(rel) if d.exists()]}


# ----------------------------------------------------------------------------- the builder

class Builder:
    """``buildah`` with a private storage root under a workspace, and the flags this machine needs."""

    FLAGS = ("--isolation", "chroot", "--layers")

    def __init__(self, ws: Workspace):
        check_builder()
        self.ws = ws
        self.buildah = _which("buildah")
        self.storage = ws.root / "storage"
        self.runroot = ws.root / "runroot"
        self.policy = ws.root / "policy.json"
        self.policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}]}))
        # buildah's own temporary files (a build's buildahNNN directory): in the workspace, so that a
        # build stopped by a signal, which buildah cannot clean up after, leaves nothing in TMPDIR
        self.tmp = ws.root / "tmp"
        self.tmp.mkdir(exist_ok=True)
        ws.builder = self
        self.version = tool_version("buildah")
        self._base_loaded = False
        self.running: list[subprocess.Popen] = []

    def _cmd(self, *args: str) -> list[str]:
        return [self.buildah, "--root", str(self.storage), "--runroot", str(self.runroot),
                "--storage-driver", "vfs", *args]

    def run(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BUILDAH_", "CONTAINERS_"))}
        env["BUILDAH_ISOLATION"] = "chroot"
        env["TMPDIR"] = str(self.tmp)
        # its own process group, so that an error or a signal stops buildah *and* the step it runs
        with signals_held():
            proc = subprocess.Popen(self._cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=env, start_new_session=True)
            self.running.append(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException as err:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if isinstance(err, subprocess.TimeoutExpired):
                raise OutOfTime(f"buildah {args[0]} did not finish within {timeout:g} s (stopped)") from None
            raise
        finally:
            self.running.remove(proc)
        res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if check and res.returncode != 0:
            msg = (res.stderr or res.stdout).strip().splitlines()
            raise CourseError(f"buildah {args[0]} failed: {msg[-1] if msg else res.returncode}")
        return res

    def load_base(self) -> BaseImage:
        """Import the stand-in base image into the builder's storage as :data:`BASE_IMAGE`."""
        base = self.ws.base()
        if not self._base_loaded:
            self.run("pull", "--signature-policy", str(self.policy), f"oci:{base.layout}:busybox")
            image_id = self.run("images", "-q", "--no-trunc").stdout.split()[0]
            self.run("tag", image_id, BASE_IMAGE)
            self._base_loaded = True
        return base

    def build(self, context: Path, *, dockerfile: str = "Dockerfile", tag: str = "localhost/courselib/app:latest",
              build_args: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        self.load_base()
        args = ["bud", *self.FLAGS, "--signature-policy", str(self.policy), "-f", str(context / dockerfile),
                "-t", tag]
        for k, v in (build_args or {}).items():
            args += ["--build-arg", f"{k}={v}"]
        return self.run(*args, str(context), timeout=timeout, check=False)

    def variant(self, name: str) -> str:
        """Another local base image: the stand-in with one label more (so a different image ID)."""
        self.load_base()
        ctr = self.run("from", "--signature-policy", str(self.policy), "--pull-never", BASE_IMAGE).stdout.strip()
        try:
            self.run("config", "--label", f"org.courselib.variant={name}", ctr)
            self.run("commit", "--signature-policy", str(self.policy), ctr, name)
        finally:
            self.run("rm", ctr, check=False)
        return name

    def image_id(self, ref: str) -> str | None:
        res = self.run("images", "--noheading", "--no-trunc", "--format", "{{.ID}}", ref, check=False)
        ids = res.stdout.split()
        return ids[0] if res.returncode == 0 and ids else None

    def remove_all(self) -> None:
        if self.storage.exists():
            self.run("rm", "--all", check=False, timeout=120)
            self.run("rmi", "--all", "--force", check=False, timeout=120)


# ----------------------------------------------------------------------------- experiments

MiB = 1024 * 1024


def oom_experiments(limit: int = 32 * MiB, hog: int = 64 * MiB) -> list[dict]:
    """Chapter 3's two real containers, each with courselib's prediction made before it runs.

    ``pid1``: PID 1 itself (``dd`` with a ``hog``-byte buffer) exceeds the limit. ``child``: PID 1
    is a shell that starts the same ``dd`` as its child, waits for it and exits 0.
    """
    from courselib.sim.memcg import simulate, summary

    dd = ["dd", "if=/dev/zero", "of=/dev/null", f"bs={hog // MiB}M", "count=1"]
    cases = [("pid1", dd),
             ("child", ["sh", "-c", " ".join(dd) + ' & wait $!; echo "PID 1: my child dd exited with $?"'])]
    out = []
    for name, args in cases:
        run = run_container(args, memory=limit)
        # the prediction, from what was measured before "go": PID 1's size; dd grows to `hog`
        rss_pages = run.outside["rss_kib"] * 1024 // PAGE_SIZE
        procs = [ProcessSpec(Task("dd", rss_pages, 0, 0, 0), "/", grow=hog * 10, grow_by=hog)]
        if name == "child":
            procs = [ProcessSpec(Task("sh (PID 1)", rss_pages, 0, 0, 0), "/"),
                     ProcessSpec(Task("dd", 0, 0, 0, 0), "/", grow=hog * 10, grow_by=hog)]
        pred = summary(simulate(OomScenario(scope="memcg", limit=limit // PAGE_SIZE, processes=tuple(procs),
                                            cgroup="v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists()
                                            else "v1", duration=1.0, step=0.01)))
        d = run.as_dict()
        d["case"] = name
        # the container's exit status is PID 1's: 137 if the model kills PID 1, else what PID 1's
        # own script returns (its last command, echo, succeeds: 0)
        pid1 = procs[0].name
        d["prediction"] = {"victim": pred["victim"], "killed": pred["killed"],
                           "oom_kill": pred["events"]["oom_kill"], "pid1": pid1,
                           "container_exit_code": pred["exit_codes"][pid1] or 0}
        out.append(d)
    return out


RECORDED = {"show": "container-show.json", "oom": "container-oom.json", "seed": "container-seed.json",
            "rebuild": "container-rebuild.json"}


def recorded(kind: str) -> dict:
    """A run recorded on the course's CI machine by the same code (``kind``: show, oom, rebuild)."""
    data = _recorded.load(RECORDED.get(kind, f"container-{kind}.json"))
    if kind == "show" and "run" not in data:     # written by `courselib live container --record`
        data = {"run": data, "recorded_on": data.get("recorded_on")}
    data["recorded"] = True
    return data


def source(kind: str, make) -> _recorded.Source[dict]:
    """``make()`` where containers (``kind`` rebuild or seed: the builder too) can run here, else
    the recorded run ``kind``; ``recorded`` in the dict says which. A live run that runs out of its
    time budget (:class:`OutOfTime`, e.g. real builds on a machine too busy for a page's cell time
    limit) also gives the recorded run (:func:`courselib.live.recorded.live_or_recorded`)."""
    def run() -> dict:
        data = make()
        data["recorded"] = False
        data["recorded_on"] = _recorded.machine_note()
        return data

    def recording() -> _recorded.Recording[dict]:
        data = recorded(kind)
        return _recorded.Recording(data, data.get("recorded_on") or "the course's CI machine")
    return _recorded.Source(run, recording, lambda: unavailable_reason(builder=kind in ("rebuild", "seed")))


#: Chapter 1's (and 4's) command: the hostname, then what the image lacks — GPU device files and the
#: driver's user-space library, which the NVIDIA Container Toolkit adds at run time.
SHOW_COMMAND = ["sh", "-c", "hostname; ls -d /dev/nvidia0 /usr/lib/x86_64-linux-gnu/libcuda.so.1 2>&1; exit 0"]


def show_run() -> dict:
    """Chapter 1's run: one container, its inside and outside views side by side."""
    return {"run": run_container(SHOW_COMMAND).as_dict()}


def memory_cgroup(lines: list[str]) -> str:
    """The memory cgroup's path from ``/proc/PID/cgroup`` lines (v1 ``memory``, else the v2 line)."""
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            return parts[2]
    return next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), "-")
