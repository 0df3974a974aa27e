"""How a real system joins the local control plane and its replays: named extension points.

Modelled on kube-scheduler's framework (``pkg/scheduler/framework``): behaviour is added at *named
extension points* by *plugins registered by name*, and the core imports no plugin. Here the core is
the control plane (:mod:`courselib.live.kube.cluster`) and the replay driver
(:mod:`courselib.live.kube.replay`); a plugin is an :class:`Extension` — Kueue
(:mod:`courselib.live.kube.kueue`), a JobSet controller, a topology set-up — registered under the
name ``kube up --with NAME`` uses. The in-tree plugins are listed in one place,
:mod:`courselib.live.kube.plugins` (as kube-scheduler's ``plugins/registry.go`` lists its own);
nothing in the core names one.

The control plane's points (``courselib kube up/down``), in the order they are called:

=================  ===========================================================================
``unavailable``    why it cannot run here (not built), or ``None``
``feature_gates``  gates the core components need on (merged into their ``--feature-gates``)
``node_labels``    more labels on fake node ``k`` (e.g. a topology's rack and block)
``implied_by``     whether a shape needs it without ``--with`` (a shape with a topology: the
                   topology set-up, which only labels nodes)
``ports``          the loopback ports it will listen on (checked free before it starts)
``start``          after the core is up and the nodes registered: install CRDs, start its
                   daemons with ``cp.spawn`` (recorded; ``down`` stops them first)
``stop``           stop its daemons (the default stops the roles it spawned)
=================  ===========================================================================

A replay's points (``courselib kube replay``), per replay, on the object :meth:`Extension.replay`
returns (a :class:`ReplayHooks`):

=================  ===========================================================================
``prepare``        before the first submission: its objects (queues, topology), its watches
``manifest``       a Job's body, just before it is created: labels, annotations, or another kind
``pod_group``      with native gang scheduling, a job's PodGroup just before it is created (the
                   topology set-up: ``schedulingConstraints.topology``)
``settled``        its part of "the control plane has settled": a fingerprint (any change
                   restarts the quiet period), whether it is calm, and the jobs that should have
                   no pods yet (suspended)
``observe``        after every settle, at virtual time ``t``: read what it did
``next_event``     its next timer in virtual time (``inf``: none); the driver's clock stops there
``wait``           wait, in real time, for that timer to fire; a new deadline for the next settle
``report``         what it recorded (merged into the result's ``extra``)
``clear``          before the core clears the namespace: its objects that own Jobs (JobSets)
``cleanup``        always, at the end (its watches, its objects)
=================  ===========================================================================

A plugin that uses no point leaves it to the base class's default (nothing). A tiny example, a
plugin that labels every fake node with its rack and puts every Job on one::

    from courselib.live.kube.extension import Extension, ReplayHooks, register

    class RackHooks(ReplayHooks):
        def manifest(self, job, body):
            body["metadata"].setdefault("annotations", {})["example/rack"] = "any"
            return body

    @register
    class Racks(Extension):
        name = "racks"
        def node_labels(self, shape, k):
            return {"example.com/rack": f"rack{(k - 1) // 4}"}
        def replay(self, run):
            return RackHooks(run)

and list its module in :mod:`courselib.live.kube.plugins`; ``courselib kube up --with racks`` then
starts the control plane with it, and a replay of a plan whose shape has ``with_=("racks",)`` calls
its hooks.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from courselib.errors import CourseError, InputError


@dataclass
class ReplayRun:
    """What an extension's hooks are given about one replay."""
    cp: Any             # the ControlPlane (``None`` where a test drives the replay with a fake)
    api: Any            # the API client (courselib.live.kube.api.Api, or the test's fake)
    plan: Any           # the ReplayPlan
    replay_id: str      # the value of the replay label every object of this replay carries
    say: Callable[[str], None]


class ReplayHooks:
    """One extension's part in one replay: the named points the driver calls (defaults: nothing)."""
    #: the virtual time after which the replay stops (the model's horizon), ``inf``: none
    horizon: float = math.inf

    def __init__(self, run: ReplayRun):
        self.run = run

    def prepare(self) -> None:
        """Before the first submission."""

    def manifest(self, job, body: dict) -> dict:
        """``body``, the Job that stands for ``job``, just before it is created."""
        return body

    def pod_group(self, job, body: dict) -> dict:
        """``body``, the PodGroup of ``job`` (native gang scheduling), just before it is created."""
        return body

    def settled(self, pods: dict[str, dict]) -> tuple[Any, bool, frozenset]:
        """(fingerprint, calm, idle): a fingerprint whose change restarts the quiet period, whether
        this extension has nothing left to do, and the jobs that should have no pods yet."""
        return (), True, frozenset()

    def observe(self, t: float) -> None:
        """After a settle at virtual time ``t``."""

    def next_event(self) -> float:
        """The virtual time of this extension's next timer (``inf``: none)."""
        return math.inf

    def wait(self) -> float:
        """Wait in real time for the timer :meth:`next_event` named; a deadline for the next settle."""
        raise NotImplementedError

    def report(self) -> dict:
        """What this extension recorded (merged into the result's ``extra``)."""
        return {}

    def clear(self) -> None:
        """Before the core clears the namespace (at the start and the end of a replay): remove its
        own objects that own Jobs, so that no controller creates them again (JobSet)."""

    def cleanup(self) -> None:
        """At the end of the replay, whatever happened."""


class Extension:
    """A real system that joins the local control plane and its replays (see the module docstring)."""
    #: the name ``kube up --with NAME`` and a shape's ``with_`` use
    name: ClassVar[str] = ""
    #: what it is and its version, as a recording's ``recorded_on`` names it (``Kueue v0.17.1``)
    title: ClassVar[str] = ""
    version: ClassVar[str] = ""
    #: the replay policies it plans (``kube replay --policy NAME``)
    policies: ClassVar[tuple[str, ...]] = ()
    #: the roles of the daemons it spawns (stopped by :meth:`stop`, and first by ``kube down``)
    roles: ClassVar[tuple[str, ...]] = ()
    #: what the model is given from the real run, in a comparison's heading
    model_given: ClassVar[str] = ""

    # ---- the control plane ---------------------------------------------------------------
    def unavailable(self) -> str | None:
        return None

    def feature_gates(self, shape) -> dict[str, bool]:
        return {}

    def node_labels(self, shape, k: int) -> dict[str, str]:
        return {}

    def implied_by(self, shape) -> bool:
        """Does ``shape`` need this extension without ``--with`` naming it (the topology set-up:
        a shape with a topology)? It must then start no daemon and need no feature gate."""
        return False

    def ports(self, shape) -> dict[str, int]:
        return {}

    def start(self, cp, *, timeout: float, say) -> None:
        """Install and start (``cp.spawn``); called once the core is up and its nodes registered."""

    def stop(self, cp, *, say=lambda msg: None) -> None:
        """Stop the daemons it spawned (by PID) and forget them; what it installed stays."""
        mine = [p for p in cp.procs if p.role in self.roles]
        _, left = cp.stop([mine])
        if left:
            raise CourseError(f"{self.title or self.name}'s daemons (PID {left}) would not stop",
                              hint=cp.log_hint())
        cp.procs = [p for p in cp.procs if p.role not in self.roles]
        cp.save()
        if mine:
            say(f"stopped {', '.join(sorted({p.role for p in mine}))}")

    # ---- replays -------------------------------------------------------------------------
    def plan(self, workload, *, policy: str, file: str | None, options: dict):
        """The replay plan for ``policy`` (one of :attr:`policies`)."""
        raise InputError(f"--policy {policy}: {self.name} plans no replay", file=file)

    def replay(self, run: ReplayRun) -> ReplayHooks | None:
        """Its hooks for one replay on a control plane it joined (``None``: it takes no part)."""
        return None


REGISTRY: dict[str, Extension] = {}


def register(cls: type[Extension]) -> type[Extension]:
    """Register an extension class by its ``name`` (usable as a decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    REGISTRY[cls.name] = cls()
    return cls


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str) -> Extension:
    """The extension registered as ``name``, or a one-line error naming those that are."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise InputError(f"{name}: choose from {', '.join(names()) or 'none'}", field="--with") from None


def implied(shape) -> list[Extension]:
    """The extensions ``shape`` implies (:meth:`Extension.implied_by`), by name."""
    return [REGISTRY[name] for name in names() if REGISTRY[name].implied_by(shape)]


def policies() -> tuple[str, ...]:
    return tuple(p for name in names() for p in REGISTRY[name].policies)


def for_policy(policy: str) -> Extension | None:
    return next((ext for ext in REGISTRY.values() if policy in ext.policies), None)


class AllHooks(ReplayHooks):
    """Several extensions' hooks as one: every point called on each, in order (``settled``: calm
    when all are; ``next_event``: the earliest, and ``wait`` waits for that one)."""

    def __init__(self, hooks):
        self.hooks = list(hooks)
        self._next: ReplayHooks | None = None
        self.horizon = min((h.horizon for h in self.hooks), default=math.inf)

    def prepare(self) -> None:
        for h in self.hooks:
            h.prepare()

    def manifest(self, job, body: dict) -> dict:
        for h in self.hooks:
            body = h.manifest(job, body)
        return body

    def pod_group(self, job, body: dict) -> dict:
        for h in self.hooks:
            body = h.pod_group(job, body)
        return body

    def settled(self, pods):
        parts = [h.settled(pods) for h in self.hooks]
        return (tuple(p[0] for p in parts), all(p[1] for p in parts),
                frozenset().union(*(p[2] for p in parts)))

    def observe(self, t: float) -> None:
        for h in self.hooks:
            h.observe(t)

    def next_event(self) -> float:
        times = [(h.next_event(), k) for k, h in enumerate(self.hooks)]
        t, k = min(times, default=(math.inf, -1))
        self._next = self.hooks[k] if t < math.inf else None
        return t

    def wait(self) -> float:
        return self._next.wait()

    def report(self) -> dict:
        out: dict = {}
        for h in self.hooks:
            out.update(h.report())
        return out

    def clear(self) -> None:
        for h in self.hooks:
            h.clear()

    def cleanup(self) -> None:
        for h in self.hooks:
            with contextlib.suppress(CourseError, OSError):
                h.cleanup()
