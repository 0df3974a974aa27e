"""The second storey every real system stands on: daemons started, watched and stopped by PID.

A real system here — the local Slurm (:mod:`courselib.live.slurm`), the local Kubernetes control
plane (:mod:`courselib.live.kube`) and whatever joins it — is a handful of daemons that one command
starts and a later one stops. What they share lives here, on top of :mod:`courselib.live.state`
(the private record, process stamps, directories carrying our token) and
:mod:`courselib.live.cleanup` (signals that unwind, ``stop_pids``):

- :class:`Daemon` — one process we started: its role, PID, start time and boot ID (so a reused PID
  is never signalled) and its command line (shown, never trusted).
- :class:`Launcher` — *how* a command is launched. The default runs the host's program as
  written; a system whose programs live in another root (``chroot`` with bind mounts that must be
  undone) passes its own launcher, and nothing else changes: every daemon and every client command
  goes through :meth:`Launcher.command`, and :meth:`Launcher.setup` / :meth:`Launcher.undo` run
  before the first daemon and after the last one stopped. A launcher is saved in the system's
  record (:meth:`Launcher.to_json`), so a later ``down`` undoes what an earlier ``up`` set up.
- :class:`System` — what a running system's record can do: :meth:`~System.spawn` a daemon (logged,
  recorded before any signal can fall between the fork and the record), :meth:`~System.wait_for` a
  condition while watching for a daemon that died (its log's last error in the message),
  :meth:`~System.log_tail`, :meth:`~System.stop` its daemons group by group, and
  :meth:`~System.forget` (remove its directory and record, only if they still carry its token).
- :func:`bring_up` — the one way a system starts: a fresh token and owned directory, then the
  system's own start; on any error, Ctrl-C, SIGTERM or SIGHUP, its own ``down`` before re-raising.

Each system keeps what is its own (its shape, its configuration files, its readiness checks, the
order its daemons stop in); nothing here names Slurm or Kubernetes.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Iterable, Sequence, TypeVar

from courselib.errors import CourseError
from courselib.live.cleanup import alive, cleanup_on_signals, reap, signals_held, stop_pids
from courselib.live.nodes import port_free
from courselib.live.state import (ProcessStamp, StateFile, make_owned_dir, new_token, owns_dir,
                                  remove_owned_dir)

#: A log line that says something went wrong (Go's klog E/F prefixes, or the words).
_BAD_LINE = re.compile(r"\b(E\d{4}|F\d{4}|error|fatal|panic)", re.I)


# ----------------------------------------------------------------------------- where builds go

def cache_dir() -> Path:
    """Where the build steps (k8s/build.sh, .ci/build.d/) put what they build, one folder per
    component and version (``$COURSELIB_CACHE`` overrides; else ``$XDG_CACHE_HOME`` or ~/.cache)."""
    env = os.environ.get("COURSELIB_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "allornothing"


# ----------------------------------------------------------------------------- one daemon

@dataclass
class Daemon:
    """A process a system started: its role, PID, start time (``/proc/PID/stat`` field 22) and boot
    ID, and its command line (shown, never trusted)."""
    role: str
    pid: int
    argv: list[str] = field(default_factory=list)
    start_ticks: int | None = None
    boot_id: str | None = None

    @classmethod
    def started(cls, role: str, pid: int, argv: Sequence[str] = ()) -> "Daemon":
        """The record of ``pid``, just started (stamped now, while it surely is the one we started)."""
        stamp = ProcessStamp.of(pid)
        return cls(role, pid, list(argv), stamp.start_ticks if stamp else None,
                   stamp.boot_id if stamp else None)

    @property
    def stamp(self) -> ProcessStamp | None:
        if self.start_ticks is None or self.boot_id is None:
            return None
        return ProcessStamp(self.pid, self.start_ticks, self.boot_id)

    def is_ours(self) -> bool:
        """Is ``pid`` still the very process we started (same start time, same boot)?

        A command line can be copied by anyone; a start time cannot."""
        stamp = self.stamp
        return stamp is not None and stamp.matches()

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Daemon":
        """Read a record back; raises TypeError/ValueError/KeyError (one line via StateFile.load)."""
        if not isinstance(d, dict):
            raise ValueError(f"a process entry is {type(d).__name__}, not an object")
        role, argv = d["role"], d.get("argv", [])
        if not isinstance(role, str) or not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            raise ValueError("a process entry's role or argv is not text")
        stamp = ProcessStamp.from_json(d)
        return cls(role, stamp.pid, argv, stamp.start_ticks, stamp.boot_id)


# ----------------------------------------------------------------------------- how it is launched

class Launcher:
    """How a command is launched: the host's program, as written (the default).

    A subclass changes where programs are found and how a command line is wrapped (e.g. ``chroot
    ROOT …`` after bind-mounting the work directory into ROOT), sets up before the first daemon and
    undoes after the last. Register it with :func:`register_launcher` so a saved record can name it.
    """
    kind: ClassVar[str] = "host"

    def which(self, cmd: str) -> str | None:
        """Where ``cmd`` is (``None``: not installed). The host's PATH, then /usr/sbin and /sbin."""
        return shutil.which(cmd) or next((p for p in (f"/usr/sbin/{cmd}", f"/sbin/{cmd}")
                                          if os.access(p, os.X_OK)), None)

    def command(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs ``argv`` (a daemon or a client command)."""
        return list(argv)

    def setup(self, work: Path) -> None:
        """Before the first daemon starts, with the system's work directory (nothing on the host)."""

    def undo(self) -> list[str]:
        """After the last daemon stopped: undo :meth:`setup`; what could not be undone (none here)."""
        return []

    def describe(self) -> str:
        return "the host's programs"

    def to_json(self) -> dict:
        return {"kind": self.kind}

    @classmethod
    def from_json(cls, d: dict) -> "Launcher":
        """The launcher a record names (``{"kind": "host"}`` when the record names none)."""
        kind = (d or {}).get("kind", "host")
        if kind not in LAUNCHERS:
            raise ValueError(f"launcher {kind!r} is not one this courselib knows")
        return LAUNCHERS[kind]._from_json(d or {})

    @classmethod
    def _from_json(cls, d: dict) -> "Launcher":
        return cls()


LAUNCHERS: dict[str, type[Launcher]] = {"host": Launcher}


def register_launcher(cls: type[Launcher]) -> type[Launcher]:
    """Make ``cls`` known by its ``kind`` to :meth:`Launcher.from_json` (usable as a decorator)."""
    LAUNCHERS[cls.kind] = cls
    return cls


HOST = Launcher()


# ----------------------------------------------------------------------------- a running system

class System:
    """What a running system's record can do; a mixin for a dataclass with ``state_dir``, ``token``,
    ``procs`` (a list of :class:`Daemon`) and ``launcher``, and a ``save()`` that writes its record.

    ``logs`` names the log files of a role where they are not ``log/<role>.log``
    (:meth:`log_files`)."""
    state_dir: Path
    token: str
    procs: list[Daemon]
    launcher: Launcher

    def save(self) -> None:  # pragma: no cover - every system writes its own record
        raise NotImplementedError

    # ---- starting ------------------------------------------------------------------------
    def log_files(self, role: str) -> list[Path]:
        """Where ``role``'s log is (its own log file first, then what it printed)."""
        return [self.state_dir / "log" / f"{role}.log"]

    def spawn(self, role: str, argv: Sequence[str], *, env: dict[str, str]) -> Daemon:
        """Start ``argv`` as ``role`` (through the launcher), its output appended to the last of
        :meth:`log_files`; recorded in ``procs`` and saved before any signal can interrupt."""
        log = open(self.log_files(role)[-1], "ab")
        try:
            with signals_held():  # no signal between the fork and the record
                popen = subprocess.Popen(self.launcher.command(argv), env=env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         cwd=self.state_dir)
                daemon = Daemon.started(role, popen.pid, argv)
                self.procs.append(daemon)
                self.save()
        finally:
            log.close()
        return daemon

    def dead(self) -> list[Daemon]:
        """The daemons that are no longer running."""
        return [p for p in self.procs if not alive(p.pid)]

    def wait_for(self, predicate: Callable[[], object], timeout: float, what: str, *,
                 interval: float = 0.2):
        """``predicate()``'s first true value, polled every ``interval`` s; a one-line error as soon
        as one of the daemons has died (with its log's last error), or after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            dead = self.dead()
            if dead:
                log = self.log_tail(dead[0].role)
                raise CourseError(f"{dead[0].role} (PID {dead[0].pid}) exited while starting"
                                  + (f": {log}" if log else ""), hint=self.log_hint())
            if time.monotonic() > deadline:
                raise CourseError(f"{what} did not happen within {timeout:g} s", hint=self.log_hint())
            time.sleep(interval)

    def log_hint(self) -> str:
        return f"see the logs in {self.state_dir}/log"

    def log_tail(self, role: str, n: int = 1) -> str:
        """The last ``n`` lines of ``role``'s log that say something went wrong (else its last
        lines), joined with `` | ``; empty if it wrote nothing."""
        for path in self.log_files(role):
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            bad = [ln for ln in lines if _BAD_LINE.search(ln)]
            if bad or lines:
                return " | ".join(ln.strip()[:300] for ln in (bad or lines)[-n:])
        return ""

    # ---- running -------------------------------------------------------------------------
    def all_ours(self) -> bool:
        """Is every recorded daemon still running (and still the one we started)?"""
        return bool(self.procs) and all(p.is_ours() for p in self.procs)

    def owns_dir(self) -> bool:
        """Is the state directory still the one this system made (our token inside)?"""
        return owns_dir(self.state_dir, self.token)

    def processes(self) -> list[dict]:
        """Each daemon's role, PID and whether it still runs (for ``status``)."""
        return [{"role": p.role, "pid": p.pid, "alive": p.is_ours()} for p in self.procs]

    # ---- stopping ------------------------------------------------------------------------
    def stop(self, groups: Iterable[Iterable[Daemon]], *, grace: float = 5.0) -> tuple[list[dict], list[int]]:
        """Stop the daemons group by group (SIGTERM, ``grace`` s, SIGKILL; only those still ours),
        reaping each. Returns what was stopped and the PIDs that would not stop."""
        stopped: list[dict] = []
        left: list[int] = []
        for group in groups:
            group = list(group)
            pids = [p.pid for p in group if p.is_ours()]
            if pids:
                left += stop_pids(pids, grace=grace)
                stopped += [{"role": p.role, "pid": p.pid} for p in group if p.pid in pids]
            for p in group:
                reap(p.pid)
        return stopped, left

    def forget(self, record: StateFile) -> dict:
        """After every daemon stopped: undo the launcher's set-up, then remove the state directory
        (only if it still holds our token) and the record (only if it still names our token).

        Returns ``kept_dir`` (a directory left in place because it is not ours) and ``not_undone``
        (what the launcher could not undo: then the directory and the record stay, so that a later
        ``down`` can try again and nothing is removed through a mount)."""
        not_undone = self.launcher.undo()
        if not_undone:
            return {"kept_dir": str(self.state_dir), "not_undone": not_undone}
        kept = None
        if not remove_owned_dir(self.state_dir, self.token) and os.path.lexists(self.state_dir):
            kept = str(self.state_dir)
        with contextlib.suppress(CourseError):
            rec = record.load()
            if rec is not None and rec.get("token") == self.token:
                record.remove()
        return {"kept_dir": kept, "not_undone": []}


def record_fields(d: dict) -> tuple[Path, str, list[Daemon], float]:
    """The fields every system's state record shares (state_dir, token, procs, started_at), checked
    as :meth:`System.to_json` writes them; anything else raises ValueError (one line, via StateFile)."""
    state_dir, token, procs = d["state_dir"], d["token"], d["procs"]
    if not isinstance(state_dir, str) or not os.path.isabs(state_dir):
        raise ValueError(f"state_dir {state_dir!r} is not an absolute path")
    if not isinstance(token, str) or len(token) < 16:
        raise ValueError("no token")
    if not isinstance(procs, list):
        raise ValueError("procs is not a list")
    started = d.get("started_at", 0.0)
    if isinstance(started, bool) or not isinstance(started, (int, float)):
        raise ValueError(f"started_at {started!r} is not a time")
    return Path(state_dir), token, [Daemon.from_json(p) for p in procs], float(started)


def status_of(system: System | None, record: StateFile) -> dict:
    """What is recorded and what really runs, as ``status --json`` prints it (the system adds its own)."""
    if system is None:
        return {"up": False, "state_file": str(record.path)}
    procs = system.processes()
    return {"up": bool(procs) and all(p["alive"] for p in procs), "state_file": str(record.path),
            "state_dir": str(system.state_dir), "processes": procs}


def marked_pids(marks: dict[str, str]) -> list[int]:
    """PIDs (other than this one) whose environment carries every ``NAME=VALUE`` of ``marks``: what a
    system's daemons started that is not their child any more (job steps, a hub's notebook servers and
    their kernels). Empty marks or an empty value find nothing."""
    if not marks or not all(marks.values()):
        return []
    needles = {f"{k}={v}".encode() for k, v in marks.items()}
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needles <= set(environ.split(b"\0")):
            out.append(int(entry.name))
    return sorted(out)


def check_ports(ports: Iterable[int], *, what: str = "", hint: str = "stop what uses them, or "
                "choose other ports with --port") -> None:
    """A one-line error naming every port of ``ports`` something else listens on (127.0.0.1)."""
    busy = [p for p in ports if not port_free(p)]
    if busy:
        raise CourseError(f"port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} "
                          f"already in use on 127.0.0.1{what}", hint=hint)


S = TypeVar("S", bound=System)


def bring_up(prefix: str, make: Callable[[str, Path], S], start: Callable[[S], None],
             down: Callable[[S], object]) -> S:
    """Start a system: a new token and a directory holding it (``prefix`` + random), ``make(token,
    directory)`` its record, then ``start(system)``. On any error, and on Ctrl-C, SIGTERM or SIGHUP,
    ``down(system)`` stops whatever started and removes the directory before the error propagates."""
    token = new_token()
    with cleanup_on_signals():
        system = make(token, make_owned_dir(prefix, token))
        try:
            start(system)
        except BaseException:
            down(system)
            raise
    return system
