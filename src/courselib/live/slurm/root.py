"""The course's Slurm: Debian's own packages of the pinned release, in a root of their own.

The release the course runs (``courselib/data/versions.toml``, ``[slurm]``) is newer than the
Debian 12 machines the course is built on can install: Debian builds it against a newer glibc. So
``.ci/build.d/20-slurm.sh`` (``make setup-slurm``) makes a minimal Debian root holding exactly those
packages with Debian's ``mmdebstrap``, once per version, in
``~/.cache/allornothing/slurm-<version>/root``, and :class:`RootLauncher` runs every daemon and every
client command from it.

**How a command runs.** Each command gets a private mount namespace (``unshare --mount``, private
propagation) in which ``/proc``, ``/sys``, ``/dev``, the host's ``/etc/hosts`` and the cluster's state
directory are bind-mounted into the root, then ``chroot ROOT argv``. The mounts exist only inside that
namespace: the host never sees them, and they vanish with the namespace's last process — so no exit
path, not even ``kill -9`` of courselib or of a daemon, can leave a mount behind. The daemons still
share what a cluster needs: the loopback network (same network namespace), the state directory (the
same host directory, bind-mounted) and the process table (``down`` finds job steps by their
environment in ``/proc`` as before). :meth:`RootLauncher.undo` proves it after the last daemon
stopped: it fails, naming the process, if any process still holds a mount inside the root, and
removes the empty mount point it made for the state directory.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Sequence

from courselib.live.daemons import Launcher, cache_dir, register_launcher
from courselib.versions import pinned

#: The shell run inside the new mount namespace: bind the host's /proc, /sys, /dev, /etc/hosts (and
#: the state directory, when there is one) into the root, then chroot. ``$1`` the root, ``$2`` the
#: state directory ("" for none), the rest the command.
_INSIDE = ('r=$1; w=$2; shift 2; '
           'mount --rbind /proc "$r/proc" && mount --rbind /sys "$r/sys" && '
           'mount --rbind /dev "$r/dev" && mount --bind /etc/hosts "$r/etc/hosts" && '
           '{ [ -z "$w" ] || mount --bind "$w" "$r$w"; } && exec chroot "$r" "$@"')


def pinned_version() -> str:
    """The Slurm release the course runs and checks (``26.05.5``)."""
    return pinned("slurm").version


def root_dir(version: str | None = None) -> Path:
    """Where ``make setup-slurm`` puts the root of ``version`` (default: the pinned one)."""
    return cache_dir() / f"slurm-{version or pinned_version()}" / "root"


def built(version: str | None = None) -> bool:
    """Is the root of ``version`` built (its stamp for the pinned Debian package version there)?"""
    row = pinned("slurm")
    return (root_dir(version).parent / f".built-{row.get('debian_version')}").is_file()


def mounts_under(path: Path, *, exact: bool = False, root: Path | None = None) -> list[tuple[int, str]]:
    """Every (PID, mount point) at or under ``path`` (only at it: ``exact``) in any process's mount
    table, the host's included; one entry per process. A process ``chroot``-ed into ``root`` sees
    its mount points relative to that root (``/proc/PID/mountinfo``), so for it ``path`` is looked
    for as seen from inside."""
    where = str(path).rstrip("/")
    inside = None
    if root is not None and where.startswith(str(root).rstrip("/") + "/"):
        inside = where[len(str(root).rstrip("/")):]
    real_root = os.path.realpath(root) if root is not None else None
    seen: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "mountinfo").read_text()
            chrooted = real_root is not None and os.path.realpath(entry / "root") == real_root
        except OSError:
            continue
        want = inside if chrooted and inside is not None else where
        for line in text.splitlines():
            fields = line.split()
            point = fields[4] if len(fields) > 4 else ""
            if point == want or (not exact and point.startswith(want + "/")):
                seen.append((int(entry.name), point))
                break
    return seen


def host_mounts_under(path: Path) -> list[str]:
    """Mount points at or under ``path`` in this process's own mount table (the host's view)."""
    where = str(path).rstrip("/")
    points = [ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text().splitlines()
              if len(ln.split()) > 4]
    return [p for p in points if p == where or p.startswith(where + "/")]


@register_launcher
class RootLauncher(Launcher):
    """Run Slurm from its own root: ``unshare --mount`` + bind mounts + ``chroot`` (module doc)."""
    kind = "chroot"

    def __init__(self, root: Path | str | None = None, work: Path | str | None = None):
        self.root = Path(root) if root is not None else root_dir()
        self.work = Path(work) if work is not None else None

    def which(self, cmd: str) -> str | None:
        for d in ("usr/sbin", "usr/bin", "sbin", "bin"):
            if os.access(self.inside(f"/{d}/{cmd}"), os.X_OK):
                return f"/{d}/{cmd}"
        return None

    def inside(self, path: str, hops: int = 16) -> Path:
        """Where ``path`` (as the chroot sees it) is on the host, its symlinks followed *inside* the
        root: Debian's ``/usr/sbin/slurmctld -> /etc/alternatives/slurmctld -> /usr/sbin/slurmctld-wlm``
        names the root's own files, not the host's (a host without that alternative found no slurmctld)."""
        here = self.root / path.lstrip("/")
        for _ in range(hops):
            if not here.is_symlink():
                return here
            target = os.readlink(here)
            here = (self.root / target.lstrip("/")) if target.startswith("/") else here.parent / target
        return here

    def command(self, argv: Sequence[str]) -> list[str]:
        unshare = shutil.which("unshare") or "/usr/bin/unshare"
        return [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", _INSIDE, "sh",
                str(self.root), str(self.work or ""), *argv]

    def _mount_point(self) -> Path | None:
        return self.root / str(self.work).lstrip("/") if self.work is not None else None

    def setup(self, work: Path) -> None:
        """Remember the state directory and make its mount point inside the root."""
        self.work = Path(work)
        self._mount_point().mkdir(mode=0o700, parents=True, exist_ok=True)

    def undo(self) -> list[str]:
        """After the last daemon: no process may still hold this cluster's mounts (found by the
        state directory's mount point, which only this cluster's namespaces have) and the host may
        have nothing mounted in the root; then remove the (empty) mount point and the empty folders
        above it. What is still mounted is returned, naming the process."""
        point = self._mount_point()
        held = [f"{p} is mounted on the host" for p in host_mounts_under(self.root)]
        if point is not None:
            held += [f"{p} is still mounted (in PID {pid}'s mount namespace)"
                     for pid, p in mounts_under(point, exact=True, root=self.root)]
        if held:
            return held
        if point is not None:
            tmp_root = self.root / "tmp"
            while point != self.root and point != tmp_root and point.is_relative_to(self.root):
                try:
                    point.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    break  # not empty (not ours): leave it
                point = point.parent
        return []

    def describe(self) -> str:
        return f"Debian's Slurm in {self.root} (chroot, private mount namespace)"

    def to_json(self) -> dict:
        return {"kind": self.kind, "root": str(self.root),
                "work": str(self.work) if self.work is not None else None}

    @classmethod
    def _from_json(cls, d: dict) -> "RootLauncher":
        root, work = d.get("root"), d.get("work")
        if not isinstance(root, str) or not os.path.isabs(root):
            raise ValueError(f"launcher root {root!r} is not an absolute path")
        if work is not None and (not isinstance(work, str) or not os.path.isabs(work)):
            raise ValueError(f"launcher work {work!r} is not an absolute path")
        return cls(root, work)
