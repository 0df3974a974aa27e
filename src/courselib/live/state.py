"""What a real-system command starts, kept where only this user can write, and cleaned up on any signal.

``courselib slurm up/down`` (and ``kube up/down``) start daemons in one command and stop them in
a later one, so they must remember what they started. This module is the one place that memory
lives, with the guarantees a shared machine needs:

- :func:`private_dir` — a per-user directory (``$XDG_RUNTIME_DIR/courselib`` or
  ``<tmp>/courselib-<uid>``; ``$COURSELIB_STATE_DIR`` overrides) that we create with mode 0700
  and verify before every use: a real directory (not a symbolic link), owned by us, closed to
  group and others. Anything else is a one-line :class:`~courselib.errors.CourseError` saying
  what is wrong and what to do; nothing is read from it.
- :class:`StateFile` — one JSON record in that directory (``<name>.json``), written atomically
  with mode 0600, read back with the same owner checks and a size cap; a record that does not
  parse is a one-line error naming the file, never a traceback.
- :class:`ProcessStamp` — a PID *and* its start time (``/proc/PID/stat`` field 22) and the boot
  ID: a process is only signalled if both still match, so a reused PID, or a process whose
  command line merely looks like ours, is left alone.
- :func:`make_owned_dir` / :func:`remove_owned_dir` — a work directory carrying a random token
  we wrote; it is removed only if it is still a directory of ours holding that token, whatever
  path a record names.

With :func:`courselib.live.cleanup.cleanup_on_signals` around the start (SIGINT, SIGTERM and
SIGHUP unwind the block, so its ``finally`` stops what was started) and
:func:`courselib.live.cleanup.stop_pids` to stop them, that is the whole life cycle.

Typical use (``up`` in one process, ``down`` in a later one)::

    from courselib.live.cleanup import cleanup_on_signals, stop_pids
    record = StateFile("slurm")
    with cleanup_on_signals():
        token = new_token()
        work = make_owned_dir("courselib-slurm-", token)
        try:
            p = subprocess.Popen(...)
            record.save({"token": token, "dir": str(work),
                         "procs": [ProcessStamp.of(p.pid).to_json()]})
        except BaseException:
            ...stop p..., remove_owned_dir(work, token); record.remove(); raise
    # later
    data = record.load()               # None if there is none; CourseError if malformed
    stamps = [ProcessStamp.from_json(d) for d in data["procs"]]
    stop_pids([s.pid for s in stamps if s.matches()])   # same PID, same start time, same boot
    remove_owned_dir(Path(data["dir"]), data["token"])
    record.remove()
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from courselib.errors import CourseError

#: Environment variable naming the private directory instead of the default.
STATE_DIR_ENV = "COURSELIB_STATE_DIR"
#: The file inside a directory made by :func:`make_owned_dir` that holds its token.
TOKEN_FILE = ".courselib-owner"
#: A state record is a few kilobytes; anything larger is not one we wrote.
MAX_STATE_BYTES = 1 << 20


def _check_private(path: Path, *, what: str) -> None:
    """Raise unless ``path`` is a real directory owned by this user with no group/other access."""
    try:
        st = os.lstat(path)
    except OSError as err:
        raise CourseError(f"cannot inspect the {what}: {err.strerror}", file=str(path)) from None
    fix = f"set {STATE_DIR_ENV} to a directory of your own with mode 0700"
    if stat.S_ISLNK(st.st_mode):
        raise CourseError(f"the {what} is a symbolic link; courselib does not follow it", file=str(path),
                          hint=f"remove the link if you did not make it, or {fix}")
    if not stat.S_ISDIR(st.st_mode):
        raise CourseError(f"the {what} is not a directory", file=str(path),
                          hint=f"remove it if you did not make it, or {fix}")
    if st.st_uid != os.geteuid():
        raise CourseError(f"the {what} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); "
                          "nothing in it is trusted", file=str(path),
                          hint=f"ask its owner or root to remove it, or {fix}")
    if st.st_mode & 0o077:
        raise CourseError(f"the {what} has mode {stat.S_IMODE(st.st_mode):04o}: others can reach it, "
                          "so nothing in it is trusted", file=str(path),
                          hint=f"if you made it and nothing else wrote there: chmod 700 {path}; or {fix}")


def _default_base() -> tuple[Path, str]:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        with contextlib.suppress(CourseError):
            _check_private(Path(runtime), what="runtime directory")
            return Path(runtime), "courselib"
    return Path(tempfile.gettempdir()), f"courselib-{os.geteuid()}"


def private_dir() -> Path:
    """This user's private courselib directory, created (mode 0700) if absent and verified always.

    ``$COURSELIB_STATE_DIR`` if set (it must already be private, or be creatable), else
    ``$XDG_RUNTIME_DIR/courselib`` when the runtime directory is private, else
    ``<system tmp>/courselib-<uid>``. Raises :class:`CourseError` (one line, with the fix) when the
    path exists but is a link, not a directory, someone else's, or open to group or others.
    """
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        path = Path(env)
    else:
        base, name = _default_base()
        path = base / name
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as err:
        raise CourseError(f"cannot create the private state directory: {err.strerror}", file=str(path),
                          hint=f"set {STATE_DIR_ENV} to a directory of your own with mode 0700") from None
    _check_private(path, what="private state directory")
    return path


class StateFile:
    """One JSON record ``<name>.json`` in :func:`private_dir` (e.g. ``StateFile("slurm")``)."""

    def __init__(self, name: str, directory: Path | None = None, *, filename: str | None = None):
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad state name {name!r}")
        self.name = name
        self._directory = directory
        self._filename = filename or f"{name}.json"

    @classmethod
    def at(cls, path: Path | str, name: str) -> "StateFile":
        """A record at an explicit ``path`` (its directory must be private just the same)."""
        path = Path(path)
        return cls(name, path.parent, filename=path.name)

    @property
    def directory(self) -> Path:
        if self._directory is not None:
            _check_private(self._directory, what="private state directory")
            return self._directory
        return private_dir()

    @property
    def path(self) -> Path:
        return self.directory / self._filename

    def _malformed(self, why: str) -> CourseError:
        return CourseError(f"not a state record this courselib wrote ({why}); nothing was stopped "
                           "or removed", file=str(self.path),
                           hint=f"if no courselib {self.name} is running, remove the file")

    def load(self, parse: Callable[[dict], Any] | None = None) -> Any:
        """The record (through ``parse`` if given), or ``None`` if there is none.

        A record that is not ours (wrong owner, not a regular file, too big) or does not parse
        (invalid JSON, not an object, ``parse`` raising KeyError/TypeError/ValueError) is a
        one-line :class:`CourseError`.
        """
        path = self.path
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise self._malformed(err.strerror or "cannot open") from None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise self._malformed("not a regular file")
            if st.st_uid != os.geteuid():
                raise self._malformed(f"it belongs to uid {st.st_uid}")
            raw = fh.read(MAX_STATE_BYTES + 1)
        if len(raw) > MAX_STATE_BYTES:
            raise self._malformed(f"larger than {MAX_STATE_BYTES} bytes")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise self._malformed(f"not JSON: {str(err).splitlines()[0][:80]}") from None
        if not isinstance(data, dict):
            raise self._malformed("not a JSON object")
        if parse is None:
            return data
        try:
            return parse(data)
        except CourseError as err:
            raise self._malformed(err.message[:120]) from None
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as err:
            what = f"missing {err}" if isinstance(err, KeyError) else str(err).splitlines()[0][:120]
            raise self._malformed(what) from None

    def save(self, data: dict) -> None:
        """Write ``data`` atomically (a 0600 temporary file renamed over the record)."""
        path = self.path
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def new_token() -> str:
    """A random token (128 bits, hex) to mark what this process made."""
    return secrets.token_hex(16)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces and ')'.
    return text.rsplit(")", 1)[1].split()


@dataclass(frozen=True)
class ProcessStamp:
    """A process, named so that a reused PID is not mistaken for it: PID, start time, boot ID.

    ``start_ticks`` is field 22 of ``/proc/PID/stat`` (proc(5): the time the process started
    after boot, in clock ticks); the kernel sets it once, so no process can copy another's.
    """
    pid: int
    start_ticks: int
    boot_id: str

    @classmethod
    def of(cls, pid: int) -> "ProcessStamp | None":
        """The stamp of the running process ``pid`` (``None`` if there is none)."""
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 20:
            return None
        return cls(pid, int(fields[19]), _boot_id())

    def matches(self) -> bool:
        """Is ``pid`` still this very process, alive (not a zombie) and ours to signal?"""
        fields = _stat_fields(self.pid)
        if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
            return False
        if int(fields[19]) != self.start_ticks or _boot_id() != self.boot_id:
            return False
        try:
            return os.geteuid() == 0 or os.stat(f"/proc/{self.pid}").st_uid == os.geteuid()
        except OSError:
            return False

    def to_json(self) -> dict:
        return {"pid": self.pid, "start_ticks": self.start_ticks, "boot_id": self.boot_id}

    @classmethod
    def from_json(cls, d: dict) -> "ProcessStamp":
        """Read a stamp back; raises TypeError/ValueError (made one line by :meth:`StateFile.load`)."""
        pid, ticks, boot = d["pid"], d["start_ticks"], d["boot_id"]
        if not (isinstance(pid, int) and not isinstance(pid, bool) and 1 < pid < 1 << 22):
            raise ValueError(f"pid {pid!r} is not a process ID")
        if not (isinstance(ticks, int) and not isinstance(ticks, bool) and ticks >= 0):
            raise ValueError(f"start_ticks {ticks!r} is not a start time")
        if not isinstance(boot, str):
            raise ValueError(f"boot_id {boot!r} is not text")
        return cls(pid, ticks, boot)


def make_owned_dir(prefix: str, token: str, parent: Path | str | None = None) -> Path:
    """A new directory (``mkdtemp``, mode 0700) holding ``token`` in :data:`TOKEN_FILE`."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    fd = os.open(path / TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token)
    return path


def owns_dir(path: Path | str, token: str) -> bool:
    """Is ``path`` a real directory of this user's holding ``token`` (written by :func:`make_owned_dir`)?"""
    path = Path(path)
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return False
        fd = os.open(path / TOKEN_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return False
        found = fh.read(256).decode("ascii", "replace")
    return bool(token) and secrets.compare_digest(found, token)


def remove_owned_dir(path: Path | str, token: str) -> bool:
    """Remove ``path`` only if :func:`owns_dir` says it is ours; whether it was removed."""
    if not owns_dir(path, token):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)
