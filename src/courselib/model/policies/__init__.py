"""The five scheduling policies, each a small module that uses the field's own names.

Every policy has the same shape (:class:`Policy`): the simulator hands it the jobs that arrive
at one instant (:meth:`Policy.submit`), then runs a scheduling cycle (:meth:`Policy.schedule`)
whenever something changed; a cycle binds pods through the :class:`~courselib.model.gang.SchedState`
and returns the future times at which it wants another cycle (Kueue's timeouts and backoffs).
Training starts, completions and preemptions are the simulator's business (``courselib.sim.gang``).

=================  ==========================================================================
``kube-default``   one FIFO queue of pods, each bound greedily on its own (FACTS §3.3)
``volcano``        PodGroup ``minMember``: enqueue, then allocate all-or-nothing (FACTS §3.1)
``kueue``          ClusterQueue quota admission, no placement check, ``waitForPodsReady`` *on* (configured; Kueue's own default: off to v0.18, on from v0.19)
``slurm``          whole-job allocation in priority order, backfill with reservations (§3.4)
``kube-gang``      Kubernetes v1.37.2's own gang scheduling: PodGroup ``minCount``, quorum before
                   PreEnqueue, the PodGroup cycle (or, v1.35, Permit wait and its timeout)
=================  ==========================================================================
"""
from __future__ import annotations

import importlib
import inspect
import math

from courselib.model.policies.base import Policy
from courselib.model.workload import Workload

#: Each policy by its name, as module:class. Names only, so that listing them (the CLI's choices)
#: loads none of them: a policy's module is imported when it is first asked for.
POLICIES = {
    "kube-default": "courselib.model.policies.kube_default:KubeDefault",
    "volcano": "courselib.model.policies.volcano:Volcano",
    "kueue": "courselib.model.policies.kueue:Kueue",
    "slurm": "courselib.model.policies.slurm_fast:SlurmFast",   # the fast twin of slurm.py's reference
    "kube-gang": "courselib.model.policies.kube_gang:KubeGang",
}


def policy_names() -> list[str]:
    return list(POLICIES)


def policy_class(name: str) -> type[Policy]:
    """The class of the policy called ``name`` (a ValueError naming the choices if there is none)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
    module, _, cls = POLICIES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


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
    "max_switch_wait": (0, "a wait for switches is a duration in seconds"),
    "bf_interval": (0, "the backfill interval is a duration in seconds (0: a pass at every cycle)"),
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
    cls = policy_class(name)
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
