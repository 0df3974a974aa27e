"""``volcano``: PodGroup ``minMember``, the enqueue action, then all-or-nothing allocate (FACTS §3.1).

One scheduling session per cycle, with the default actions ``enqueue, allocate``:

1. **enqueue** — a ``Pending`` PodGroup becomes ``Inqueue`` only if every enabled plugin lets
   it (``JobEnqueueable``, ``session_plugins.go`` L582–610):

   - ``overcommit`` (``overcommit.go`` L37, L91, L124): ``idle = total × 1.2 − used`` and the job
     is enqueueable if ``inqueue + minReq ≤ idle``; otherwise the event "resource in cluster is
     overused";
   - ``proportion`` (``proportion.go`` ≈L404–440): rejects when ``minReq + allocated + inqueue >
     capability`` of the job's queue (the whole cluster unless the queue has a quota):
     "queue resource quota insufficient".

   ``minReq`` is the PodGroup's minResources: ``min_member × gpus_per_pod`` GPUs.
2. **allocate** — for each Inqueue job in priority order, place tasks on nodes inside a
   Statement; ``stmt.Commit()`` only ``if ssn.JobReady(job)``, i.e. at least ``minMember``
   tasks placed (``allocate.go`` L343); otherwise ``stmt.Discard()`` (L865): nothing is bound.
   The PodGroup then carries ``Unschedulable``/``NotEnoughResources`` with the message
   "U/N tasks in gang unschedulable" (``gang.go`` L229–290).

Nodes are chosen best-fit (fewest free GPUs that fit: the ``binpack`` plugin's effect), ties
to the lowest index — a modelling choice.

Two paths, one behaviour: the reference cycle re-sorts every job and re-sums the Inqueue
minResources for every candidate (O(jobs²) per cycle); the fast cycle keeps the Pending and the
still-placing PodGroups in two lists already in priority order and the sums as running totals,
so a cycle costs O(PodGroups waiting), not O(jobs ever submitted).
"""
from __future__ import annotations

from bisect import insort

from courselib.model.gang import JobRun, SchedState
from courselib.model.policies import Policy
from courselib.model.workload import Workload

PENDING_PG, INQUEUE_PG, RUNNING_PG = "Pending", "Inqueue", "Running"


class Volcano(Policy):
    name = "volcano"

    def __init__(self, workload: Workload, seed: int = 0, overcommit_factor: float = 1.2,
                 enqueue: bool = True):
        super().__init__(workload, seed)
        self.overcommit_factor = overcommit_factor
        self.enqueue = enqueue
        self.phase: dict[str, str] = {}
        self.jobs: list[JobRun] = []
        # fast path: (order key..., run) lists, and the Inqueue minResources as running totals
        self._pending: list[tuple] = []  # PodGroups still Pending
        self._placing: list[tuple] = []  # Inqueue, or Running with tasks left to place
        self._inq_total = 0
        self._inq: dict[str, int] = {}
        self._capability: dict[str, int] = {}

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        for run in runs:
            self.phase[run.name] = PENDING_PG
            self.jobs.append(run)
            insort(self._pending, (-run.job.priority, run.job.submit, run.seq, run))

    def _order(self):
        return sorted((r for r in self.jobs if not r.finished),
                      key=lambda r: (-r.job.priority, r.job.submit, r.seq))

    def capability(self, state: SchedState, queue: str) -> int:
        quota = self.workload.queue(queue).nominal_quota
        return state.cluster.total_gpus if quota is None else quota

    def schedule(self, state: SchedState) -> list[float]:
        if not self.reference:
            self._enqueue_fast(state)
            self._allocate_fast(state)
            return []
        order = self._order()
        self._enqueue(state, order)
        self._allocate(state, order)
        return []

    def _inqueue_req(self, state: SchedState, queue: str | None = None) -> int:
        """minReq of Inqueue PodGroups not yet ready (their resources are promised, not used)."""
        return sum(r.job.min_gpus for r in self.jobs if self.phase.get(r.name) == INQUEUE_PG
                   and not r.finished and (queue is None or r.job.queue == queue))

    def _enqueue(self, state: SchedState, order: list[JobRun]) -> None:
        cluster = state.cluster
        for run in order:
            if self.phase[run.name] != PENDING_PG:
                continue
            if not self.enqueue:  # allocate flips Pending to Inqueue itself (allocate.go ≈L153–162)
                self.phase[run.name] = INQUEUE_PG
                continue
            min_req = run.job.min_gpus
            used = cluster.total_gpus - cluster.free_gpus
            idle = cluster.total_gpus * self.overcommit_factor - used
            if self._inqueue_req(state) + min_req > idle:
                state.set_reason(run, "Unschedulable: resource in cluster is overused (overcommit)")
                continue
            q = run.job.queue
            allocated = sum(state.held(r) for r in self.jobs if r.job.queue == q and not r.finished)
            if min_req + allocated + self._inqueue_req(state, q) > self.capability(state, q):
                state.set_reason(run, "Unschedulable: queue resource quota insufficient (proportion)")
                continue
            self.phase[run.name] = INQUEUE_PG
            state.set_reason(run, None)
            state.log(run.name, f"PodGroup Inqueue (minResources {min_req} GPUs)")

    def _allocate(self, state: SchedState, order: list[JobRun]) -> None:
        for run in order:
            if self.phase[run.name] == PENDING_PG:
                continue
            self._allocate_one(state, run)

    def _allocate_one(self, state: SchedState, run: JobRun) -> None:
        """Place ``run``'s tasks: all-or-nothing up to ``minMember``, then the rest as they fit."""
        job, bound = run.job, state.bound(run)
        if bound >= job.pods:
            return
        if bound >= job.min_member:  # JobReady already: extra tasks bind as they fit
            state.place(run, job.pods - bound)
            return
        if state.place_all_or_nothing(run, job.min_member - bound):
            state.place(run, job.pods - job.min_member)
            self._set_phase(run, RUNNING_PG)
            state.set_reason(run, None)
        else:
            state.set_reason(run, f"Unschedulable/NotEnoughResources: {job.pods - bound}/{job.pods} "
                                  "tasks in gang unschedulable")

    def _set_phase(self, run: JobRun, phase: str) -> None:
        """Change a PodGroup's phase, keeping the Inqueue minResources totals."""
        sign = (phase == INQUEUE_PG) - (self.phase[run.name] == INQUEUE_PG)
        if sign:
            self._inq_total += sign * run.job.min_gpus
            self._inq[run.job.queue] = self._inq.get(run.job.queue, 0) + sign * run.job.min_gpus
        self.phase[run.name] = phase

    # ---- the fast path: the same decisions from running totals and ordered lists --------------
    def _enqueue_fast(self, state: SchedState) -> None:
        still = []
        for entry in self._pending:
            run = entry[-1]
            if self.enqueue and not self._enqueueable(state, run):
                still.append(entry)
                continue
            self._set_phase(run, INQUEUE_PG)
            insort(self._placing, entry)
            if self.enqueue:
                state.set_reason(run, None)
                state.log(run.name, f"PodGroup Inqueue (minResources {run.job.min_gpus} GPUs)")
        self._pending = still

    def _enqueueable(self, state: SchedState, run: JobRun) -> bool:
        """overcommit, then proportion (the same arithmetic as :meth:`_enqueue`), from totals."""
        cluster, min_req, q = state.cluster, run.job.min_gpus, run.job.queue
        idle = cluster.total_gpus * self.overcommit_factor - (cluster.total_gpus - cluster.free_gpus)
        if self._inq_total + min_req > idle:
            state.set_reason(run, "Unschedulable: resource in cluster is overused (overcommit)")
            return False
        if q not in self._capability:
            self._capability[q] = self.capability(state, q)
        if min_req + cluster.held_by_queue.get(q, 0) + self._inq.get(q, 0) > self._capability[q]:
            state.set_reason(run, "Unschedulable: queue resource quota insufficient (proportion)")
            return False
        return True

    def _allocate_fast(self, state: SchedState) -> None:
        still = []
        for entry in self._placing:
            run = entry[-1]
            if run.finished:
                continue
            self._allocate_one(state, run)
            if state.bound(run) < run.job.pods:
                still.append(entry)
        self._placing = still

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        if self.phase.get(run.name) == INQUEUE_PG:
            self._set_phase(run, RUNNING_PG)
