"""Where the student's code runs while a lab is graded, and how the grader gets all of it back.

The student's answers run in a separate Python process (:mod:`courselib.grading.worker`) that

- starts with a **clean environment** (no variable of the grader's: CI secrets stay out of reach),
  in an empty throw-away folder, and is told nothing of the notebook it came from (the grader sends
  cell sources over a socket; no path, no copy of the file);
- runs, when the grader is root (CI), as a **separate unprivileged user** with no supplementary
  groups: it cannot read the grader's ``/proc/PID/environ`` or ``fd/``, open its stdout, signal it,
  or write the repository, the original notebook or the reports; when the grader is not root it runs
  as the same user, with the grader made non-dumpable (its ``/proc/PID/fd``, ``cwd`` and ``environ``
  closed to that user), and the report says which isolation was used;
- has its **own session and process group**; the grader is a child subreaper, so a process the
  student's code double-forks away comes back to it;
- is interrupted (SIGINT) when a request runs past its time limit, and killed (SIGKILL) when it has
  not answered ``grace`` seconds later;
- is, with every process it started, **killed at the end** — all processes of the unprivileged user,
  or of its session and every orphan handed to the grader — and the grader waits until none is
  left before it writes any report.
"""
from __future__ import annotations

import ctypes
import fcntl
import grp
import json
import os
import pwd
import resource
import select
import stat
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from courselib.errors import CourseError

MAX_MESSAGE = 64 * 1024 * 1024
UID_RANGE = range(64_100, 64_900)   # no passwd entry: a user that owns nothing on the machine
FILE_LIMIT = 64 * 1024 * 1024        # the largest file the student's code may write
PROCESS_LIMIT = 256                 # processes of the unprivileged user (a fork bomb stops here)
STARTUP_S = 120.0
PR_SET_DUMPABLE, PR_GET_DUMPABLE, PR_SET_PDEATHSIG = 4, 3, 1
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 4096, 16384, 1 << 18
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


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda x: None if x is None else x.encode())
    if _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _others_can(path: str, bits: int) -> bool:
    try:
        return (os.stat(path).st_mode & bits) == bits
    except OSError:
        return False


def unreachable_ancestors(paths) -> dict[str, set[str]]:
    """For each folder another user cannot enter (no o+x), the children of it these paths need.

    The student's Python must be able to read its interpreter and its libraries; ``/root/.pyenv`` under
    a ``drwx------`` ``/root`` is the usual case. The sandbox makes such a folder enterable in the
    student's own mount namespace, showing only the needed children (everything else in it stays hidden).
    """
    fixes: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(os.path.realpath(path)).parts
        for i in range(1, len(parts)):
            folder = os.path.join(*parts[:i])
            if not _others_can(folder, stat.S_IXOTH):
                fixes.setdefault(folder, set()).add(parts[i])
                break
    return fixes


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


def _claim_uid():
    """A uid/gid no account uses and no process runs as, locked for this grading."""
    for uid in UID_RANGE:
        lock = os.open(os.path.join(tempfile.gettempdir(), f"courselib-grade-uid-{uid}.lock"),
                       os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue
        if _uid_in_use(uid):
            os.close(lock)
            continue
        return uid, lock
    raise CourseError(f"no free user id in {UID_RANGE.start}-{UID_RANGE.stop - 1} to run the student's code as")


def _clean_env(work: Path) -> dict[str, str]:
    import courselib

    bindir = os.path.dirname(sys.executable)
    return {
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work), "TMPDIR": str(work),
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PYTHONPATH": str(Path(courselib.__file__).resolve().parent.parent),
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
    }


class Sandbox:
    """One student process at a time (restarted after a kill); everything it starts dies with it."""

    def __init__(self, *, grace: float = 5.0, same_user: bool | None = None, hide=()):
        self.grace = grace
        self.hide = [Path(p).resolve() for p in hide]   # instructor files the student's code must not see
        self.same_user = (os.geteuid() != 0) if same_user is None else same_user
        self.uid: int | None = None
        self._lock: int | None = None
        self.base = Path(tempfile.mkdtemp(prefix="courselib-grade-"))
        self.work = self.base / "work"
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self._next = 1
        self.note = ""
        self._me = os.getpid()
        self._before = _descendants(self._me, processes())
        self._subreaper = _get_subreaper()
        self._dumpable = _prctl(PR_GET_DUMPABLE)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        if self.same_user:
            _prctl(PR_SET_DUMPABLE, 0)
        else:
            try:
                self.uid, self._lock = _claim_uid()
            except CourseError as err:
                self.same_user, self.note = True, f"{err}; the student's code ran as the same user"
                _prctl(PR_SET_DUMPABLE, 0)

    # --- the isolation this run got, in words (for the report) ---------------------------------------
    @property
    def isolation(self) -> str:
        if self.uid is not None:
            return f"a separate unprivileged user (uid {self.uid}), clean environment, own session"
        return "the same user (run the grader as root to use a separate one), clean environment, own session"

    # --- starting --------------------------------------------------------------------------------------
    def _needed_paths(self) -> list[str]:
        import courselib

        paths = [sys.executable, os.path.realpath(sys.executable), sys.prefix, sys.base_prefix,
                 str(Path(courselib.__file__).resolve().parent)]
        paths += [p for p in sys.path if p and os.path.isdir(p)]
        return paths

    def _enter(self, uid: int):
        """The function the child runs as root before ``exec``: limits, its own mounts, then uid."""
        fixes = sorted(unreachable_ancestors(self._needed_paths()).items(), key=lambda kv: len(Path(kv[0]).parts))
        hide = [str(p) for p in self.hide if os.path.exists(p)]
        libc = _libc()

        def enter():
            try:
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
                resource.setrlimit(resource.RLIMIT_NPROC, (PROCESS_LIMIT, PROCESS_LIMIT))
                if fixes or hide:
                    if libc.unshare(CLONE_NEWNS) != 0:
                        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
                    _mount(None, "/", None, MS_REC | MS_PRIVATE)
                    for folder, children in fixes:
                        fds = {c: os.open(os.path.join(folder, c), os.O_PATH) for c in sorted(children)}
                        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0711,size=64k")
                        for child, fd in fds.items():
                            target = os.path.join(folder, child)
                            if stat.S_ISDIR(os.fstat(fd).st_mode):
                                os.mkdir(target)
                            else:
                                os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
                            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
                            os.close(fd)
                    for path in hide:
                        if os.path.isdir(path):
                            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                                   "mode=0755,size=4k")
                        else:
                            _mount("/dev/null", path, None, MS_BIND)
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            except BaseException as err:
                os.write(2, f"courselib sandbox: {err}\n".encode())
                raise

        return enter

    def _enter_same_user(self):
        def enter():
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

        return enter

    def start(self) -> None:
        """Start (or restart) the student's process and wait until it is ready for requests."""
        if self.proc is not None:
            self.kill_all()
        if self.work.exists():
            shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(mode=0o700)
        uid = self.uid
        if uid is not None:
            os.chown(self.work, uid, uid)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd = [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []),
               "-m", "courselib.grading.worker", str(theirs.fileno())]
        with open(self.base / "worker.log", "ab") as log:
            try:
                self.proc = subprocess.Popen(
                    cmd, cwd=self.work, env=_clean_env(self.work), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=log, pass_fds=(theirs.fileno(),), start_new_session=True,
                    preexec_fn=self._enter_same_user() if uid is None else self._enter(uid), umask=0o077)
            except (OSError, subprocess.SubprocessError) as err:
                theirs.close()
                ours.close()
                if uid is None:
                    raise CourseError(f"cannot start the grading process: {err}") from None
                self._fall_back(f"could not run the student's code as uid {uid} ({self._log_tail() or err})")
                return self.start()
        theirs.close()
        self.sock = ours
        try:
            self._receive(0, STARTUP_S)
        except Stopped as err:
            tail = self._log_tail()
            if uid is not None and self.proc.poll() is not None:
                self._fall_back(f"the grading process could not run as uid {uid}: {tail or err.detail}")
                return self.start()
            self.kill_all()
            raise CourseError(f"the grading process did not start: {err.detail}; {tail}") from None

    def _fall_back(self, why: str) -> None:
        self.kill_all()
        if self._lock is not None:
            os.close(self._lock)
        self.uid, self._lock, self.same_user = None, None, True
        self.note = f"{why}; the student's code ran as the same user"
        _prctl(PR_SET_DUMPABLE, 0)

    def _log_tail(self) -> str:
        try:
            with open(self.base / "worker.log", "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 600))
                return " ".join(f.read().decode("utf-8", "replace").split())[-400:]
        except OSError:
            return ""

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
                reply = json.loads(body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                continue
            if isinstance(reply, dict) and reply.get("id") == ident:
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
        if self.uid is not None:
            return {p.pid for p in live if p.uid == self.uid}
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
