"""PID namespaces as the kernel numbers them: one process, one PID in every namespace it is visible from.

pid_namespaces(7) (bibliography: ``man-pid-namespaces``): PID namespaces nest; a process is visible
in its own namespace and in every ancestor of it, and has a PID in each; "the first process
created in a new namespace has the PID 1". A process sees its parent's PID only when the parent is
visible in its own namespace; "the parent of the child is outside of the namespace" otherwise, and
``getppid()`` returns 0. ``/proc/PID/status`` lists a process's PIDs as ``NSpid``, from the reader's
namespace (outermost first) down to the process's own (proc(5), ``man-proc``). Each namespace hands
out its numbers in order, whatever happens in the other namespaces.

UTS namespaces (the hostname) are separate from PID namespaces: two processes have the same
hostname exactly when they share a UTS namespace (namespaces(7), ``man-namespaces``).
"""
from __future__ import annotations

from dataclasses import dataclass

from courselib.errors import InputError

HOST = "host"


@dataclass(frozen=True)
class PidNamespace:
    """A PID namespace, created by ``parent`` (None: the host's initial one). ``first_pid``: the next number it
    hands out (1 for a new namespace; on a host that has run for a while, far more)."""

    name: str
    parent: str | None = None
    first_pid: int = 1


@dataclass(frozen=True)
class Proc:
    """A process in PID namespace ``ns`` with UTS namespace ``uts``; ``parent``: the process that forked it."""

    name: str
    ns: str
    parent: str | None = None
    uts: str = HOST


class PidTree:
    """Namespaces and processes (in creation order) with every PID the kernel would give them."""

    def __init__(self, namespaces: list[PidNamespace], procs: list[Proc]):
        self.ns = {n.name: n for n in namespaces}
        if len(self.ns) != len(namespaces):
            raise InputError("two PID namespaces with the same name", field="namespaces")
        for n in namespaces:
            if n.parent is not None and n.parent not in self.ns:
                raise InputError(f"namespace {n.name!r}: unknown parent {n.parent!r}", field="namespaces")
        self.procs = {p.name: p for p in procs}
        if len(self.procs) != len(procs):
            raise InputError("two processes with the same name", field="procs")
        next_pid = {n.name: n.first_pid for n in namespaces}
        self.pids: dict[str, dict[str, int]] = {}
        for p in procs:
            if p.ns not in self.ns:
                raise InputError(f"process {p.name!r}: unknown PID namespace {p.ns!r}", field="procs")
            if p.parent is not None and p.parent not in self.pids:
                raise InputError(f"process {p.name!r}: its parent {p.parent!r} must be created first", field="procs")
            mine = {}
            for level in self.chain(p.ns):                 # a PID in its own namespace and every ancestor
                mine[level] = next_pid[level]
                next_pid[level] += 1
            self.pids[p.name] = mine

    def chain(self, ns: str) -> list[str]:
        """``ns`` and its ancestors, innermost first."""
        out = []
        while ns is not None:
            out.append(ns)
            ns = self.ns[ns].parent
        return out

    def visible_from(self, reader_ns: str) -> list[str]:
        """The processes a reader in ``reader_ns`` sees in its /proc (its namespace and the ones below it)."""
        return [p for p in self.procs if reader_ns in self.pids[p]]

    def pid(self, proc: str, reader_ns: str) -> int | None:
        """``proc``'s PID as a reader in ``reader_ns`` sees it; None when it is not visible there."""
        return self.pids[proc].get(reader_ns)

    def nspid(self, proc: str, reader_ns: str = HOST) -> list[int]:
        """The ``NSpid`` line of ``/proc/PID/status`` read from ``reader_ns``: outermost first."""
        levels = self.chain(self.procs[proc].ns)
        if reader_ns not in levels:
            raise InputError(f"{proc!r} is not visible from namespace {reader_ns!r}", field="reader")
        levels = levels[:levels.index(reader_ns) + 1]
        return [self.pids[proc][level] for level in reversed(levels)]

    def ppid_seen(self, proc: str) -> int:
        """What ``getppid()`` returns in ``proc``: its parent's PID in ``proc``'s own namespace, or 0."""
        p = self.procs[proc]
        if p.parent is None:
            return 0
        return self.pids[p.parent].get(p.ns, 0)

    def same_hostname(self, a: str, b: str) -> bool:
        return self.procs[a].uts == self.procs[b].uts
