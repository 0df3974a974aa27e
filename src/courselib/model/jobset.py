"""What the JobSet controller does when one pod of a running gang is lost: restart all, or fail.

A job of ``kind: jobset`` is submitted as a ``jobset.x-k8s.io/v1alpha2`` JobSet with one replicated
Job (``replicas: 1``) whose child Job runs every rank (``parallelism = completions = pods``,
``backoffLimit: 0``). The pinned release is ``sigs.k8s.io/jobset`` v0.12.0 (``k8s/jobset/go.mod``);
line numbers are of that module:

1. **A lost pod fails its child Job.** A preempted pod (the scheduler deletes it; the kubelet kills
   the container) or a crashed one ends ``Failed``; with ``backoffLimit: 0`` the Job controller marks
   the child Job ``Failed`` and deletes its other pods. Nothing in a JobSet tells a preemption from
   a crash unless a failure-policy rule matches the Job's failure reason
   (``failure_policy.go`` L140–164).
2. **No failure policy: the JobSet fails.** ``executeFailurePolicy``: "If no failure policy is
   defined, mark the JobSet as failed" (``pkg/controllers/failure_policy.go`` L52–62).
3. **A failure policy without a matching rule restarts the JobSet**: the default action is
   ``RestartJobSet`` (L44–45, L69–71). When ``status.restartsCountTowardsMax`` has reached
   ``maxRestarts`` the JobSet fails instead, reason ``ReachedMaxRestarts`` (L225–233); otherwise
   ``failurePolicyRecreateAll`` adds one to ``status.restarts`` (L185–198).
4. **Recreate: every child Job goes, and comes back.** Child Jobs whose ``restart-attempt`` label
   is below ``status.restarts`` are "marked for recreation" (``jobset_controller.go`` L363–376) and
   deleted with foreground propagation — their pods first (L761–781); each new Job, of the same
   name, is created once the old one and its pods are gone (``api/jobset/v1alpha2/jobset_types.go``
   L500–504: "Each Job is recreated as soon as its previous iteration (and its Pods) is deleted").
   So **every** rank's pod is deleted and created again, on whatever nodes the scheduler then finds:
   the healthy ranks give their GPUs back and queue for them again.

``maxRestarts`` counts restarts, so a JobSet with ``max_restarts: N`` survives N losses and fails at
the N+1-th. ``RestartJobSetAndIgnoreMaxRestarts`` (a rule on, e.g., ``onJobFailureReasons``) and
the ``InPlaceRestart`` strategy (KEP-467, ``pkg/controllers/in_place_restart.go``, behind the
``InPlaceRestart`` gate) are not used by the course's JobSets; the recovery ladder
(:mod:`courselib.model.recovery`) prices in-place restart separately.
"""
from __future__ import annotations

from dataclasses import dataclass

#: what the JobSet controller does about a failed child Job
RESTART, FAIL = "restart", "fail"

JOBSET_VERSION = "v0.12.0"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


@dataclass(frozen=True)
class Reaction:
    """The controller's answer to one failed child Job: ``action`` and the JobSet's reason."""

    action: str                 # RESTART or FAIL
    restarts: int               # status.restarts afterwards
    reason: str                 # the condition's reason, as the controller writes it
    message: str


def on_child_job_failed(max_restarts: int | None, restarts: int) -> Reaction:
    """What the JobSet controller does when a child Job fails, after ``restarts`` restarts so far.

    ``max_restarts`` ``None`` means the JobSet has no ``failurePolicy``. See the module docstring
    for the lines of ``failure_policy.go`` each branch follows; reasons and messages are
    ``pkg/constants/constants.go`` L51–58, L113–114.
    """
    if restarts < 0:
        raise ValueError("restarts counts from 0")
    if max_restarts is None:
        return Reaction(FAIL, restarts, "FailedJobs", "jobset failed due to one or more job failures")
    if restarts >= max_restarts:
        return Reaction(FAIL, restarts, "ReachedMaxRestarts", "jobset failed due to reaching max number "
                        "of restarts")
    return Reaction(RESTART, restarts + 1, "RestartJobSetFailurePolicyAction",
                    "applying RestartJobSet failure policy action")
