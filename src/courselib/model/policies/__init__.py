"""The five scheduling policies, each a small module that uses the field's own names.

Every policy has the same shape (:class:`Policy`): the simulator hands it the jobs that arrive
at one instant (:meth:`Policy.submit`), then runs a scheduling cycle (:meth:`Policy.schedule`)
whenever something changed; a cycle binds pods through the :class:`~courselib.model.gang.SchedState`
and returns the future times at which it wants another cycle (Kueue's timeouts and backoffs).
Training starts, completions and preemptions are the simulator's business (``courselib.sim.gang``).

=================  ==========================================================================
``kube-default``   one FIFO queue of pods, each bound greedily on its own (FACTS §3.3)
``volcano``        PodGroup ``minMember``: enqueue, then allocate all-or-nothing (FACTS §3.1)
``kueue``          ClusterQueue quota admission, no placement check, ``waitForPodsReady`` *on* (Kueue: off by default)
``slurm``          whole-job allocation in priority order, backfill with reservations (§3.4)
``kube-gang``      Kubernetes v1.37.2's own gang scheduling: PodGroup ``minCount``, quorum before
                   PreEnqueue, the PodGroup cycle (or, v1.35, Permit wait and its timeout)
=================  ==========================================================================
"""
from __future__ import annotations

import inspect
import math

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

    def cycle_when_ready(self) -> bool:
        """``True``: a job passing its barrier (its pods ready) can change what this policy does,
        so the simulator runs another cycle at the same instant (Kueue's blockAdmission)."""
        return False


def policy_names() -> list[str]:
    return list(_registry())


def _registry() -> dict:
    from courselib.model.policies.kube_default import KubeDefault
    from courselib.model.policies.kube_gang import KubeGang
    from courselib.model.policies.kueue import Kueue
    from courselib.model.policies.slurm_fast import SlurmFast
    from courselib.model.policies.volcano import Volcano
    return {"kube-default": KubeDefault, "volcano": Volcano, "kueue": Kueue, "slurm": SlurmFast,
            "kube-gang": KubeGang}


#: The smallest meaningful value of each numeric policy option, and why (NaN and infinities are
#: refused for every option).
OPTION_MINIMUM = {
    "overcommit_factor": (-math.inf, ""),  # below 1 Volcano logs a warning and uses 1.2 (volcano.py)
    "timeout": (1e-9, "a waitForPodsReady timeout is a positive duration in seconds"),
    "backoff_base": (1e-9, "a requeue backoff is a positive duration in seconds"),
    "backoff_max": (1e-9, "a requeue backoff is a positive duration in seconds"),
    "backoff_limit": (0, "a count of requeues"),
    "bf_window": (1e-9, "the backfill window is a positive duration in seconds"),
    "bf_max_job_test": (1, "backfill tests at least one job"),
    "bf_job_part_count_reserve": (0, "a count of jobs"),
}


def check_option(policy: str, key: str, value, annotation: str) -> None:
    """Refuse a policy option whose value has the wrong type or no meaning (ValueError, one line)."""
    optional = "None" in annotation
    if value is None:
        if not optional:
            raise ValueError(f"{key}: needs a value")
        return
    if annotation.startswith("bool"):
        if not isinstance(value, bool):
            raise ValueError(f"{key}={value!r}: expected true or false")
        return
    if annotation.startswith(("float", "int")):
        whole = annotation.startswith("int")
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
            raise ValueError(f"{key}={value!r}: expected {'a whole number' if whole else 'a number'}")
        if not math.isfinite(value):
            raise ValueError(f"{key}={value!r}: expected a finite number")
        minimum, why = OPTION_MINIMUM.get(key, (0, "negative values have no meaning here"))
        if value < minimum:
            raise ValueError(f"{key}={value!r} is below {minimum:g}: {why}")
        return
    if annotation.startswith("str") and not isinstance(value, str):
        raise ValueError(f"{key}={value!r}: expected text")


def make_policy(name: str, workload: Workload, seed: int = 0, reference: bool = False, **options) -> Policy:
    """The policy called ``name`` with its options (e.g. ``overcommit_factor=1.2``); an option of
    the wrong type or without meaning (``nan``, ``inf``, negative, ``backfill=maybe``) is a ValueError.
    ``reference=True``: the policy's straightforward reference path (:attr:`Policy.reference`)."""
    reg = _registry()
    if name not in reg:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(reg)}")
    cls = reg[name]
    params = inspect.signature(cls.__init__).parameters
    bad = [k for k in options if k not in params or k in ("self", "workload", "seed")]
    if bad:
        allowed = [p for p in params if p not in ("self", "workload", "seed")]
        raise ValueError(f"policy {name!r} has no option {bad[0]!r}; options: {', '.join(allowed) or 'none'}")
    for key, value in options.items():
        check_option(name, key, value, str(params[key].annotation))
    if reference and cls.reference_class is not None:
        cls = cls.reference_class
    pol = cls(workload, seed=seed, **options)
    pol.reference = reference
    return pol
