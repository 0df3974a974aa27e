"""What every real experiment shares: stop what it started by PID, and clean up also on SIGTERM.

- :func:`cleanup_on_signals` turns SIGTERM and SIGHUP (and SIGINT) into :class:`Terminated`, a
  ``KeyboardInterrupt``, while an experiment runs, so its ``finally`` blocks (remove the cgroup,
  the temporary directory, stop the daemons) run on ``kill PID`` or a closed terminal exactly as
  on Ctrl-C, and a second signal does not cut the clean-up short; :func:`signals_held` keeps a
  signal from falling between starting a child and recording its PID.
- :func:`stop_pids` stops processes by PID — SIGTERM, a grace period, then SIGKILL — never by
  name; :func:`alive` and :func:`cmdline` tell whether a PID is still the process we started.

The recorded runs that readers without privilege see instead are :mod:`courselib.live.recorded`;
the daemons of a real system are started and stopped through :mod:`courselib.live.daemons`.
"""
from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


class Terminated(KeyboardInterrupt):
    """Raised inside :func:`cleanup_on_signals` when SIGTERM, SIGHUP (or SIGINT) arrives.

    A ``KeyboardInterrupt``, so code that already cleans up on Ctrl-C cleans up on these too;
    the CLI prints one line and exits with :attr:`exit_status` (128 + the signal's number).
    """

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_status(self) -> int:
        """What a shell reports for a process ended by this signal: 128 + its number."""
        return 128 + self.signum


CLEANUP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


_held = {"depth": 0, "pending": None}


@contextlib.contextmanager
def cleanup_on_signals(signals=CLEANUP_SIGNALS):
    """Make every signal that can end the process unwind the block, so its ``finally`` runs.

    The first of ``signals`` raises :class:`Terminated` where the main thread is (or, inside
    :func:`signals_held`, as that block ends); later ones are ignored until the block is left, so
    the clean-up is not cut short. The previous handlers are restored on the way out. Outside the
    main thread (where Python cannot set handlers) the block runs unchanged. Used by every real
    experiment: ``slurm up``, ``oom real``, ``live cpu-throttle`` (and ``kube up``).
    """
    fired: list[int] = []

    def handler(signum, frame):
        if fired:
            return
        fired.append(signum)
        if _held["depth"]:
            _held["pending"] = signum
            return
        raise Terminated(signum)

    previous = {}
    try:
        for sig in signals:
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread
        for sig, old in previous.items():
            signal.signal(sig, old)
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


@contextlib.contextmanager
def signals_held():
    """Inside :func:`cleanup_on_signals`: a signal arriving in this block takes effect at its end.

    Start a child and record its PID inside this block, so that no signal can fall between the
    fork and the record (which would leave a process nobody stops)::

        with signals_held():
            p = subprocess.Popen(argv)
            procs.append(p)
    """
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        signum = _held["pending"]
        if signum is not None and not _held["depth"]:
            _held["pending"] = None
            raise Terminated(signum)


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


def reap(pid: int) -> bool | None:
    """Collect ``pid``'s exit status if it is our child and has exited (no zombie left).

    ``True``: reaped now; ``False``: our child, not reapable yet (still running, or a thread-group
    leader shown as a zombie while its other threads still exit); ``None``: not our child (or
    already reaped)."""
    try:
        got, _ = os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        return None
    return got == pid


def alive(pid: int) -> bool:
    """Is ``pid`` still running? Our own child counts as running until it has been reaped: a
    multi-threaded daemon (node, Go) can show its leader as a zombie ('Z') while its other threads
    still exit, and cannot be reaped until they have; returning then would leave it to PID 1 as a
    zombie that an init which does not reap (a container's) keeps for good."""
    reaped = reap(pid)
    if reaped is not None:
        return not reaped
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
