"""Where the student's code runs while a lab is graded, and how the grader gets all of it back.

The student's answers run in a separate Python process (:mod:`courselib.grading.worker`) that

- sees a **private, read-only view** of the machine (:mod:`courselib.grading.jail`): only what Python
  and courselib need, read-only; its own ``/proc``, ``/dev``, ``/tmp`` (``TMPDIR``) and
  ``/home/student`` (``HOME``), the last two private and writable and gone when it ends. The
  checkout (``.git``, ``solutions/``), other submissions, the instructor's hidden checks, the
  grader's reports, locks and temporary folders are not in it at all; no network (its own, empty,
  network namespace); no other process of the machine (its own PID namespace);
- starts with a **clean environment** (no variable of the grader's: CI secrets stay out of reach) and
  is told nothing of the notebook it came from (the grader sends cell sources over a socket);
- runs, when the grader is root, as a **separate unprivileged user** (a uid no account or process
  uses, claimed under a lock in a root-only folder) with no supplementary groups and
  ``no_new_privs``; a grader that is not root refuses unless **same-user mode** was asked for
  (``same_user=True``, ``courselib grade --same-user``: the student grading their own work): then the
  code runs as the grader's own user, but still in the private read-only view, through user
  namespaces, and the report carries a warning;
- in **container isolation** (``COURSELIB_GRADE_ISOLATION=container``, which only an autograder bundle built
  with ``--isolation container`` sets: Gradescope's Docker refuses namespaces), runs as the separate uid in
  the throw-away container itself, in a fresh private HOME, without namespaces — asked for, never a fallback;
- **fails closed**: when that process cannot be started as asked (no root, no namespaces, a full
  disk…), :class:`SandboxError` says why and the student gets zero points with that reason. There is
  no fallback to a sandbox with more privilege or less hiding;
- has its **own session and process group**; the grader is a child subreaper;
- is interrupted (SIGINT) when a request runs past its time limit, and killed (SIGKILL) when it has
  not answered ``grace`` seconds later;
- is, with every process it started, **killed at the end**, and the grader waits until none is left
  before it writes any report.

The channel is bounded: a reply larger than :data:`MAX_MESSAGE` or nested deeper than JSON can be
read ends that process cleanly (:class:`Stopped`), never the grader.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import grp
import json
import os
import pwd
import resource
import select
import site
import stat
import shutil
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import courselib
from courselib.errors import CourseError
from courselib.grading import jail

MAX_MESSAGE = 16 * 1024 * 1024          # the largest reply the grader reads
UID_RANGE = range(64_100, 64_900)   # no passwd entry: a user that owns nothing on the machine
FILE_LIMIT = 64 * 1024 * 1024        # the largest file the student's code may write
PROCESS_LIMIT = 256                 # processes of the unprivileged user (a fork bomb stops here)
STARTUP_S = 120.0
PR_SET_DUMPABLE, PR_GET_DUMPABLE, PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 4, 3, 1, 38
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
_LIBC = None


class Stopped(Exception):
    """A request did not complete: ``kind`` is "timeout" (still running at the limit) or "died"."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _prctl(option: int, arg: int = 0) -> int:
    try:
        return _libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0)
    except (OSError, AttributeError):
        return -1


def _get_subreaper() -> int:
    value = ctypes.c_int(0)
    try:
        _libc().prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0)
    except (OSError, AttributeError):
        return 0
    return value.value


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    sid: int
    uid: int
    zombie: bool


def processes() -> list[Proc]:
    """Every process on the machine: pid, parent, session, real uid, whether it is a zombie."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            with open(f"/proc/{name}/status", "rb") as f:
                status = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        uid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:")), -1)
        out.append(Proc(int(name), int(fields[1]), int(fields[3]), uid, fields[0] in ("Z", "X")))
    return out


def _descendants(of: int, table: list[Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in table:
        children.setdefault(p.ppid, []).append(p.pid)
    found, todo = set(), [of]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def _uid_in_use(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        pass
    try:
        grp.getgrgid(uid)
        return True
    except KeyError:
        pass
    return any(p.uid == uid for p in processes())


def parse_reply(body: bytes, ident: int) -> dict | None:
    """The worker's reply to request ``ident``, in the shape the grader reads, or None for noise.

    Everything here came from the student's process: anything that is not JSON, not an object or not
    the reply to ``ident`` is skipped; JSON nested too deeply to read ends that process
    (:class:`Stopped`), never the grader; ``error`` becomes two strings, ``values`` a dict by name.
    """
    try:
        reply = json.loads(body.decode("utf-8"))
    except RecursionError:
        raise Stopped("died", "it sent a message nested too deeply to read") from None
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(reply, dict) or type(reply.get("id")) is not int or reply["id"] != ident:
        return None
    out: dict = {"id": ident, "error": None}
    err = reply.get("error")
    if err is not None:
        parts = [x if isinstance(x, str) else "" for x in (err[:2] if isinstance(err, list) else [])] + ["", ""]
        out["error"] = [parts[0][:200] or "Exception", parts[1][:4000]]
    if isinstance(reply.get("values"), dict):
        out["values"] = {k: v for k, v in reply["values"].items() if isinstance(k, str)}
    if "value" in reply:
        out["value"] = reply["value"]
    out["ready"] = reply.get("ready") is True
    return out


class SandboxError(CourseError):
    """The student's process could not be started as asked: the student gets zero points with this reason."""


def _private_dir() -> Path:
    """A folder only the grader's user can write: its locks live there, never in a shared /tmp."""
    euid = os.geteuid()
    candidates = ([Path("/run/courselib-grade")] if euid == 0 else []) + [
        Path(os.environ.get("XDG_RUNTIME_DIR") or "/nonexistent") / "courselib-grade",
        Path.home() / ".cache" / "courselib-grade" if euid != 0 else Path("/var/lib/courselib-grade")]
    last = ""
    for path in candidates:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as err:
            last = f"{path}: {err.strerror}"
            continue
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == euid and not st.st_mode & 0o077:
            return path
        last = f"{path} is not a private folder of uid {euid} (a symlink, another owner, or open to others)"
    raise SandboxError(f"no private folder for the grader's locks: {last}")


def _claim_uid():
    """A uid/gid no account uses and no process runs as, locked for this grading (lock files: private folder)."""
    folder = _private_dir()
    for uid in UID_RANGE:
        try:
            lock = os.open(folder / f"uid-{uid}.lock",
                           os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as err:
            raise SandboxError(f"cannot open the grader's lock file in {folder}: {err.strerror}") from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue
        if _uid_in_use(uid):
            os.close(lock)
            continue
        return uid, lock
    raise SandboxError(f"no free user id in {UID_RANGE.start}-{UID_RANGE.stop - 1} to run the student's code as")


def courselib_root() -> str:
    """The folder Python finds courselib in: bound read-only into the view (the package alone when that
    folder is a checkout, so ``.git`` and ``solutions/`` never come with it)."""

    pkg = Path(courselib.__file__).resolve().parent
    parent = pkg.parent
    if any((parent / name).exists() for name in (".git", "solutions", "labs", "pyproject.toml")):
        return str(pkg)
    return str(parent)


def view_paths() -> list[str]:
    """What the student's Python needs from the machine (read-only): the interpreter, its libraries, courselib."""

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable)), courselib_root()}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            paths.add(sysconfig.get_path(key))
    with contextlib.suppress(AttributeError):
        paths.update(site.getsitepackages())
    roots = [p for p in (sys.prefix, sys.base_prefix) if p]
    for entry in sys.path:      # .pth-added folders inside the interpreter's prefixes only (never a checkout)
        if entry and os.path.isdir(entry) and any(os.path.abspath(entry).startswith(r.rstrip("/") + "/") for r in roots):
            paths.add(entry)
    return sorted(p for p in paths if p and os.path.exists(p))


def _clean_env() -> dict[str, str]:
    bindir = os.path.dirname(sys.executable)
    pythonpath = courselib_root()
    if os.path.basename(pythonpath) == "courselib":
        pythonpath = os.path.dirname(pythonpath)
    return {
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": jail.HOME, "TMPDIR": jail.TMP,
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PYTHONPATH": pythonpath,
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
    }


ISOLATION_ENV = "COURSELIB_GRADE_ISOLATION"   # "container": asked for by an autograder bundle (see start)
SAME_USER_WARNING = ("same-user mode: the student's code ran as the grader's own user (in a private, read-only "
                     "view of the machine); grade as root for a separate user")


class Sandbox:
    """One student process at a time (restarted after a kill); everything it starts dies with it."""

    def __init__(self, *, grace: float = 5.0, same_user: bool | None = None, hide=()):
        self.grace = grace
        # `hide` is kept for callers: the view shows only what Python needs, so nothing else is to hide
        self.hide = [Path(p).resolve() for p in hide]
        self.same_user = bool(same_user)
        self.uid: int | None = None
        self._lock: int | None = None
        self.base = Path(tempfile.mkdtemp(prefix="courselib-grade-"))   # 0700, the grader's: logs, the view's root
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self._next = 1
        self.note = SAME_USER_WARNING if self.same_user else ""
        self.refused = ""
        self._me = os.getpid()
        self._before = _descendants(self._me, processes())
        self._subreaper = _get_subreaper()
        self._dumpable = _prctl(PR_GET_DUMPABLE)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_DUMPABLE, 0)      # the grader's /proc/PID/* closed to every other process of its user
        self.container = os.environ.get(ISOLATION_ENV, "") == "container"
        self._homes: list[Path] = []
        if os.environ.get(ISOLATION_ENV, "") not in ("", "container"):
            self.refused = f"{ISOLATION_ENV}={os.environ[ISOLATION_ENV]!r} is not an isolation courselib knows"
        elif self.container and self.same_user:
            self.refused = "container isolation runs the student's code as a separate user: not with --same-user"
        elif not self.same_user:
            if os.geteuid() != 0:
                self.refused = ("the grader is not root, so it cannot run the student's code as a separate user: "
                                "run it as root (sudo), or, to grade your own notebook, pass --same-user")
            else:
                try:
                    self.uid, self._lock = _claim_uid()
                except SandboxError as err:
                    self.refused = str(err)

    # --- the isolation this run got, in words (for the report) ---------------------------------------
    @property
    def isolation(self) -> str:
        if self.refused:
            return "none: the student's code did not run"
        view = "a private read-only view of the machine, no network, clean environment, own session"
        if self.container:
            return (f"a separate unprivileged user (uid {self.uid}) in the autograder's own throw-away container "
                    f"(container isolation, asked for: no namespaces; the instructor's files root-only), clean "
                    f"environment, own session")
        if self.uid is not None:
            return f"a separate unprivileged user (uid {self.uid}), {view}"
        return f"the grader's own user (same-user mode, asked for), {view}"

    # --- starting --------------------------------------------------------------------------------------
    def _enter(self):
        """Run in the child before ``exec``: limits, then new namespaces (a user namespace in same-user mode)."""
        same_user = self.same_user
        euid, egid = os.geteuid(), os.getegid()
        flags = jail.CLONE_NEWNS | jail.CLONE_NEWPID | jail.CLONE_NEWIPC | jail.CLONE_NEWNET
        if same_user:
            flags |= jail.CLONE_NEWUSER

        def enter():
            try:
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
                if not same_user:
                    resource.setrlimit(resource.RLIMIT_NPROC, (PROCESS_LIMIT, PROCESS_LIMIT))
                _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                jail.unshare(flags, "new namespaces for the student's code")
                if same_user:
                    jail.write_maps(0, euid, egid)
            except BaseException as err:
                os.write(2, f"courselib sandbox: {err}\n".encode())
                raise

        return enter

    def _start_in_container(self, fd: int) -> subprocess.Popen:
        """Container isolation: the worker as the claimed uid, in a fresh private HOME, no namespaces."""
        home = Path(tempfile.mkdtemp(prefix="courselib-student-"))
        self._homes.append(home)
        os.chown(home, self.uid, self.uid)
        env = {**_clean_env(), "HOME": str(home), "TMPDIR": str(home)}
        uid = self.uid

        def enter():
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
            resource.setrlimit(resource.RLIMIT_NPROC, (PROCESS_LIMIT, PROCESS_LIMIT))
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            _prctl(PR_SET_NO_NEW_PRIVS, 1)

        with open(self.base / "worker.log", "ab") as log:
            return subprocess.Popen([sys.executable, "-P", "-m", "courselib.grading.worker", str(fd)], cwd=home,
                                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                    pass_fds=(fd,), start_new_session=True, preexec_fn=enter, umask=0o077)

    def start(self) -> None:
        """Start (or restart) the student's process and wait until it is ready; :class:`SandboxError` if it cannot."""
        if self.refused:
            raise SandboxError(self.refused)
        if self.proc is not None:
            self.kill_all()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = (self._start_in_container(theirs.fileno()) if self.container
                         else self._start_in_view(theirs.fileno()))
        except (OSError, subprocess.SubprocessError) as err:
            ours.close()
            raise SandboxError(f"the student's process could not be started: {self._log_tail() or err}") from None
        finally:
            theirs.close()
        self.sock = ours
        try:
            self._receive(0, STARTUP_S)
        except Stopped as err:
            tail = self._log_tail()
            self.kill_all()
            if not self.container and any(w in tail for w in ("unshare", "pivot_root", "mount")):
                tail += (" (this machine refuses the namespaces the sandbox needs; in a throw-away autograder "
                         "container, build the autograder with --isolation container)")
            raise SandboxError(f"the student's process did not start: {tail or err.detail}") from None

    def _start_in_view(self, fd: int) -> subprocess.Popen:
        """The worker in the private read-only view (:mod:`courselib.grading.jail`), through new namespaces."""
        root = self.base / f"root-{self._next}"
        try:
            root.mkdir(mode=0o700)
        except OSError as err:
            raise SandboxError(f"cannot make the student's view in {self.base}: {err.strerror}") from None
        config = {"root": str(root), "binds": view_paths(), "uid": self.uid,
                  "outer": [os.geteuid(), os.getegid()], "close": [fd], "env": _clean_env(),
                  "argv": [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []),
                           "-m", "courselib.grading.worker", str(fd)]}
        cmd = [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", "courselib.grading.jail",
               json.dumps(config)]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": _clean_env()["PYTHONPATH"], "PYTHONNOUSERSITE": "1"}
        with open(self.base / "worker.log", "ab") as log:
            return subprocess.Popen(cmd, cwd="/", env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=log, pass_fds=(fd,), start_new_session=True, preexec_fn=self._enter(),
                                    umask=0o077)

    def _log_tail(self) -> str:
        try:
            with open(self.base / "worker.log", "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 600))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [ln for ln in text.splitlines() if ln.startswith("courselib sandbox:")] or text.splitlines()
        return " ".join(" ".join(lines).split())[-400:]

    # --- talking ---------------------------------------------------------------------------------------
    def call(self, message: dict, timeout: float) -> dict:
        """Send one request; its reply, or :class:`Stopped` (the process was interrupted or is gone)."""
        if self.proc is None or self.proc.poll() is not None:
            raise Stopped("died", "the student's Python process is not running")
        ident, self._next = self._next, self._next + 1
        body = json.dumps({**message, "id": ident}, separators=(",", ":")).encode("utf-8")
        try:
            self.sock.sendall(struct.pack(">Q", len(body)) + body)
        except OSError:
            raise Stopped("died", self._death()) from None
        try:
            return self._receive(ident, timeout)
        except Stopped as err:
            if err.kind != "timeout":
                raise
        os.kill(self.proc.pid, signal.SIGINT)      # as Jupyter's "interrupt the kernel"
        try:
            self._receive(ident, self.grace)
        except Stopped:
            self.kill_all()                          # it ignored SIGINT: SIGKILL everything it started
            raise Stopped("timeout", f"it ignored the interrupt and was killed {self.grace:g} s later") from None
        raise Stopped("timeout", "it was interrupted")

    def _receive(self, ident: int, timeout: float) -> dict:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            head = self._read(8, deadline)
            (size,) = struct.unpack(">Q", head)
            if size > MAX_MESSAGE:
                self.kill_all()
                raise Stopped("died", f"it sent a reply of {size} bytes (more than {MAX_MESSAGE})")
            body = self._read(size, deadline)
            try:
                reply = parse_reply(body, ident)
            except Stopped:
                self.kill_all()
                raise
            if reply is not None:
                return reply
            # a reply to an earlier, interrupted request (or noise the student's code wrote): skip it

    def _read(self, n: int, deadline: float) -> bytes:
        chunks, left = [], n
        while left:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise Stopped("timeout", "time limit")
            ready, _, _ = select.select([self.sock], [], [], min(wait, 0.5))
            if not ready:
                if self.proc.poll() is not None:
                    raise Stopped("died", self._death())
                continue
            try:
                chunk = self.sock.recv(min(left, 1 << 20))
            except OSError:
                chunk = b""
            if not chunk:
                raise Stopped("died", self._death())
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.kill_all()
        if code is None:
            return "it closed its connection to the grader"
        if code < 0:
            return f"the Python process running it was killed by {signal.Signals(-code).name}"
        return f"it ended the Python process running it (exit status {code})"

    # --- stopping --------------------------------------------------------------------------------------
    def _students(self) -> set[int]:
        table = processes()
        live = [p for p in table if not p.zombie]
        parent = {self.proc.pid} if self.proc is not None and self.proc.poll() is None else set()
        if self.uid is not None:
            return {p.pid for p in live if p.uid == self.uid} | parent
        sid = self.proc.pid if self.proc is not None else None
        mine = _descendants(self._me, table) - self._before
        return {p.pid for p in live if p.pid != self._me and (p.sid == sid or p.pid in mine)}

    def kill_all(self, wait_s: float = 10.0) -> None:
        """SIGKILL every process of the student's, again until none is left (zombies reaped)."""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        deadline = time.monotonic() + wait_s
        while True:
            left = self._students()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self._reap()
            if not left:
                break
            if time.monotonic() > deadline:
                raise CourseError(f"the student's processes {sorted(left)} could not be stopped; "
                                  f"no report was written")
            time.sleep(0.02)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass

    def _reap(self) -> None:
        if self.proc is not None:
            self.proc.poll()
        for p in processes():
            if p.ppid == self._me and p.zombie and p.pid not in self._before:
                try:
                    os.waitpid(p.pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def close(self) -> None:
        """Stop everything, restore the grader's process flags, remove the folder."""
        try:
            if self.sock is not None and self.proc is not None and self.proc.poll() is None:
                try:
                    body = json.dumps({"op": "bye", "id": -1}).encode()
                    self.sock.sendall(struct.pack(">Q", len(body)) + body)
                except OSError:
                    pass
            self.kill_all()
        finally:
            _prctl(PR_SET_CHILD_SUBREAPER, self._subreaper)
            if self._dumpable >= 0:
                _prctl(PR_SET_DUMPABLE, self._dumpable)
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None
            shutil.rmtree(self.base, ignore_errors=True)
            for home in self._homes:
                shutil.rmtree(home, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
