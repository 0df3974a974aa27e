"""What the processes of a new PID namespace see, as the kernel defines it. Pure: no I/O.

- The first process of a new PID namespace is PID 1 of it; later processes get the next free
  numbers, 2, 3, … in the order they are created (pid_namespaces(7): "The first process created in a
  new namespace … has the PID 1"). A process that has ended does not give its number back at once:
  the kernel hands PIDs out cyclically, each after the last one it gave, and reuses a number only once
  it has wrapped around ``pid_max`` (``alloc_pid`` in kernel/pid.c, ``idr_alloc_cyclic``), so a
  short-lived child still uses up the next number.
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

The kinds of namespace ``/proc/PID/ns`` lists, and the fixed inode numbers of the initial ones
(:func:`is_initial_namespace`), are here too: ``courselib.live.proc`` reads a process's links and
judges them with these.
"""
from __future__ import annotations

from dataclasses import dataclass

NS_KINDS = ("cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts")

# The kernel gives the *initial* namespaces fixed inode numbers (include/uapi/linux/nsfs.h,
# enum init_ns_ino: IPC_NS_INIT_INO = 0xEFFFFFFF ... TIME_NS_INIT_INO = 0xEFFFFFFA). A process whose
# PID namespace has another inode is inside a PID namespace someone created: a container, a sandbox.
INITIAL_NS_INODES = {
    "ipc": 0xEFFFFFFF,
    "uts": 0xEFFFFFFE,
    "user": 0xEFFFFFFD,
    "pid": 0xEFFFFFFC,
    "cgroup": 0xEFFFFFFB,
    "time": 0xEFFFFFFA,
}
# Since Linux 6.18 the initial network and mount namespaces are fixed too (NET_NS_INIT_INO,
# MNT_NS_INIT_INO in the same enum); before, they got ordinary dynamic inode numbers, so there a
# number other than these constants says nothing.
FIXED_SINCE_6_18 = {"net": 0xEFFFFFF9, "mnt": 0xEFFFFFF8}
FIXED_SINCE = (6, 18)


def is_initial_namespace(kind: str, inode: int, kernel: tuple[int, int] | None = None) -> bool | None:
    """True if ``inode`` is the host's initial namespace of ``kind`` on a kernel of version
    ``kernel`` (major, minor; None: not known); None where it cannot be told.

    ipc, uts, user, pid, cgroup and time: fixed numbers on every kernel. net and mnt: fixed
    since Linux 6.18, so a different number there means a new namespace; on older kernels only
    the fixed number itself can be recognised (a kernel that has it is 6.18 or later).
    """
    expected = INITIAL_NS_INODES.get(kind)
    if expected is not None:
        return inode == expected
    fixed = FIXED_SINCE_6_18.get(kind)
    if fixed is None:
        return None
    if inode == fixed:
        return True
    return False if kernel is not None and kernel >= FIXED_SINCE else None


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


def unshare_pid(processes: int, *, exited: int = 0, mount_proc: bool = True, levels: int = 1) -> PidNamespaceView:
    """``unshare --pid --fork [--mount-proc]`` with ``processes`` processes inside (the first and its children).

    ``exited``: how many short-lived children the first process ran, each to its end, before it created
    the others; they used up PIDs 2 to ``exited + 1``, and ``/proc`` no longer lists them.
    ``levels`` is how many PID namespaces deep the new one is below its creator's (1 for one unshare).
    """
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"a PID namespace holds at least one process, not {processes!r}")
    if isinstance(exited, bool) or not isinstance(exited, int) or exited < 0:
        raise ValueError(f"exited must be a whole number ≥ 0, not {exited!r}")
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
        raise ValueError(f"levels must be a whole number ≥ 1, not {levels!r}")
    return PidNamespaceView(pids=(1,) + tuple(range(2 + exited, 1 + exited + processes)), first_ppid=0,
                            listed=processes if mount_proc else None, nspid_extra=levels)
