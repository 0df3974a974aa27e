"""A memory cgroup in time: processes grow, ``memory.high`` throttles, ``memory.max`` kills.

Each process is a small simpy generator: it waits for its start, then every ``step`` asks the
kernel for more pages. The kernel object charges the pages to the process's cgroup and every
ancestor; a charge that would pass a ``memory.max`` fills the cgroup to the limit and invokes
the OOM killer in that cgroup (the lowest one over its limit), and on the node when RAM runs out.

Restarts are per **container**, as the kubelet does them (``k8s-docs-pod-lifecycle``): the processes of
one cgroup are one container, and the first one listed is its PID 1. A container is restarted — all of
its processes, at their starting sizes, after the CrashLoopBackOff delay — only when its PID 1 has
exited; when PID 1 dies, the kernel kills the rest of its PID namespace with it (``man-pid-namespaces``).
A process other than PID 1 that the OOM killer picks is simply gone, and the container runs on. With
``memory.oom.group`` (cgroup v2; the kubelet sets it since Kubernetes 1.28, ``k8s-pr-117793``) the
kernel kills the whole container at once, so it always restarts. Sources for the kernel side:
``linux-oom-kill``, ``kernel-cgroup-v2`` (through :mod:`courselib.model.memcg`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import simpy

from courselib.model.badness import Task, proc_oom_score
from courselib.model.memcg import (MemoryEvents, OomKill, OomScenario, Process, ProcessSpec,
                                   ancestors, invoke_oom, memcg_totalpages)
from courselib.model.restart import restart_delay
from courselib.units import PAGE_SIZE

THROTTLE = 4  # a process over memory.high grows this many times slower (an illustration, not a kernel constant)


@dataclass
class Counters:
    """One cgroup's ``memory.events`` (``high``/``max`` count simulated steps, not kernel calls)."""

    high: int = 0
    max: int = 0
    oom: int = 0
    oom_kill: int = 0
    oom_group_kill: int = 0

    def as_events(self) -> MemoryEvents:
        return MemoryEvents(self.oom, self.oom_kill, self.oom_group_kill)


@dataclass
class _Live:
    spec: ProcessSpec
    task: Task
    alive: bool = False
    grown: int = 0          # bytes grown since the (re)start
    carry: int = 0          # bytes of growth not yet a whole page
    restarts: int = 0
    killed: int = 0
    pid1: bool = False      # the first process of its container (cgroup)
    stalled: bool = False   # its allocation can never succeed (no eligible victim)


@dataclass(frozen=True)
class Kill:
    time: float
    oom: OomKill
    oom_score: dict[str, int]   # /proc/PID/oom_score of every live process at that moment
    usage: int = 0              # pages charged to the OOM domain (the node: to "/") at that moment


@dataclass
class Timeline:
    """What happened: samples for the plot, every OOM kill, the restarts and the counters."""

    scenario: OomScenario
    times: list[float] = field(default_factory=list)
    rss: dict[str, list[float | None]] = field(default_factory=dict)   # pages; None = not running
    usage: list[int] = field(default_factory=list)                   # the scenario cgroup, pages
    kills: list[Kill] = field(default_factory=list)
    restarts: list[tuple[float, str, float]] = field(default_factory=list)  # (time, name, delay)
    events: dict[str, Counters] = field(default_factory=dict)
    panic: str | None = None
    final: dict[str, _Live] = field(default_factory=dict)


class Kernel:
    """The memory side of the kernel, just enough to charge pages and run the OOM killer."""

    def __init__(self, env: simpy.Environment, scenario: OomScenario):
        self.env = env
        self.sc = scenario
        self.tree = {c.path: c for c in scenario.tree()}
        self.procs = {p.name: _Live(p, p.task) for p in scenario.processes}
        self.containers: dict[str, list[_Live]] = {}
        for live in self.procs.values():
            self.containers.setdefault(live.spec.cgroup, []).append(live)
        for members in self.containers.values():
            members[0].pid1 = True
        self.container_restarts: dict[str, int] = {c: 0 for c in self.containers}
        self.out = Timeline(scenario, rss={p.name: [] for p in scenario.processes},
                            events={path: Counters() for path in self.tree})
        self.out.final = self.procs
        initial = sum(self._charge_of(p.task) for p in scenario.processes if p.start == 0)
        self.offset = (scenario.usage - initial) if scenario.usage is not None else 0
        self.stopped = env.event()

    @staticmethod
    def _charge_of(task: Task) -> int:
        return task.rss + task.pagetables // PAGE_SIZE

    def usage(self, path: str) -> int:
        total = self.offset if path == "/" else 0
        for live in self.procs.values():
            if live.alive and path in ancestors(live.spec.cgroup):
                total += self._charge_of(live.task)
        return total

    def _event(self, path: str, name: str, n: int = 1) -> None:
        # v2 counts an event in the cgroup and every ancestor (memory.events is hierarchical);
        # v1 only in the cgroup itself.
        targets = ancestors(path) if self.sc.cgroup == "v2" else [path]
        for p in targets:
            if p in self.out.events:
                setattr(self.out.events[p], name, getattr(self.out.events[p], name) + n)

    def _processes(self) -> list[Process]:
        return [Process(lv.task, lv.spec.cgroup) for lv in self.procs.values() if lv.alive]

    def _room(self, live: _Live) -> tuple[int | None, str | None]:
        """Pages this process may still charge, and the cgroup (or node) that limits it first."""
        room, where = None, None
        for path in ancestors(live.spec.cgroup):
            cg = self.tree.get(path)
            if cg is not None and cg.max is not None:
                r = cg.max - self.usage(path)
                if room is None or r < room:
                    room, where = r, path
        if self.sc.scope == "node":
            r = self.sc.limit - self.usage("/")
            if room is None or r < room:
                room, where = r, None
        return room, where

    def oom(self, domain: str | None) -> OomKill:
        """Invoke the OOM killer in ``domain`` (a cgroup path), or on the node if ``None``."""
        procs = self._processes()
        if domain is None:
            kill = invoke_oom(procs, scope="node", totalpages=self.sc.global_totalpages(),
                              cgroups=tuple(self.tree.values()), cgroup=self.sc.cgroup)
        else:
            limit = self.tree[domain].max
            total = memcg_totalpages(limit, cgroup=self.sc.cgroup, total_swap_pages=self.sc.node_swap,
                                     swap_max_pages=self.sc.swap if domain == "/" else 0,
                                     memsw_max_pages=limit + (self.sc.swap if domain == "/" else 0))
            kill = invoke_oom(procs, scope="memcg", totalpages=total, domain=domain,
                              cgroups=tuple(self.tree.values()), cgroup=self.sc.cgroup)
            self._event(domain, "oom")
        g = self.sc.global_totalpages()
        scores = {p.name: proc_oom_score(p.task, g) for p in procs}
        self.out.kills.append(Kill(self.env.now, kill, scores, self.usage(domain or "/")))
        victim_cgroup = self.procs[kill.victim].spec.cgroup if kill.victim else None
        if kill.victim:
            # __oom_kill_process counts in the victim's memcg; group members count in their own.
            self._event(victim_cgroup, "oom_kill", 1 + (1 if kill.group else 0))
            for name in kill.killed[1:]:
                self._event(self.procs[name].spec.cgroup, "oom_kill")
            if kill.group:
                self._event(kill.group, "oom_group_kill")
        self._sample()
        for name in kill.killed:
            self._die(self.procs[name])
        self._sample()
        if kill.panic:
            self.out.panic = kill.panic
            if not self.stopped.triggered:
                self.stopped.succeed()
        return kill

    def _die(self, live: _Live) -> None:
        """SIGKILL for ``live``. If it was its container's PID 1 the container has exited: the rest of
        its PID namespace is killed with it, and the kubelet may restart the whole container."""
        if not live.alive:
            return
        live.alive = False
        live.killed += 1
        if not live.pid1:
            return
        container = live.spec.cgroup
        for other in self.containers[container]:
            if other.alive:                 # PID 1 gone: the kernel SIGKILLs its namespace
                other.alive = False
                other.killed += 1
        if self.sc.restart in ("Always", "OnFailure"):  # exit 137 is a failure: both restart
            n = self.container_restarts[container] = self.container_restarts[container] + 1
            for member in self.containers[container]:
                member.restarts = n
            delay = restart_delay(n)
            self.out.restarts.append((self.env.now, live.spec.name, delay))
            self.env.process(self._restart(container, delay))

    def _restart(self, container: str, delay: float):
        yield self.env.timeout(delay)
        if self.out.panic is not None:
            return
        for live in self.containers[container]:     # every process of the container starts again
            if live.spec.start > 0 and not live.killed:
                continue                            # not started yet in the first life either
            live.task, live.grown, live.carry, live.alive = replace(live.spec.task, rss=0), 0, 0, True
            live.stalled = False
        for live in self.containers[container]:
            if live.alive:
                self.charge(live, live.spec.task.rss)
        for live in self.containers[container]:
            if live.alive:
                self.env.process(grow(self.env, self, live))

    def charge(self, live: _Live, pages: int) -> int:
        """Charge ``pages`` to ``live``; returns the pages charged (fewer if it was killed)."""
        done = 0
        while done < pages and live.alive and self.out.panic is None:
            room, where = self._room(live)
            want = pages - done
            if room is None or room >= want:
                self._add(live, want)
                done += want
                break
            if room > 0:  # the kernel charges page by page: fill up to the limit first
                self._add(live, room)
                done += room
            if where is not None:
                self._event(where, "max")
            kill = self.oom(where)
            if kill.victim is None:
                live.stalled = True  # no candidate: this allocation can never succeed
                break
        return done

    def _add(self, live: _Live, pages: int) -> None:
        live.task = replace(live.task, rss=live.task.rss + pages)
        for path in ancestors(live.spec.cgroup):
            cg = self.tree.get(path)
            if cg is not None and cg.high is not None and self.usage(path) > cg.high:
                self._event(path, "high")

    def throttled(self, live: _Live) -> bool:
        """Over ``memory.high`` in any ancestor: throttled, never killed for it (FACTS §1.5)."""
        for path in ancestors(live.spec.cgroup):
            cg = self.tree.get(path)
            if cg is not None and cg.high is not None and self.usage(path) > cg.high:
                return True
        return False

    def _sample(self) -> None:
        self.out.times.append(self.env.now)
        for name, live in self.procs.items():
            self.out.rss[name].append(live.task.rss if live.alive else None)
        self.out.usage.append(self.usage("/"))


def grow(env: simpy.Environment, kernel: Kernel, live: _Live):
    """A process asks for ``grow`` bytes a second until it has grown ``grow_by`` (or forever)."""
    spec, step = live.spec, kernel.sc.step
    while live.alive and spec.grow > 0 and not live.stalled:
        if spec.grow_by is not None and live.grown >= spec.grow_by:
            return
        yield env.timeout(step * (THROTTLE if kernel.throttled(live) else 1))
        if not live.alive:
            return
        want = int(spec.grow * step) + live.carry
        if spec.grow_by is not None:
            want = min(want, spec.grow_by - live.grown)
        pages, live.carry = divmod(want, PAGE_SIZE)
        live.grown += want - live.carry
        if pages:
            kernel.charge(live, pages)


def start(env: simpy.Environment, kernel: Kernel, live: _Live):
    """A process appears at its start time with its initial size, then grows."""
    if live.spec.start > 0:
        yield env.timeout(live.spec.start)
    live.alive = True
    yield env.process(grow(env, kernel, live))


def sampler(env: simpy.Environment, kernel: Kernel):
    while True:
        kernel._sample()
        yield env.timeout(kernel.sc.step)


def simulate(scenario: OomScenario) -> Timeline:
    """Run ``scenario``. With no growing process the OOM killer runs once at t=0 (the moment the
    allocation fails) and the timeline is that instant; otherwise until ``duration`` or a panic."""
    env = simpy.Environment()
    kernel = Kernel(env, scenario)
    for live in kernel.procs.values():
        if live.spec.start == 0:
            live.alive = True
    if not scenario.grows:
        kernel._sample()
        if scenario.scope == "memcg":
            kernel._event("/", "max")
        kernel.oom("/" if scenario.scope == "memcg" else None)
        return kernel.out
    for live in kernel.procs.values():
        env.process(start(env, kernel, live) if live.spec.start > 0 else grow(env, kernel, live))
    env.process(sampler(env, kernel))
    env.run(until=simpy.AnyOf(env, [kernel.stopped, env.timeout(scenario.duration)]))
    return kernel.out


def summary(timeline: Timeline) -> dict:
    """The machine-readable result: what ``courselib oom simulate --json`` prints.

    ``victim``/``points``/``oom_score`` describe the first OOM kill (or t=0 if none happened);
    ``killed`` lists every process killed, in order; ``events`` is the scenario cgroup's
    ``memory.events``.
    """
    sc = timeline.scenario
    first = timeline.kills[0] if timeline.kills else None
    if first is not None:
        points, scores = first.oom.points, first.oom_score
    else:
        g = sc.global_totalpages()
        points, scores = {}, {p.name: proc_oom_score(p.task, g) for p in sc.processes}
    killed: list[str] = []
    for k in timeline.kills:
        killed += [n for n in k.oom.killed if n not in killed]
    ev = timeline.events["/"]
    status, restarts, exit_codes = {}, {}, {}
    for name, live in timeline.final.items():
        exit_codes[name] = 137 if live.killed else None
        restarts[name] = live.restarts
        pid1_alive = any(o.alive and o.pid1 and o.spec.cgroup == live.spec.cgroup for o in timeline.final.values())
        if live.alive:
            status[name] = "Running"
        elif live.killed and pid1_alive:
            status[name] = "Killed (its container runs on: its PID 1 is alive)"
        elif live.killed and sc.restart != "Never" and live.restarts:
            status[name] = "CrashLoopBackOff"
        elif live.killed:
            status[name] = "OOMKilled"
        else:
            status[name] = "Waiting"
    return {
        "scope": sc.scope,
        "cgroup": sc.cgroup,
        "totalpages": first.oom.totalpages if first else None,
        "victim": first.oom.victim if first else None,
        "killed": killed,
        "points": points,
        "oom_score": scores,
        "events": {"oom": ev.oom, "oom_kill": ev.oom_kill, "oom_group_kill": ev.oom_group_kill,
                   "high": ev.high, "max": ev.max},
        "exit_codes": exit_codes,
        "status": status,
        "restarts": restarts,
        "panic": timeline.panic,
        "ooms": [{"time": round(k.time, 6), "domain": k.oom.domain, "scope": k.oom.scope,
                  "victim": k.oom.victim, "killed": list(k.oom.killed), "group": k.oom.group}
                 for k in timeline.kills],
    }
