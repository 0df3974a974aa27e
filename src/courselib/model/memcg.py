"""One OOM event, in a memory cgroup (``memory.max`` reached) or on the whole node.

A cgroup tree holds processes. When the OOM killer runs it scores the candidates (every task
of the OOMing cgroup's subtree, or every task on the node), kills the victim, and, on cgroup v2
with ``memory.oom.group``, the rest of the victim's group. The counters it leaves behind are
the ones ``memory.events`` (v2) and ``memory.oom_control`` (v1) show.
Sources: FACTS §1.2, §1.3, §1.5, §1.6.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from courselib.model.badness import (LONG_MIN, OOM_SCORE_ADJ_MIN, Task, global_totalpages,
                                     memcg_totalpages, select_victim)

SIGKILL = 9
DEADLOCK_PANIC = "System is deadlocked on memory"  # FACTS §1.3, mm/oom_kill.c out_of_memory()


@dataclass(frozen=True)
class Cgroup:
    """A memory cgroup: ``path`` is ``/`` for the scenario's cgroup, ``/a/b`` below it.

    Limits are in pages; ``None`` is ``max`` (no limit). ``memory.high`` throttles and never
    kills; ``memory.max`` invokes the OOM killer in this cgroup (FACTS §1.5).
    """

    path: str = "/"
    max: int | None = None
    high: int | None = None
    oom_group: bool = False


@dataclass(frozen=True)
class Process:
    """A task plus the cgroup it lives in."""

    task: Task
    cgroup: str = "/"

    @property
    def name(self) -> str:
        return self.task.name


def is_ancestor(parent: str, child: str) -> bool:
    """True if cgroup ``child`` is ``parent`` or lies below it."""
    if parent == "/":
        return True
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def ancestors(path: str) -> list[str]:
    """``/a/b`` -> ``['/a/b', '/a', '/']``: the cgroup and every parent, nearest first."""
    out = [path]
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        out.append(path)
    return out


@dataclass(frozen=True)
class MemoryEvents:
    """The OOM counters of ``memory.events`` (v2); v1 shows ``oom_kill`` in ``memory.oom_control``."""

    oom: int = 0
    oom_kill: int = 0
    oom_group_kill: int = 0

    def __add__(self, other: "MemoryEvents") -> "MemoryEvents":
        return MemoryEvents(self.oom + other.oom, self.oom_kill + other.oom_kill,
                            self.oom_group_kill + other.oom_group_kill)


@dataclass(frozen=True)
class OomKill:
    """What one invocation of the OOM killer did."""

    scope: str                         # "memcg" or "node"
    domain: str                        # the OOMing cgroup ("/" for the node)
    totalpages: int
    candidates: tuple[str, ...]        # names scanned, in scan order
    points: dict[str, int | None]      # name -> badness in pages; None = never a candidate
    victim: str | None
    killed: tuple[str, ...]            # victim first, then group members
    group: str | None                  # the memory.oom.group cgroup that was killed, if any
    events: MemoryEvents               # what this event adds to the domain's memory.events
    panic: str | None = None           # set when a global OOM finds nobody to kill
    aborted: bool = False              # an earlier victim was still exiting: nobody chosen, no panic


def oom_group_of(victim_cgroup: str, domain: str, groups: dict[str, bool], cgroup: str) -> str | None:
    """The cgroup to kill as a group: the **highest** ancestor with ``memory.oom.group=1``.

    Walks from the victim's cgroup up to the OOM domain and keeps the last one with the flag set.
    cgroup v2 only: on v1 ``mem_cgroup_get_oom_group`` returns NULL. See FACTS §1.5.
    """
    if cgroup != "v2":
        return None
    chosen = None
    for path in ancestors(victim_cgroup):
        if groups.get(path, False):
            chosen = path
        if path == domain:
            break
    return chosen


def invoke_oom(processes: Sequence[Process], *, scope: str, totalpages: int,
               domain: str = "/", cgroups: Sequence[Cgroup] = (), cgroup: str = "v2") -> OomKill:
    """Run the OOM killer once over ``processes`` and report the victim, the kills and counters.

    - Candidates: for a memcg OOM, only tasks in ``domain``'s subtree (``mem_cgroup_scan_tasks``);
      for a node OOM, every task (``for_each_process``). Scan order = the order given.
    - Victim: :func:`select_victim` (highest points, last among equals, -1000 never).
    - Nobody eligible: a memcg OOM kills nothing and does not panic; a node OOM panics with
      "System is deadlocked on memory" (FACTS §1.3).
    - An earlier victim still exiting among the candidates: the scan aborts; nobody is killed and
      neither scope panics (``aborted``; mm/oom_kill.c ``oom_evaluate_task()``).
    - Group kill (v2, ``memory.oom.group``): every other member of the group except tasks with
      ``oom_score_adj`` -1000 (FACTS §1.5, ``oom_kill_memcg_member``).
    - Counters: ``oom`` +1 for a memcg OOM (the cgroup "reached the limit"); ``oom_group_kill``
      +1 per group kill; ``oom_kill`` +1 per ``__oom_kill_process`` call. [derived, FACTS §1.5]
      The group scan reaches the victim again while it still holds its memory, so with a group
      kill the victim is counted twice: ``oom_kill = len(killed) + 1``.
    """
    if scope not in ("memcg", "node"):
        raise ValueError(f"scope must be 'memcg' or 'node', not {scope!r}")
    candidates = [p for p in processes if scope == "node" or is_ancestor(domain, p.cgroup)]
    choice = select_victim([p.task for p in candidates], totalpages)
    points = {p.name: (None if s == LONG_MIN else s) for p, s in zip(candidates, choice.points)}
    names = tuple(p.name for p in candidates)
    oom_event = 1 if scope == "memcg" else 0
    if choice.victim is None:
        return OomKill(scope, domain, totalpages, names, points, None, (), None,
                       MemoryEvents(oom=oom_event),
                       panic=DEADLOCK_PANIC if scope == "node" and not choice.aborted else None,
                       aborted=choice.aborted)
    victim = candidates[choice.victim]
    groups = {c.path: c.oom_group for c in cgroups}
    group = oom_group_of(victim.cgroup, domain if scope == "memcg" else "/", groups, cgroup)
    killed = [victim.name]
    kill_calls = 1
    if group is not None:
        for p in processes:
            if is_ancestor(group, p.cgroup) and p.task.oom_score_adj != OOM_SCORE_ADJ_MIN \
                    and not p.task.unkillable:
                kill_calls += 1
                if p.name not in killed:
                    killed.append(p.name)
    events = MemoryEvents(oom=oom_event, oom_kill=kill_calls,
                          oom_group_kill=1 if group is not None else 0)
    return OomKill(scope, domain, totalpages, names, points, victim.name, tuple(killed), group, events)


def memcg_oom(processes: Sequence[Process], limit_pages: int, *, domain: str = "/",
              cgroups: Sequence[Cgroup] = (), cgroup: str = "v2", total_swap_pages: int = 0,
              swap_max_pages: int | None = None, swappiness: int = 60) -> OomKill:
    """A memcg OOM in ``domain`` whose ``memory.max`` (v1: ``memory.limit_in_bytes``) is ``limit_pages``.

    One adj point is worth ``limit_pages/1000`` pages here, not ``node_pages/1000`` (FACTS §1.3).
    """
    total = memcg_totalpages(limit_pages, cgroup=cgroup, total_swap_pages=total_swap_pages,
                             swap_max_pages=swap_max_pages, memsw_max_pages=swap_max_pages and
                             limit_pages + swap_max_pages, swappiness=swappiness)
    return invoke_oom(processes, scope="memcg", totalpages=total, domain=domain,
                      cgroups=cgroups, cgroup=cgroup)


def node_oom(processes: Sequence[Process], totalram_pages: int, *, total_swap_pages: int = 0,
             cgroups: Sequence[Cgroup] = (), cgroup: str = "v2") -> OomKill:
    """A global OOM: every task on the node is a candidate, ``totalpages`` = RAM + swap."""
    return invoke_oom(processes, scope="node",
                      totalpages=global_totalpages(totalram_pages, total_swap_pages),
                      cgroups=cgroups, cgroup=cgroup)


@dataclass(frozen=True)
class ExitStatus:
    """How a killed process looks afterwards: Python's ``-9``, the shell's ``137``."""

    signal: int = SIGKILL

    @property
    def returncode(self) -> int:
        """``subprocess``'s view: minus the signal number."""
        return -self.signal

    @property
    def exit_code(self) -> int:
        """The shell's and Kubernetes' view: 128 + signal (FACTS §6: 137 = 128 + SIGKILL)."""
        return 128 + self.signal



@dataclass(frozen=True)
class ProcessSpec:
    """A process of a scenario: its size when the story starts and how it grows (bytes per second).

    ``grow`` 0 means a constant size; ``grow_by`` caps the growth (None: no cap); ``start`` delays
    the process. Sizes are in pages except ``pagetables`` (bytes), as in :class:`Task`.
    """

    task: Task
    cgroup: str = "/"
    grow: int = 0            # bytes per second
    grow_by: int | None = None  # bytes
    start: float = 0.0       # seconds

    @property
    def name(self) -> str:
        return self.task.name


@dataclass(frozen=True)
class OomScenario:
    """Everything ``courselib oom simulate`` needs: the scope, the limits and the processes.

    ``limit`` is ``memory.max`` of the scenario's cgroup (scope ``memcg``) or the node's RAM
    (scope ``node``), in pages. ``node_memory``/``node_swap`` give the global ``totalpages`` that
    ``/proc/PID/oom_score`` always uses (FACTS §1.4). ``usage`` is the cgroup's charge at t=0
    (None: the processes' rss + page tables). With no growing process the scenario is the moment
    an allocation fails: the OOM killer runs at t=0 with these sizes.
    """

    scope: str
    limit: int
    processes: tuple[ProcessSpec, ...]
    swap: int = 0
    oom_group: bool = False
    cgroup: str = "v2"
    node_memory: int = 4 * 1024 * 1024  # pages: 16 GiB
    node_swap: int = 0
    high: int | None = None
    usage: int | None = None
    cgroups: tuple[Cgroup, ...] = ()
    duration: float = 60.0
    step: float = 0.1
    restart: str = "Never"   # Kubernetes restartPolicy for a killed process: Never, Always, OnFailure

    @property
    def grows(self) -> bool:
        return any(p.grow > 0 for p in self.processes)

    def tree(self) -> tuple[Cgroup, ...]:
        """The scenario's cgroup (``/``) with its limits, followed by the declared children."""
        root = Cgroup("/", self.limit if self.scope == "memcg" else None, self.high, self.oom_group)
        return (root,) + tuple(c for c in self.cgroups if c.path != "/")

    def global_totalpages(self) -> int:
        """RAM + swap of the node, the ``totalpages`` of ``/proc/PID/oom_score``."""
        if self.scope == "node":
            return global_totalpages(self.limit, self.swap)
        return global_totalpages(self.node_memory, self.node_swap)
