"""``kube-gang``: Kubernetes v1.37.2's own gang scheduling (``GenericWorkload`` on), from its source.

Every job is one ``scheduling.k8s.io/v1beta1`` PodGroup with ``schedulingPolicy.gang.minCount =
min_member``, its pods linked by ``spec.schedulingGroup.podGroupName``. The feature is off by
default: ``GenericWorkload`` is ``{1.35 Alpha false; 1.37 Beta false}`` (``pkg/features/
kube_features.go`` L1622–1625); when it is on, the scheduler adds the GangScheduling plugin
(``pkg/scheduler/apis/config/v1/default_plugins.go`` L72–74, L98–100). Line numbers below are of
``k8s.io/kubernetes@v1.37.2`` under ``pkg/scheduler/`` unless said otherwise.

**With the PodGroup scheduling cycle** (``pod_group_cycle=True``, what v1.36+ and v1.37.2 do):

1. *Quorum before PreEnqueue.* A pod of a gang enters the scheduling queue only when the
   scheduler knows at least ``minCount`` pods of its group (``framework/plugins/gangscheduling/
   gangscheduling.go`` L250–281: "waiting for minCount pods from a gang to appear in scheduling
   queue"); if any pod of the group is gated the whole group is (``backend/queue/
   scheduling_queue.go`` L707–729). The model creates a job's pods when it is submitted, so the
   quorum is met at once (the Job controller's few milliseconds of pod creation are not modelled).
   Which of two gangs submitted together the real scheduler tries first is a race between the Job
   controller's pace and the scheduler's: each pop takes, among the groups that have their quorum
   by then, the highest priority and then the earliest first pod (point 2), so a group whose first
   pod came later goes first only if its quorum came while the scheduler was idle. ``group_order``
   (job names) replays the order a real run's scheduler tried them (its log; the replay's
   comparison checks that order against this rule, ``courselib.live.kube.queue``).
2. *One queue entity per PodGroup* (``scheduling_queue.go`` L550–561, L899–928), ordered like pods
   by ``PrioritySort`` — priority, then timestamp (``framework/plugins/queuesort/priority_sort.go``
   L43–47); the group's timestamp is its first pod's (``scheduling_queue.go`` L414–427).
3. *The PodGroup cycle* (``schedule_one_podgroup.go`` L556–648): on one snapshot, each queued pod
   of the group is filtered and scored like any pod (here: the node with the most free GPUs, as
   ``kube-default``) and assumed in the snapshot; ``PlacementFeasible`` stops the loop as soon as
   ``remaining + scheduled < minCount`` (``gangscheduling.go`` L489–506, message "minCount (M)
   cannot be satisfied: S scheduled, R remaining"). If fewer than ``minCount`` are placed, every
   tentative placement is reverted (L557–562): **the gang holds nothing while it waits**.
   Otherwise all placed pods go to binding together (L847–861); the minCount-th pod's Permit
   allows the others at once (``gangscheduling.go`` L396–422).
4. *After a failed cycle* the group goes to the backoffQ, never to the unschedulable queue
   (``scheduling_queue.go`` L1158–1269; "Once the PodGroups support queueing hints", L1317), and
   with ``SchedulerPopFromBackoffQ`` (``kube_features.go`` L2119–2121, beta, on) the scheduler pops
   the backoffQ whenever the activeQ is empty (``backend/queue/active_queue.go`` L322–350): a
   blocked gang is retried at every change. Which waiting group gets freed capacity first is the
   backoffQ's order: backoff end (``1 s × 2^(n−1)`` capped at ``10 s × √pods``, ``backend/queue/
   backoff_queue.go`` L249–266 — the cap is reached after a few busy retries), then PrioritySort
   (L193–201). The model: groups never tried (or with pods left after a success, requeued without
   backoff, L1215–1220) first in PrioritySort order; then failed groups by ``⌊10 s × √(pods
   waiting)⌋``, priority, and how long they have waited. In the real scheduler the order of two
   failed gangs of one size and priority is a race (the busy loop's rotation).

**Without it** (``pod_group_cycle=False``: the v1.35 alpha design, FACTS §3.3 — pods of a gang
scheduled one at a time, "a Permit plugin checks minCount", a fixed 5-minute timeout): pods are
bound one at a time in ``kube-default``'s order and **hold their GPUs while they wait at
Permit** until ``minCount`` of the group are assumed or bound, then all bind (``gangscheduling.go``
L401–421). Each waiting pod has its own timer, ``permitTimeoutDuration = 5 * time.Minute``
(``gangscheduling.go`` L40–43; any Permit wait is capped at 15 min, ``framework/runtime/
framework.go`` L53, L2122–2127; the timer ``framework/runtime/waiting_pods_map.go`` L99–105). On
expiry the pod is rejected as Unschedulable (L152–155), unreserved and forgotten — its GPUs
return (``schedule_one.go`` L433–447, L507–538) — and goes back to the queue as unschedulable.
GangScheduling's own requeue events (a new pod of the group, a PodGroup change;
``gangscheduling.go`` L75–93) do not occur, so it waits for the flush of pods unschedulable for
more than 5 minutes (``scheduling_queue.go`` L60–65, run every 30 s, L512): modelled as
``requeue_after`` seconds, then the pods rejoin the back of the queue. Two gangs that each hold
part of the cluster therefore let go together and come back together: the v1.35 deadlock turns
into a livelock that holds the GPUs idle for ``permit_timeout`` out of every
``permit_timeout + requeue_after`` seconds.

The timeout is a Go constant in v1.37.2 (not a flag); ``permit_timeout`` exists to show its effect.

Two paths, one behaviour (``tests/test_gang_fastpath.py``): the reference cycle re-sorts every
waiting group and places each one tentatively (rolled back if it falls short of ``minCount``);
the fast cycle keeps the order incrementally, asks the free-GPU buckets how many pods fit
before placing anything, and looks at a failed all-or-nothing gang again only when all its
pods fit (:class:`~courselib.model.waitlist.NeedIndex`; issue 23) — a gang with a topology only
when one domain of its level holds them — and searches the domains of a topology all at once
(:func:`~courselib.model.topology.kube_gang_topology_fast`: numpy over the domains' free GPUs,
where the reference tries each domain pod by pod; issue 29).
"""
from __future__ import annotations

import math
import random
from bisect import insort

import numpy as np

from courselib.model import topology
from courselib.model.gang import RUNNING, JobRun, SchedState
from courselib.model.policies.base import Policy
from courselib.model.policies.kube_default import unschedulable_reason
from courselib.model.waitlist import NeedIndex
from courselib.model.workload import Workload

#: ``permitTimeoutDuration`` (``gangscheduling.go`` L42) and the framework's cap (``framework.go`` L53)
PERMIT_TIMEOUT, MAX_PERMIT_TIMEOUT = 300.0, 900.0
#: ``DefaultPodMaxInUnschedulablePodsDuration`` (``backend/queue/scheduling_queue.go`` L65)
UNSCHEDULABLE_FLUSH = 300.0
#: ``DefaultPodMaxBackoffDuration`` (``scheduling_queue.go`` L82), scaled by √pods for a group
MAX_BACKOFF = 10.0
#: the kind of "minCount (M) cannot be satisfied: S scheduled, R remaining" (SchedState.set_reason):
#: S and R are those of the group's first failed cycle
MIN_COUNT = "PodGroup Unschedulable: minCount cannot be satisfied"


def backoff_cap(pods: int) -> int:
    """The whole seconds of a group's saturated backoff: ``10 s × √pods`` (``backoff_queue.go``
    L253–259), in 1-s ordering windows (L38)."""
    return int(MAX_BACKOFF * math.sqrt(pods)) if pods > 1 else int(MAX_BACKOFF)


def _group_order(value, workload: Workload) -> dict[str, int]:
    """``group_order`` (job names, a list or ``"b,a"``) as name -> rank; every name must be a job."""
    if value is None or value == "" or value == []:
        return {}
    items = value.split(",") if isinstance(value, str) else list(value) \
        if isinstance(value, (list, tuple)) else [str(value)]
    names = {j.name for j in workload.jobs}
    order: dict[str, int] = {}
    for item in items:
        name = str(item).strip()
        if name not in names:
            raise ValueError(f"group_order names {name!r}, which is not a job of the workload "
                             f"({', '.join(sorted(names))})")
        order.setdefault(name, len(order))
    return order


class KubeGang(Policy):
    name = "kube-gang"

    def __init__(self, workload: Workload, seed: int = 0, pod_group_cycle: bool = True,
                 permit_timeout: float = PERMIT_TIMEOUT, requeue_after: float = UNSCHEDULABLE_FLUSH,
                 group_order=None, domains=None, nodes=None):
        super().__init__(workload, seed)
        self.group_order = _group_order(group_order, workload)
        # what a real run chose where the scheduler draws among equals (a comparison gives them):
        # job -> the domain its PodGroup's placement was, job -> {node index: pods}
        self.follow_domains = dict(domains or {})
        self.follow_nodes = {name: {int(i): int(n) for i, n in (v.items() if isinstance(v, dict) else v)}
                             for name, v in dict(nodes or {}).items()}
        #: per job, what the scheduler could have chosen: the tied domains, whether the real
        #: choice (if given) was one of them, the pending messages a failed search may show
        self.choices: dict[str, dict] = {}
        if not 0 < permit_timeout <= MAX_PERMIT_TIMEOUT:
            raise ValueError(f"permit_timeout must be in (0, {MAX_PERMIT_TIMEOUT:g}] seconds "
                             "(the framework caps any Permit wait at 15 minutes)")
        if requeue_after < 0:
            raise ValueError("requeue_after must be >= 0 seconds")
        self.pod_group_cycle = pod_group_cycle
        self.permit_timeout = float(permit_timeout)
        self.requeue_after = float(requeue_after)
        self._seq = 0  # timestamps: (time, order) — later events get larger orders
        self.groups: dict[str, JobRun] = {}  # waiting groups (PodGroup cycle)
        self.stamp: dict[str, tuple] = {}  # the group's queue timestamp
        self.failed: dict[str, tuple] = {}  # groups in the backoffQ -> when they first failed
        self._active: list[tuple] = []  # fast path: (-priority, stamp, name) of groups never failed
        self._backoff: list[tuple] = []  # fast path: (cap, -priority, first failure, name), looked at
        # every cycle; a gang that needs all its pods at once and only free GPUs place waits in
        # _rigid (by GPUs a pod, then pods, in backoffQ order) until they all fit
        self._rigid: dict[int | tuple, NeedIndex] = {}
        self._largest: dict[tuple, tuple] = {}   # (GPUs a pod, level) -> (changes, largest domain's pods)
        self._node_gpus, self._proportional = None, False   # fast topology placement (_fast_topology)
        # pod-by-pod (v1.35) state
        self.queue: list[list] = []  # [priority, creation order, run, pods] runs of queued pods
        self.waiting: dict[str, list[list]] = {}  # run -> [[deadline, [node, ...]], ...] at Permit
        self.later: list[tuple] = []  # (time, order, run, pods) pods rejected, back after the flush

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    # ---- arrivals --------------------------------------------------------------------------
    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        for run in runs:
            state.log(run.name, f"PodGroup gang minCount {run.job.min_member}: {run.job.pods} pods "
                                "created, quorum met (PreEnqueue)")
        if self.pod_group_cycle:
            # the group's timestamp: its first pod's; round-robin creation keeps the workload's
            # order, a recorded group_order overrides it
            runs = sorted(runs, key=lambda r: self.group_order.get(r.name, len(self.group_order)))
            for run in runs:
                self.groups[run.name] = run
                self.stamp[run.name] = (state.now, self._next())
                if not self.reference:
                    insort(self._active, (-run.job.priority, self.stamp[run.name], run.name))
            return
        self._create(state, runs, {r.name: r.job.pods for r in runs})

    def _create(self, state: SchedState, runs: list[JobRun], counts: dict[str, int]) -> None:
        """Pods of jobs created at one instant, round-robin (as ``kube-default``)."""
        if len(runs) > 1:
            names = ", ".join(f"{r.name}-{k}" for k in range(2) for r in runs)
            state.log(runs[0].name, f"pods of {len(runs)} jobs created round-robin: {names}, ...")
        left = {r.name: counts[r.name] for r in runs if counts[r.name] > 0}
        while left:
            alive = [r for r in runs if left.get(r.name)]
            take = left[alive[0].name] if len(alive) == 1 else 1
            for r in alive:
                n = take if len(alive) == 1 else 1
                last = self.queue[-1] if self.queue else None
                if last is not None and last[2] is r:
                    last[3] += n
                else:
                    self.queue.append([r.job.priority, self._next(), r, n])
                left[r.name] -= n
                if not left[r.name]:
                    del left[r.name]

    # ---- one cycle -------------------------------------------------------------------------
    def schedule(self, state: SchedState) -> list[float]:
        if self.pod_group_cycle:
            self._group_cycles(state)
            return []
        return self._pod_by_pod(state)

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        self._forget(run.name)

    # ---- events: pods lost and created again ---------------------------------------------------
    def forget_pods(self, state: SchedState, run: JobRun) -> None:
        self._forget(run.name)

    def requeue_pods(self, state: SchedState, run: JobRun, count: int, restart: bool) -> None:
        """The new pods join their PodGroup (``spec.schedulingGroup``), which enters the queue again
        with the new pods' timestamp (``scheduling_queue.go`` L414–427)."""
        if not self.pod_group_cycle:
            self._create(state, [run], {run.name: count})
            return
        self.failed.pop(run.name, None)
        self.groups[run.name] = run
        self.stamp[run.name] = (state.now, self._next())

    def _preempt_for_group(self, state: SchedState, run: JobRun, want: int) -> bool:
        """Workload-aware preemption for the PodGroup ``run`` (KEP-5710; kube-scheduler v1.37.2
        ``framework/preemption/podgrouppreemption.go``, GenericWorkload on).

        The domain is the whole cluster (L98–101). Each running pod of a lower priority (L207–213,
        L377–379) is a victim on its own — unless its PodGroup says ``disruptionMode: {all: {}}``,
        when the group's scheduled pods are one victim (``types.go`` ``getCrossNodesVictims``
        L250–279). Every potential victim is removed and the group's scheduling algorithm runs once
        on what is left (L223–240: no placement, no preemption), with every filter: here
        :meth:`Cluster.place_without`, the model's usual placement (most free GPUs, lowest node
        index) with GPUs, memory and whole-node ownership read from the bindings. The victims are
        then reprieved one by one, most important first (higher priority, a group before a pod, the
        larger group, the earlier start: ``util.go`` ``MoreImportantVictim`` L67–84): each is put
        back and kept if every pod of that placement still passes the filters on its node
        (L258–331, :meth:`Cluster.room_without`). The rest are preempted: **a victim with
        disruption mode All goes whole**, and the group then fits where the dry run put it. The
        placement is the one found with every victim gone, not the one needing the fewest victims:
        as the real scheduler, the model may take a node's victims where another node would have
        done with fewer.
        """
        cluster, job = state.cluster, run.job
        victims = []   # (priority, rank, size, start, seq, name, {node: pods})
        gone: dict[int, dict[str, int]] = {}   # every potential victim taken off: node -> job -> pods
        for name, nodes in cluster.alloc.items():
            other = state.runs[name]
            if other is run or other.job.priority >= job.priority:
                continue
            start = other.first_bound if other.first_bound is not None else state.now
            for i, b in nodes.items():
                gone.setdefault(i, {})[name] = b.pods
            if other.job.disruption_mode == "all":
                victims.append((other.job.priority, 2, sum(b.pods for b in nodes.values()), start,
                                other.seq, name, {i: b.pods for i, b in nodes.items()}))
            else:
                victims += [(other.job.priority, 2, 1, start, other.seq, name, {i: 1})
                            for i, b in sorted(nodes.items()) for _ in range(b.pods)]
        if not victims:
            return False
        plan = cluster.place_without(job, want, gone)   # the group's pods on the cluster without victims
        if state.bound(run) + sum(plan.values()) < job.min_member:
            return False
        chosen = []
        for v in sorted(victims, key=lambda v: (-v[0], -v[1], -v[2], v[3], v[4])):
            for i, k in v[6].items():
                gone[i][v[5]] -= k                       # put it back ...
            if any(cluster.room_without(job, i, gone[i]) < plan[i] for i in v[6] if i in plan):
                for i, k in v[6].items():
                    gone[i][v[5]] += k                   # ... a pod of the group no longer fits: a victim
                chosen.append(v)
        for v in chosen:
            victim = state.runs[v[5]]
            for i, k in sorted(v[6].items()):
                for _ in range(k):
                    state.lose_pod(victim, i, "preempted", by=run.name)
        return bool(chosen)

    def _forget(self, name: str) -> None:
        self.groups.pop(name, None)
        self.failed.pop(name, None)
        self.waiting.pop(name, None)

    # ---- the PodGroup cycle (v1.36+) -------------------------------------------------------
    def _order(self, state: SchedState) -> list[JobRun]:
        """activeQ (PrioritySort), then the backoffQ (backoff end, then PrioritySort)."""
        live = [r for r in self.groups.values() if not r.finished]
        active = sorted((r for r in live if r.name not in self.failed),
                        key=lambda r: (-r.job.priority, self.stamp[r.name]))
        backoff = sorted((r for r in live if r.name in self.failed),
                         key=lambda r: (backoff_cap(r.job.pods - state.bound(r)), -r.job.priority,
                                        self.failed[r.name]))
        return active + backoff

    def _group_cycles(self, state: SchedState) -> None:
        if not self.reference:
            self._group_cycles_fast(state)
            return
        n = len(state.cluster.nodes)
        for run in self._order(state):
            self._attempt(state, run, n)

    def _attempt(self, state: SchedState, run: JobRun, n: int) -> str:
        """One PodGroup cycle for ``run``: ``placed`` (all its pods), ``partial`` (its quorum or more,
        with pods left: requeued at once) or ``failed`` (back to the backoffQ)."""
        job, bound = run.job, state.bound(run)
        waiting = job.pods - bound
        if self._topology(job) and bound == 0:
            return self._attempt_topology(state, run, n)
        fit = self._fit(state, run, waiting)
        if bound + fit < job.min_member and job.preemption_policy == "PreemptLowerPriority" \
                and self._preempt_for_group(state, run, waiting):
            fit = self._fit(state, run, waiting)
        if bound + fit >= job.min_member and (fit or bound < job.min_member):
            if bound == 0 and run.name in self.follow_nodes:
                self._follow_nodes(state, run, waiting)
            else:
                state.place(run, waiting, spread=True)  # the group's placed pods bind together
            left = job.pods - state.bound(run)
            self.failed.pop(run.name, None)
            if left:  # requeued at once, timestamp kept (scheduling_queue.go L1215–1220)
                state.set_reason(run, unschedulable_reason(left, n))
                return "partial"
            state.set_reason(run, None)
            self.groups.pop(run.name, None)
            return "placed"
        # failed (or, past its quorum, nothing more fits): back to the backoffQ
        if bound >= job.min_member:
            state.set_reason(run, unschedulable_reason(waiting, n))
        else:
            remaining = job.min_member - bound - fit - 1
            status = (f"minCount ({job.min_member}) cannot be satisfied: {bound + fit} scheduled, "
                      f"{remaining} remaining")
            if self.workload.cluster.topology:
                # on a topology the replay runs TopologyAwareWorkloadScheduling: a group without a
                # constraint is one placement, the parent's (topology_placement.go L61-65), and its
                # failure is worded as a search (schedule_one_podgroup.go L1038-1042)
                status = f"0/1 placements are available, first placement status: {status}"
                mine = self.choices.setdefault(run.name, {})
                mine["messages"] = sorted(set(mine.get("messages", ())) | {f"PodGroup Unschedulable: {status}"})
            state.set_reason(run, f"PodGroup Unschedulable: {status}", kind=MIN_COUNT)
        if run.name not in self.failed:
            self.failed[run.name] = (state.now, self._next())
        self.stamp[run.name] = (state.now, self._next())
        return "failed"

    def _topology(self, job) -> bool:
        """A PodGroup with ``schedulingConstraints.topology`` (a required level) on a topology
        cluster, with the TopologyAwareWorkloadScheduling gate on (KEP-5732)."""
        return bool(job.topology and job.topology[0] == "required" and self.workload.cluster.topology
                    and self.pod_group_cycle)

    def topology_note(self, job) -> str | None:
        if not job.topology or not self.workload.cluster.topology:
            return None
        if not self.pod_group_cycle:
            return "v1.35 gang scheduling (Permit) has no topology: the request was ignored"
        if job.topology[0] == "preferred":
            return ("KEP-5732's PodGroup topology is a single required key; there is no preferred "
                    "form: the request was ignored")
        return None

    def _follow_nodes(self, state: SchedState, run: JobRun, waiting: int) -> None:
        """Place the group pod by pod as :meth:`_attempt` does (most free GPUs first), taking among
        equal nodes — kube-scheduler draws one (``selectHost``) — those the real run used; notes
        whether the real placement is one that rule allows."""
        job = run.job
        plan, followed = topology.spread_fill(range(len(state.cluster.nodes)), state.cluster.rooms(job),
                                              waiting, state.cluster.free, job.gpus_per_pod,
                                              self.follow_nodes[run.name])
        state.bind_plan(run, plan)
        self.choices.setdefault(run.name, {})["nodes_followed"] = followed

    def _used(self, state: SchedState) -> list[tuple[int, int]]:
        """(millicores, bytes) allocated on each node: what kube-scheduler's cpu and memory scores see."""
        spec = self.workload.cluster
        used = [[0, 0] for _ in state.cluster.nodes]
        for name, nodes in state.cluster.alloc.items():
            cpu, mem = topology.pod_requests(state.runs[name].job, spec)
            for i, b in nodes.items():
                used[i][0] += b.pods * cpu
                used[i][1] += b.pods * mem
        return [tuple(u) for u in used]

    def _attempt_topology(self, state: SchedState, run: JobRun, n: int) -> str:
        """The PodGroup cycle once per placement (one per domain of the level); the feasible ones are
        scored (:func:`courselib.model.topology.kube_gang_topology`: the fullest domain, then the
        one placing the most pods) and the best taken; equal ones are a ``rand.Int()`` draw (seeded
        here, per job and instant, so the reference and the fast path draw alike; a comparison gives
        the real run's domain, taken when it is one of the tied)."""
        job = run.job
        spec = self.workload.cluster
        rng = random.Random(f"{self.seed}:{job.name}:{state.now!r}")
        level = job.topology[1]
        if self._fast_topology(state, job):
            free = state.cluster.free_array()
            held = self._node_gpus - free
            got = topology.kube_gang_topology_fast(spec, free, job.min_member, job.pods, level, rng,
                                                   gpus_per_pod=job.gpus_per_pod,
                                                   used_cpu=held * topology.GPU_MILLICPU,
                                                   used_mem=held * topology.GPU_MEMORY,
                                                   request=topology.pod_requests(job, spec))
        else:
            got = topology.kube_gang_topology(spec, state.cluster.rooms(job), job.min_member, job.pods, level,
                                              state.cluster.free, rng, gpus_per_pod=job.gpus_per_pod,
                                              used=self._used(state), request=topology.pod_requests(job, spec),
                                              follow_domain=self.follow_domains.get(job.name),
                                              follow_nodes=self.follow_nodes.get(job.name))
        domains = spec.nodes // spec.level_size(level)
        if got.plan is not None:
            self.choices[job.name] = {"level": level, "domain": got.domain, "tied": list(got.tied),
                                      "forced": len(got.tied) == 1, "followed": got.followed,
                                      "scores": [list(x) for x in got.scores],
                                      **({"messages": self.choices[job.name]["messages"]}
                                         if "messages" in self.choices.get(job.name, {}) else {})}
            state.bind_plan(run, got.plan)
            self.failed.pop(run.name, None)
            left = job.pods - state.bound(run)
            if left:
                state.set_reason(run, unschedulable_reason(left, n))
                return "partial"
            state.set_reason(run, None)
            self.groups.pop(run.name, None)
            return "placed"
        # every placement (one per domain) failed: schedule_one_podgroup.go L1038-1042 reports
        # "0/D placements are available, first placement status: ..." with the status of the first
        # placement tried, whichever Go's map order put first (topology_placement.go L89-97): any
        # domain's. The model shows the domain that placed the most pods and keeps every possible one.
        def message(fit: int) -> str:
            return (f"PodGroup Unschedulable: 0/{domains} placements are available, first placement "
                    f"status: minCount ({job.min_member}) cannot be satisfied: {fit} scheduled, "
                    f"{job.min_member - fit - 1} remaining")
        mine = self.choices.setdefault(job.name, {})
        mine["messages"] = sorted(set(mine.get("messages", ())) | {message(f) for f in got.statuses})
        state.set_reason(run, message(got.fit), kind=MIN_COUNT)
        if run.name not in self.failed:
            self.failed[run.name] = (state.now, self._next())
        self.stamp[run.name] = (state.now, self._next())
        return "failed"

    def _group_cycles_fast(self, state: SchedState) -> None:
        """The reference's cycle (activeQ, then backoffQ) without looking at the gangs that cannot
        change: a failed gang that needs all its pods at once (``minCount`` = pods), each placed
        by free GPUs alone, fails again — and keeps its reason (``MIN_COUNT``) — until that many
        pods fit, so it waits in ``_rigid`` (:class:`~courselib.model.waitlist.NeedIndex`, by GPUs
        a pod, then pods) and is looked at only when it is the first in backoffQ order that fits
        (placements only shrink what fits during a cycle). Other failed gangs are looked at every
        cycle: an elastic gang's success is partial and requeues it by the timestamp its last
        failed cycle gave it, which the index would not renew."""
        n = len(state.cluster.nodes)
        groups, cluster = self.groups, state.cluster
        active, self._active = self._active, []
        examine, self._backoff = self._backoff, []
        later: list[tuple] = []
        for e in active:
            run = groups.get(e[-1])
            if run is not None and not run.finished:
                self._settle(state, run, self._attempt(state, run, n), later)
        i = 0
        while True:
            key = examine[i] if i < len(examine) else None
            hit = None
            for g, idx in self._rigid.items():
                if len(idx):
                    h = idx.first_at_most(self._room_for(state, g))
                    if h is not None and (key is None or h[0] < key):
                        key, hit = h[0], (g, idx, h[1])
            if key is None:
                break
            if hit is None:
                i += 1
                run = groups.get(key[-1])
                if run is None or run.finished:
                    continue
            else:
                g, idx, run = hit
                idx.remove(run.job.pods, key, run)
            self._settle(state, run, self._attempt(state, run, n), later)
        for entry in later:  # failed in this cycle: the backoffQ of the next one
            if len(entry) == 2:
                job = entry[1].job
                # a PodGroup with a topology waits for a domain of its level to hold it
                g = (job.gpus_per_pod, job.topology[1]) if self._topology(job) else job.gpus_per_pod
                if g not in self._rigid:
                    self._rigid[g] = NeedIndex(j.pods for j in self.workload.jobs
                                               if j.gpus_per_pod == job.gpus_per_pod)
                self._rigid[g].add(job.pods, entry[0], entry[1])
            else:
                insort(self._backoff, entry)

    def _room_for(self, state: SchedState, g) -> int:
        """Fast path: the most pods of ``g`` GPUs that a failed rigid gang waiting in ``_rigid[g]``
        could place now: anywhere (``g`` a number), or in one domain of a level (``g`` = (GPUs a
        pod, level): a PodGroup with a topology, whose placements are the level's domains, places
        at most a domain's free pods in it). Kept per change of the cluster."""
        cluster = state.cluster
        if isinstance(g, int):
            return cluster.fit_count(g)
        hit = self._largest.get(g)
        if hit is None or hit[0] != cluster.changes:
            size = self.workload.cluster.level_size(g[1])
            hit = self._largest[g] = (cluster.changes,
                                      int((cluster.free_array() // g[0]).reshape(-1, size).sum(axis=1).max()))
        return hit[1]

    def _fast_topology(self, state: SchedState, job) -> bool:
        """Whether :meth:`_attempt_topology` may place ``job`` with
        :func:`~courselib.model.topology.kube_gang_topology_fast`: the fast path, a plain job, no
        real run's draws to follow, and every job's cpu and memory following its GPUs (so a node's
        allocated cpu and memory are its held GPUs' share, and no integer overflows)."""
        if self.reference or job.name in self.follow_domains or job.name in self.follow_nodes \
                or not state.cluster.plain(job):
            return False
        if self._node_gpus is None:
            spec = self.workload.cluster
            self._proportional = all(topology.requests_follow_gpus(j, spec) for j in self.workload.jobs) \
                and max(topology.node_allocatable(spec)) * spec.nodes * 100 < 2 ** 62
            self._node_gpus = np.array([n.gpus for n in state.cluster.nodes], dtype=np.int64)
        return self._proportional

    def _settle(self, state: SchedState, run: JobRun, outcome: str, later: list) -> None:
        """Fast path: where a gang waits after its cycle (``later``: the backoffQ, after this cycle)."""
        job = run.job
        if outcome == "partial":
            self._keep_active(run)
        elif outcome == "failed":
            key = (backoff_cap(job.pods - state.bound(run)), -job.priority, self.failed[run.name], run.name)
            # all or nothing: one that succeeds places every pod, so the queue timestamp a failed cycle
            # gives it (self.stamp, which the fast path does not renew while it waits) is never read
            rigid = job.min_member == job.pods and state.bound(run) == 0 and state.cluster.plain(job)
            later.append((key, run) if rigid else key)

    def _keep_active(self, run: JobRun) -> None:
        if not self.reference:
            insort(self._active, (-run.job.priority, self.stamp[run.name], run.name))

    def _fit(self, state: SchedState, run: JobRun, want: int) -> int:
        """How many of ``want`` pods of ``run`` the filter-and-score loop would place right now."""
        if not self.reference:
            fit = state.cluster.pods_that_fit(run.job)
            if fit is not None:
                return min(fit, want)
        cluster = state.cluster
        before = {i: b.pods for i, b in cluster.alloc.get(run.name, {}).items()}
        placed = cluster.place(run.job, want, spread=True)
        cluster._rollback(run.job, before)
        return placed

    # ---- pod by pod with Permit (v1.35) ----------------------------------------------------
    def _pod_by_pod(self, state: SchedState) -> list[float]:
        cluster, now = state.cluster, state.now
        for run in [r for r in state.runs.values() if r.name in self.waiting]:
            if run.finished or run.state == RUNNING:
                self.waiting.pop(run.name)
                continue
            expired = [w for w in self.waiting[run.name] if w[0] <= now]
            if not expired:
                continue
            self.waiting[run.name] = [w for w in self.waiting[run.name] if w[0] > now]
            nodes = [i for w in expired for i in w[1]]
            for i in nodes:
                cluster.unbind_one(run.job, i)
            state.note(run)
            state.log(run.name, f"Permit timeout after {self.permit_timeout:g} s: {len(nodes)} pods "
                                f"rejected and unreserved ({state.bound(run)}/{run.job.min_member} "
                                "still waiting)")
            self.later.append((now + self.requeue_after, self._next(), run, len(nodes)))
        back = sorted(x for x in self.later if x[0] <= now)
        if back:
            self.later = [x for x in self.later if x[0] > now]
            for _, _, run, pods in back:
                if not run.finished:
                    self.queue.append([run.job.priority, self._next(), run, pods])
        self.queue = [q for q in self.queue if not q[2].finished]
        self.queue.sort(key=lambda q: -q[0])  # PrioritySort; stable: creation order within
        failed: dict[tuple, int] = {}
        kept, n = [], len(cluster.nodes)
        touched: dict[str, JobRun] = {}
        for entry in self.queue:
            run, count = entry[2], entry[3]
            job = run.job
            key = (job.constraint, job.name if job.exclusive else None, job.memory_per_pod)
            placed_on = []
            if not (key in failed and job.gpus_per_pod >= failed[key]):
                while len(placed_on) < count:
                    i = cluster.first_fit_node(job, spread=True)
                    if i is None:
                        failed[key] = min(job.gpus_per_pod, failed.get(key, job.gpus_per_pod))
                        break
                    state.bind(run, i)
                    placed_on.append(i)
            if placed_on:
                touched[run.name] = run
                if state.bound(run) < job.min_member:  # Permit: Wait, each pod on its own timer
                    self.waiting.setdefault(run.name, []).append([now + self.permit_timeout, placed_on])
                else:
                    self.waiting.pop(run.name, None)  # quorum: every waiting pod is allowed
            if len(placed_on) < count:
                entry[3] = count - len(placed_on)
                kept.append(entry)
        self.queue = kept
        queued: dict[str, int] = {}
        for entry in kept:
            queued[entry[2].name] = queued.get(entry[2].name, 0) + entry[3]
        for run in state.active():
            k = queued.get(run.name)
            if run.name in self.waiting and state.bound(run) < run.job.min_member:
                state.set_reason(run, f"{state.bound(run)}/{run.job.min_member} pods waiting at Permit for "
                                      "minCount (GangScheduling)" + (f"; {unschedulable_reason(k, n)}" if k else ""))
            elif k:
                state.set_reason(run, unschedulable_reason(k, n))
            elif any(x[2] is run for x in self.later):
                state.set_reason(run, "pods rejected at Permit (timeout): Unschedulable until the "
                                      "unschedulable-pods flush")
            else:
                state.set_reason(run, None)
        times = [w[0] for ws in self.waiting.values() for w in ws] + [x[0] for x in self.later]
        return sorted(set(t for t in times if t > now))
