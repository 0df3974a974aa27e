"""What the processes of a new PID namespace see, as the kernel defines it. Pure: no I/O.

- The first process of a new PID namespace is PID 1 of it; later processes get the next free
  numbers, 2, 3, … in the order they are created (pid_namespaces(7): "The first process created in a
  new namespace … has the PID 1").
- Its parent lives outside the namespace, so ``getppid()`` returns 0 for it (pid_namespaces(7)).
- ``/proc`` shows the PID namespace of the procfs *mount*, not of the reader: with a fresh procfs
  (``unshare --mount-proc``) it lists only the namespace's own processes; without one, the host's
  (proc(5)).
- The host sees every one of them with an ordinary PID; the ``NSpid`` line of ``/proc/PID/status``
  holds one number per PID namespace the process is in, outermost first (proc(5)), so each level of
  nesting adds one number.
- All of them run on the one kernel of the host (namespaces(7)): ``uname -r`` is the same inside.

``courselib.live.unshare`` runs the same situation on the real kernel where permitted, and the tests
check the two against each other.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PidNamespaceView:
    """The inside of a new PID namespace holding ``len(pids)`` processes."""

    pids: tuple[int, ...]          # getpid() of each process, in the order they were created
    first_ppid: int                # getppid() of the first process: 0 (its parent is outside)
    listed: int | None             # processes /proc lists inside; None: the host's (not this namespace's)
    nspid_extra: int               # numbers each process's NSpid line has more than its creator's
    same_kernel: bool = True       # uname -r inside = outside

    @property
    def first(self) -> int:
        return self.pids[0]


def unshare_pid(processes: int, *, mount_proc: bool = True, levels: int = 1) -> PidNamespaceView:
    """``unshare --pid --fork [--mount-proc]`` with ``processes`` processes inside (the first and its children).

    ``levels`` is how many PID namespaces deep the new one is below its creator's (1 for one unshare).
    """
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"a PID namespace holds at least one process, not {processes!r}")
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
        raise ValueError(f"levels must be a whole number ≥ 1, not {levels!r}")
    return PidNamespaceView(pids=tuple(range(1, processes + 1)), first_ppid=0,
                            listed=processes if mount_proc else None, nspid_extra=levels)
