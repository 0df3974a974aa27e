"""The shape every scheduling policy has (:class:`Policy`); the policies subclass it."""
from __future__ import annotations

from courselib.model.gang import JobRun, SchedState
from courselib.model.workload import Workload


class Policy:
    """Base class: a policy decides which pods to bind; the simulator moves time."""

    name = "policy"
    #: Slurm kills a job at its ``--time`` limit (FACTS §3.4 ``sbatch.1`` L2477–2487).
    enforces_time_limit = False
    #: ``True``: take the straightforward reference path (see ``courselib.sim.gang.simulate``)
    reference = False
    #: the reference as a class of its own, when the fast path is a subclass of it (Slurm's
    #: ``SlurmFast``): ``make_policy(..., reference=True)`` makes that class instead
    reference_class: type | None = None

    def __init__(self, workload: Workload, seed: int = 0):
        self.workload = workload
        self.seed = seed

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        """Jobs that arrive together (same submit time), in workload order."""

    def schedule(self, state: SchedState) -> list[float]:
        """One scheduling cycle at ``state.now``; returns times for future cycles."""
        return []

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        """``run`` completed (or hit its time limit) and released its GPUs."""

    def forget_pods(self, state: SchedState, run: JobRun) -> None:
        """Every pod of ``run`` not yet bound is deleted (its controller deleted them)."""

    def requeue_pods(self, state: SchedState, run: JobRun, count: int, restart: bool) -> None:
        """``count`` pods of ``run`` are created again: a preempted pod replaced (``restart``
        False) or, ``restart`` True, a restarted JobSet's pods (every one: ``count`` = pods).
        A policy that models events (``courselib.sim.gang.EVENT_POLICIES``) queues them."""
        raise NotImplementedError(f"{self.name} does not model pods created again")

    def topology_note(self, job) -> str | None:
        """What this policy did with ``job``'s topology request when it did not honour it as
        asked (None: honoured, or none made). See :mod:`courselib.model.topology`."""
        return None

    def cycle_when_ready(self) -> bool:
        """``True``: a job passing its barrier (its pods ready) can change what this policy does,
        so the simulator runs another cycle at the same instant (Kueue's blockAdmission)."""
        return False
