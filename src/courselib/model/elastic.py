"""torchrun's elastic membership (``--nnodes=MIN:MAX``): what nodes leaving do to a running job.

On a membership change torchrun's agents stop every worker, form a new worker group from the nodes
still there and start every worker again, from the last checkpoint, with a new ``RANK`` and
``WORLD_SIZE`` (torchrun docs, "Membership Changes"). ``--max-restarts`` counts every such restart,
"regardless of whether the restart was caused due to a failure or a scaling event" (torchrun's
quickstart). Chapter 7, "Elastic jobs shrink instead of waiting".
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AfterLeave:
    """The job after one node left: how many nodes, its new world size, restarts used, and its state."""

    nodes: int
    world_size: int          # 0 once the job has stopped
    restarts_used: int
    state: str               # "training" or "failed: restarts used up"


def nodes_leave(nodes: int, min_nodes: int, nproc_per_node: int, max_restarts: int, leaves: int) -> list[AfterLeave]:
    """The job after each of ``leaves`` nodes leaves, one at a time, from ``nodes`` nodes.

    A leave with a restart left restarts every worker on the nodes still there (``RANK`` 0 to
    ``WORLD_SIZE - 1`` again); a leave with none left stops the job, however many nodes remain.
    Going below ``min_nodes`` (the rendezvous then waits for nodes) is outside this function.
    """
    if not 1 <= min_nodes <= nodes or nproc_per_node < 1 or max_restarts < 0 or leaves < 0:
        raise ValueError("need 1 <= min_nodes <= nodes, nproc_per_node >= 1, max_restarts >= 0, leaves >= 0")
    if nodes - leaves < min_nodes:
        raise ValueError(f"{leaves} leaves take {nodes} nodes below MIN={min_nodes}: the rendezvous would wait for "
                         "nodes, which this function does not model")
    out, used = [], 0
    for _ in range(leaves):
        nodes -= 1
        if used >= max_restarts:
            out.append(AfterLeave(nodes, 0, used, "failed: restarts used up"))
            break
        used += 1
        out.append(AfterLeave(nodes, nodes * nproc_per_node, used, "training"))
    return out
