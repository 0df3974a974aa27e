"""What every real experiment shares: stop what it started by PID, clean up also on SIGTERM, and
read or write the recorded runs that readers without privilege see instead.

- :func:`sigterm_as_interrupt` turns SIGTERM into ``KeyboardInterrupt`` while an experiment runs,
  so its ``finally`` blocks (remove the cgroup, the temporary directory, stop the daemons) run on
  ``kill PID`` exactly as on Ctrl-C.
- :func:`stop_pids` stops processes by PID — SIGTERM, a grace period, then SIGKILL — never by
  name; :func:`alive` and :func:`cmdline` tell whether a PID is still the process we started.
- :func:`load_recorded` reads ``courselib/data/recorded/NAME`` (shipped with the package);
  :func:`write_recorded` writes a new recording and refuses to overwrite a file.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import threading
import time
from importlib import resources
from pathlib import Path

from courselib.errors import InputError


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While inside, SIGTERM raises ``KeyboardInterrupt`` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, previous)


# ----------------------------------------------------------------------------- processes

def cmdline(pid: int) -> list[str] | None:
    """``/proc/PID/cmdline`` as a list (``None`` if there is no such process)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def send(pid: int, sig: int) -> None:
    """Signal ``pid``; a process that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child and has exited (no zombie left)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def alive(pid: int) -> bool:
    reap(pid)
    return cmdline(pid) is not None and not is_zombie(pid)


def stop_pids(pids: list[int], *, grace: float = 5.0) -> list[int]:
    """SIGTERM each PID, wait up to ``grace`` s, SIGKILL what is left; the PIDs still alive."""
    for pid in pids:
        send(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    for pid in left:
        send(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left


# ----------------------------------------------------------------------------- recordings

def load_recorded(name: str) -> dict:
    """A recording shipped in ``courselib/data/recorded/NAME`` (JSON)."""
    return json.loads(resources.files("courselib.data").joinpath("recorded", name).read_text())


def machine_note() -> str:
    """Where a run was recorded: ``Linux 6.18.44, 2 CPUs``."""
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs"


def write_recorded(path: str | Path, data: dict) -> Path:
    """Write ``data`` as a recording at ``path``; a file that exists is never overwritten."""
    path = Path(path)
    try:
        with open(path, "x") as fh:
            fh.write(json.dumps(data, indent=1) + "\n")
    except FileExistsError:
        raise InputError("exists; not overwritten", file=str(path),
                         hint="remove it first or choose another path") from None
    return path
