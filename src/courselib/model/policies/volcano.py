"""``volcano``: PodGroup ``minMember``, the enqueue action, then all-or-nothing allocate (FACTS §3.1).

The model follows **Volcano v1.15.1** (2026-07-30; ``courselib/data/versions.toml`` ``[volcano]``):
Volcano's Go module is not served by the module proxy, so it is modelled, never run; every file and
line below is ``volcano-sh/volcano`` at tag v1.15.1.

One scheduling session per cycle, with the default actions ``enqueue, allocate``:

1. **enqueue** — a ``Pending`` PodGroup becomes ``Inqueue`` only if every enabled plugin lets
   it (``JobEnqueueable``, ``session_plugins.go`` L582–610):

   - ``overcommit`` (``overcommit.go`` L37, L91, L124): ``idle = total × 1.2 − used`` and the job
     is enqueueable if ``inqueue + minReq ≤ idle``; otherwise the event "resource in cluster is
     overused";
   - ``proportion`` (``proportion.go`` ≈L404–440): rejects when ``minReq + allocated + inqueue >
     capability`` of the job's queue (the whole cluster unless the queue has a quota):
     "queue resource quota insufficient".

   ``minReq`` is the PodGroup's minResources: ``min_member × gpus_per_pod`` GPUs. A PodGroup
   *without* minResources (``min_resources=False``) skips the plugins altogether: "if
   job.PodGroup.Spec.MinResources == nil || ssn.JobEnqueueable(job)" (``enqueue.go`` L95–97), so it
   is Inqueue at once and only allocate keeps it from binding (bibliography ``volcano-podgroup-api``).
   Volcano finds a pod's PodGroup through the pod's own ``scheduling.k8s.io/group-name``
   annotation (``pkg/scheduler/api/job_info.go`` L164): on the Job or its metadata it joins nothing.
2. **allocate** — pop the first Inqueue job (the session's ``JobOrderFn``), place its tasks on
   nodes inside a Statement; ``stmt.Commit()`` only ``if ssn.JobReady(job)``, i.e. at least
   ``minMember`` tasks placed (``allocate.go`` L343); otherwise ``stmt.Discard()`` (L865):
   nothing is bound. The PodGroup then carries ``Unschedulable``/``NotEnoughResources`` with the
   message "U/N tasks in gang unschedulable" (``gang.go`` L229–296), where U counts only the tasks
   that could *not* be placed: :func:`gang_message`. A job that *reaches*
   ``minMember`` with tasks left stops there and goes back into the queue
   (``allocateResourcesForTasks``: ``if ssn.JobReady(job) && !tasks.Empty() { break }``, then
   ``if tasks.Len() > 0 { jobs.Push(job) }``, ``allocate.go`` L343–356); a ready job places one
   task per turn. So two
   elastic jobs competing for one node interleave, one pod each, instead of the first taking
   every pod it can (upstream ``allocate_test.go`` "two Jobs on one node", in ``tests/upstream``).
   ``JobOrderFn`` of the default tiers: ``priority`` (higher first), ``gang`` (a job not yet ready
   before a ready one), ``drf`` (the smaller share first — here the GPUs it holds), then
   creation time. Queue order (``proportion``'s ``QueueOrderFn``) is not modelled: one job order
   spans the queues.

Nodes are chosen best-fit (fewest free GPUs that fit: the ``binpack`` plugin's effect), ties
to the lowest index — a modelling choice.

On a cluster with a topology (HyperNodes, one tier per level, the innermost tier 1) a job's
request is its PodGroup's ``networkTopology``: ``required: L`` is ``mode: hard`` with
``highestTierAllowed`` the tier of L, ``preferred: L`` is ``mode: soft``, which v1.15.1 turns into
hard up to the virtual cluster top (``framework/session.go`` L1066–1103), so L itself is not
used. Either way the gang goes through the HyperNode gradients
(:func:`courselib.model.topology.volcano_hypernode`); a ready job's later tasks are placed as
without a topology.

Two paths, one behaviour: the reference cycle re-sorts every job and re-sums the Inqueue
minResources for every candidate (O(jobs²) per cycle), and places a ready job's tasks one turn at
a time; the fast cycle keeps the still-placing PodGroups in a list already in priority order and
the sums as running totals, gives a ready job in one turn the tasks it would win turn after turn,
and looks at a PodGroup the enqueue action refused again only when its minResources would pass
both plugins (:class:`~courselib.model.waitlist.NeedIndex`), so a cycle costs O(PodGroups that
can change), not O(jobs ever submitted) nor O(PodGroups Pending) (issue 23).
"""
from __future__ import annotations

from bisect import insort
from heapq import heapify, heappop, heappush

import math

from courselib.model import topology
from courselib.model.gang import JobRun, SchedState
from courselib.model.policies.base import Policy
from courselib.model.waitlist import NeedIndex
from courselib.model.workload import Workload

PENDING_PG, INQUEUE_PG, RUNNING_PG = "Pending", "Inqueue", "Running"
#: overcommit.go ``defaultOverCommitFactor`` (FACTS §3.1); also what Volcano uses for a factor below 1.
DEFAULT_OVERCOMMIT_FACTOR = 1.2
_NO_MIN_RESOURCES = "PodGroup Inqueue at once (no minResources: enqueue lets it through; allocate decides)"
OVERUSED = "Unschedulable: resource in cluster is overused (overcommit)"
QUOTA_INSUFFICIENT = "Unschedulable: queue resource quota insufficient (proportion)"
#: the kind of both (SchedState.set_reason): which plugin refused a Pending PodGroup first
NOT_ENQUEUEABLE = "Unschedulable: not enqueueable"


def gang_message(job, bound: int, fit: int) -> str:
    """The PodGroup condition the gang plugin writes for a job that is not ready (v1.15.1
    ``pkg/scheduler/plugins/gang/gang.go`` L237–252): "U/N tasks in gang unschedulable", where N is
    every task of the job and U is ``minAvailable`` less the tasks that *could* be placed — the
    ready ones (bound, ``ReadyTaskNum``) and those the discarded statement had allocated
    (``Statement.Discard`` keeps each one's last transaction, ``framework/statement.go`` L365–389,
    and the plugin counts those whose status was allocated). 400 of 512 fitting reads "112/512"."""
    return (f"Unschedulable/NotEnoughResources: {job.min_member - bound - fit}/{job.pods} "
            "tasks in gang unschedulable")


class Volcano(Policy):
    name = "volcano"

    def __init__(self, workload: Workload, seed: int = 0, overcommit_factor: float = DEFAULT_OVERCOMMIT_FACTOR,
                 enqueue: bool = True, min_resources: bool = True):
        super().__init__(workload, seed)
        # overcommit.go OnSessionOpen: a factor below 1 is logged as invalid and replaced by the default
        self.overcommit_factor = overcommit_factor if overcommit_factor >= 1.0 else DEFAULT_OVERCOMMIT_FACTOR
        self.enqueue = enqueue
        self.min_resources = min_resources   # False: PodGroups without minResources (enqueue waves them on)
        self.phase: dict[str, str] = {}
        self.jobs: list[JobRun] = []
        # fast path: (order key..., run) lists, and the Inqueue minResources as running totals
        self._fresh: list[tuple] = []  # PodGroups submitted since the last cycle
        self._held: dict[str, NeedIndex] = {}  # Pending PodGroups refused at enqueue, per queue
        self._placing: list[tuple] = []  # Inqueue, or Running with tasks left to place
        self._inq_total = 0
        self._inq: dict[str, int] = {}
        self._capability: dict[str, int] = {}

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        for run in runs:
            self.phase[run.name] = PENDING_PG
            self.jobs.append(run)
            self._fresh.append((-run.job.priority, run.job.submit, run.seq, run))

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
        return sum(self._min_req(r) for r in self.jobs if self.phase.get(r.name) == INQUEUE_PG
                   and not r.finished and (queue is None or r.job.queue == queue))

    def _enqueue(self, state: SchedState, order: list[JobRun]) -> None:
        cluster = state.cluster
        for run in order:
            if self.phase[run.name] != PENDING_PG:
                continue
            if not self.enqueue:  # allocate flips Pending to Inqueue itself (allocate.go ≈L153–162)
                self.phase[run.name] = INQUEUE_PG
                continue
            if not self.min_resources:
                self.phase[run.name] = INQUEUE_PG
                state.set_reason(run, None)
                state.log(run.name, _NO_MIN_RESOURCES)
                continue
            min_req = run.job.min_gpus
            used = cluster.total_gpus - cluster.free_gpus
            idle = cluster.total_gpus * self.overcommit_factor - used
            if self._inqueue_req(state) + min_req > idle:
                state.set_reason(run, OVERUSED, kind=NOT_ENQUEUEABLE)
                continue
            q = run.job.queue
            allocated = sum(state.held(r) for r in self.jobs if r.job.queue == q and not r.finished)
            if min_req + allocated + self._inqueue_req(state, q) > self.capability(state, q):
                state.set_reason(run, QUOTA_INSUFFICIENT, kind=NOT_ENQUEUEABLE)
                continue
            self.phase[run.name] = INQUEUE_PG
            state.set_reason(run, None)
            state.log(run.name, f"PodGroup Inqueue (minResources {min_req} GPUs)")

    def _allocate(self, state: SchedState, order: list[JobRun]) -> None:
        self._session(state, [r for r in order if self.phase[r.name] != PENDING_PG
                              and state.bound(r) < r.job.pods], batch=False)

    def _key(self, state: SchedState, run: JobRun) -> tuple:
        """``JobOrderFn``: priority, then not-ready before ready (gang), then the smaller held
        share (drf), then creation; ``seq`` last, so no two keys are equal."""
        job = run.job
        return (-job.priority, state.bound(run) >= job.min_member, state.held(run), job.submit,
                run.seq)

    def _session(self, state: SchedState, runs: list[JobRun], *, batch: bool) -> None:
        """One allocate action: pop the first job, place tasks until it is ready (all or
        nothing), or one task if it already is; a job with tasks left goes back into the queue.
        ``batch``: a ready job takes at once the tasks it would win in consecutive turns."""
        heap = [(self._key(state, r), r) for r in runs]
        heapify(heap)
        while heap:
            key, run = heappop(heap)
            job, bound = run.job, state.bound(run)
            if bound < job.min_member:
                if self._mode(job):
                    if not self._place_hypernode(state, run, job.min_member - bound):
                        continue
                elif not state.place_all_or_nothing(run, job.min_member - bound):
                    state.set_reason(run, gang_message(job, bound, state.last_fit))
                    continue
                self._set_phase(run, RUNNING_PG)
                state.set_reason(run, None)
            else:
                want = self._turns(key, heap[0][0] if heap else None, job, job.pods - bound) \
                    if batch else 1
                if state.place(run, want) < want:    # no node takes another task: done for now
                    continue
            if state.bound(run) < job.pods:
                heappush(heap, (self._key(state, run), run))

    def _mode(self, job) -> str | None:
        """The job's ``networkTopology`` mode on a cluster with HyperNodes: ``hard`` for a
        required level (``highestTierAllowed``: that level's tier), ``soft`` for a preferred one
        (no tier limit: Volcano v1.15.1 makes it hard up to the cluster top, ``session.go``
        L1081–1103), None without a request."""
        if not job.topology or not self.workload.cluster.topology:
            return None
        return "hard" if job.topology[0] == "required" else "soft"

    def _place_hypernode(self, state: SchedState, run: JobRun, need: int) -> bool:
        """The HyperNode gradients tier by tier up to ``highestTierAllowed``, the best bin-packing
        score among those that make the job ready, the tasks inside it node by node
        (:func:`courselib.model.topology.volcano_hypernode`)."""
        job, cluster = run.job, state.cluster
        plan, fit = topology.volcano_hypernode(self.workload.cluster, cluster.rooms(job), need,
                                               job.topology[1], cluster.free, job.gpus_per_pod,
                                               mode=self._mode(job), all_pods=job.pods,
                                               reference=self.reference)
        if plan is None:
            state.set_reason(run, gang_message(job, state.bound(run), fit))
            return False
        state.bind_plan(run, plan)
        return True

    @staticmethod
    def _turns(key: tuple, rival: tuple | None, job, left: int) -> int:
        """How many turns in a row a ready job with ``key`` wins before ``rival`` does: each task
        adds ``gpus_per_pod`` to its held share, the only part of the key that moves."""
        if rival is None or key[:2] < rival[:2] or job.gpus_per_pod == 0:
            return left
        gap = rival[2] - key[2]                     # held GPUs it may grow by and stay first
        turns = -(-gap // job.gpus_per_pod)         # held + m*g < rival's held
        if gap % job.gpus_per_pod == 0 and key[3:] < rival[3:]:
            turns += 1                              # ... or equal, and created earlier
        return max(1, min(left, turns))

    def _min_req(self, run: JobRun) -> int:
        """The PodGroup's minResources in GPUs (0 when it declares none)."""
        return run.job.min_gpus if self.min_resources else 0

    def _set_phase(self, run: JobRun, phase: str) -> None:
        """Change a PodGroup's phase, keeping the Inqueue minResources totals."""
        sign = (phase == INQUEUE_PG) - (self.phase[run.name] == INQUEUE_PG)
        if sign:
            self._inq_total += sign * self._min_req(run)
            self._inq[run.job.queue] = self._inq.get(run.job.queue, 0) + sign * self._min_req(run)
        self.phase[run.name] = phase

    # ---- the fast path: the same decisions from running totals and ordered lists --------------
    def _enqueue_fast(self, state: SchedState) -> None:
        """:meth:`_enqueue` without walking the PodGroups that stay Pending: a PodGroup refused
        waits in ``_held`` (its queue's :class:`~courselib.model.waitlist.NeedIndex`, by
        minResources) and is looked at again only when it would pass both plugins — the first
        such in job order, as the room left (``_room``) only shrinks while PodGroups are enqueued;
        it keeps the reason it was refused with meanwhile. New PodGroups are looked at in order."""
        fresh, self._fresh = sorted(self._fresh), []
        gate = self.enqueue and self.min_resources
        i = 0
        while True:
            entry = fresh[i] if i < len(fresh) else None
            held = None
            if gate:
                for q, idx in self._held.items():
                    if len(idx):
                        hit = idx.first_at_most(self._room(state, q))
                        if hit is not None and (entry is None or hit[0] < entry[:-1]):
                            entry, held = (*hit[0], hit[1]), idx
            if entry is None:
                return
            run = entry[-1]
            if held is not None:
                held.remove(run.job.min_gpus, entry[:-1], run)
            else:
                i += 1
                if gate and not self._enqueueable(state, run):
                    q = run.job.queue
                    if q not in self._held:
                        self._held[q] = NeedIndex(j.min_gpus for j in self.workload.jobs if j.queue == q)
                    self._held[q].add(run.job.min_gpus, entry[:-1], run)
                    continue
            self._set_phase(run, INQUEUE_PG)
            insort(self._placing, entry)
            if self.enqueue:
                state.set_reason(run, None)
                state.log(run.name, f"PodGroup Inqueue (minResources {run.job.min_gpus} GPUs)"
                          if self.min_resources else _NO_MIN_RESOURCES)

    def _room(self, state: SchedState, queue: str) -> int:
        """The largest minResources that passes overcommit and proportion in ``queue`` now."""
        cluster = state.cluster
        idle = cluster.total_gpus * self.overcommit_factor - (cluster.total_gpus - cluster.free_gpus)
        if queue not in self._capability:
            self._capability[queue] = self.capability(state, queue)
        return min(math.floor(idle) - self._inq_total,
                   self._capability[queue] - cluster.held_by_queue.get(queue, 0) - self._inq.get(queue, 0))

    def _enqueueable(self, state: SchedState, run: JobRun) -> bool:
        """overcommit, then proportion (the same arithmetic as :meth:`_enqueue`), from totals."""
        cluster, min_req, q = state.cluster, run.job.min_gpus, run.job.queue
        idle = cluster.total_gpus * self.overcommit_factor - (cluster.total_gpus - cluster.free_gpus)
        if self._inq_total + min_req > idle:
            state.set_reason(run, OVERUSED, kind=NOT_ENQUEUEABLE)
            return False
        if q not in self._capability:
            self._capability[q] = self.capability(state, q)
        if min_req + cluster.held_by_queue.get(q, 0) + self._inq.get(q, 0) > self._capability[q]:
            state.set_reason(run, QUOTA_INSUFFICIENT, kind=NOT_ENQUEUEABLE)
            return False
        return True

    def _allocate_fast(self, state: SchedState) -> None:
        live = [e for e in self._placing if not e[-1].finished]
        self._session(state, [e[-1] for e in live if state.bound(e[-1]) < e[-1].job.pods], batch=True)
        self._placing = [e for e in live if state.bound(e[-1]) < e[-1].job.pods]

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        if self.phase.get(run.name) == INQUEUE_PG:
            self._set_phase(run, RUNNING_PG)
