"""What Kubernetes shows after the kernel kills a container, and when it restarts it.

Sources: FACTS §2.4 (containerd's ``oomExitReason = "OOMKilled"``), §6 (137 = 128 + SIGKILL),
§2.5 and §7.11 (CrashLoopBackOff: the first restart is immediate, then 10 s doubling, capped
at 300 s; reset after 10 minutes of running).
"""
from __future__ import annotations

from dataclasses import dataclass

from courselib.model.memcg import SIGKILL

BACKOFF_PERIOD = 10.0        # seconds; kubelet backOffPeriod (FACTS §2.5)
MAX_CONTAINER_BACKOFF = 300.0  # seconds; MaxContainerBackOff
BACKOFF_RESET = 600.0        # seconds of clean running that reset the backoff ("10 minutes")

OOM_KILLED = "OOMKilled"   # containerd oomExitReason
ERROR = "Error"            # containerd errorExitReason
COMPLETED = "Completed"    # containerd completeExitReason


@dataclass(frozen=True)
class Terminated:
    """A container's ``state.terminated``: reason, exit code, signal."""

    reason: str
    exit_code: int
    signal: int | None = None


def terminated_by_oom() -> Terminated:
    """The status of a container whose process the OOM killer killed: ``OOMKilled``, exit 137."""
    return Terminated(OOM_KILLED, 128 + SIGKILL, SIGKILL)


def restart_delay(restart: int) -> float:
    """Seconds the kubelet waits before restart number ``restart`` (1 = after the first crash).

    0 for the first restart ("Initial crash: Kubernetes attempts an immediate restart"), then
    ``min(10 * 2**(n-2), 300)``: 0, 10, 20, 40, 80, 160, 300, 300, … See FACTS §2.5, §7.11.
    """
    if restart < 1:
        raise ValueError("restarts are numbered from 1")
    if restart == 1:
        return 0.0
    return min(BACKOFF_PERIOD * 2 ** (restart - 2), MAX_CONTAINER_BACKOFF)


def next_restart_delay(ran_s: float, restarts_before: int) -> float:
    """Seconds before the next restart of a container that ran ``ran_s`` s since its last start.

    ``restarts_before`` restarts have happened already. Once the container has run
    ``BACKOFF_RESET`` (10 minutes) without a problem, the kubelet resets its backoff and the next
    crash is treated as the first (FACTS §2.5; chapter 3, "When the container restarts").
    """
    if ran_s < 0 or restarts_before < 0:
        raise ValueError("ran_s and restarts_before must be >= 0")
    return restart_delay(1 if ran_s >= BACKOFF_RESET else restarts_before + 1)


def restart_delays(count: int) -> list[float]:
    """The first ``count`` restart delays, in seconds."""
    return [restart_delay(n) for n in range(1, count + 1)]


def restart_times(crash_after: float, restarts: int) -> list[tuple[float, float]]:
    """``(crash time, restart time)`` for a container that crashes ``crash_after`` s after each start.

    Assumes ``crash_after`` is shorter than the 10-minute reset, so the backoff keeps growing.
    """
    if crash_after >= BACKOFF_RESET:
        raise ValueError("a container that runs 10 minutes before crashing resets its backoff")
    out, t = [], 0.0
    for n in range(1, restarts + 1):
        crash = t + crash_after
        t = crash + restart_delay(n)
        out.append((crash, t))
    return out
