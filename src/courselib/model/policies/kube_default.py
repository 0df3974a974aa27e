"""``kube-default``: the default kube-scheduler, one pod at a time (FACTS §3.3).

Before v1.35 the default scheduler has no gang scheduling: every pod is taken from one queue
and bound on its own to the node that scores best, or left Unschedulable. Two training jobs
that each need more than half of the free GPUs can therefore each bind a part of their
ranks — and then wait for each other forever: a deadlock with GPUs held and nothing training.

The model:

- one queue of pods in pod-creation order, sorted by priority first (the ``PrioritySort``
  queue-sort plugin), then creation order;
- pods of jobs submitted at the same instant are created round-robin (a0, b0, a1, b1, …), as
  concurrent Job controllers interleave their pod creations;
- each pod goes to the node with the most free GPUs that fits it, ties to the lowest node index
  — a modelling choice. The real default scorer does not look at GPUs: NodeResourcesFit's
  LeastAllocated scores cpu and memory only (weights 1, 1; ``pkg/scheduler/apis/config/v1/
  defaults.go`` L33–36, L230–236 in v1.37.2), so "most free GPUs" is what it does when every
  pod's cpu and memory requests are proportional to its GPUs on nodes proportioned alike. Among
  equal scores v1.37.2 pops a heap built from a parallel filter pass (``schedule_one.go``
  L613–614, L813–835; ``framework/sorted_nodes.go`` L61–64): effectively at random, never by
  node index. On identical nodes without constraints the tie cannot change how many pods each
  job binds (``seed`` is accepted for a future seeded tie-break and unused today);
- optional ``preemption``: a pod that does not fit may evict pods of lower-priority jobs on
  one node (the PostFilter preemption). A running job that loses a rank stops training and
  restarts from scratch once it has its ranks again — TorchElastic "all workers are stopped
  and restarted" (FACTS §4.3).

Two paths, one behaviour: the reference keeps one list entry per pending pod and re-sorts it every
cycle. The fast path (without preemption) keeps, per priority and per GPUs-a-pod, runs of
consecutive pods of one job as ``[run, count, creation order]``, and walks them merged in creation
order. Capacity only shrinks during a cycle, so once a plain pod (no constraint, not exclusive)
of g GPUs finds no node, no plain pod of g or more GPUs can find one later in the cycle: those
lists are not walked. A job left waiting keeps its reason ("k pods Unschedulable") as long as
nothing of it changes, so only jobs that bound pods, are new, or had their reason changed by
someone else are looked at: a cycle costs O(pods bound + jobs that changed), not O(queue).
"""
from __future__ import annotations

from courselib.model.cluster import is_plain
from courselib.model.gang import RUNNING, JobRun, SchedState
from courselib.model.policies.base import Policy
from courselib.model.workload import Workload


def unschedulable_reason(pods: int, nodes: int) -> str:
    """A job's waiting reason when ``pods`` of its pods fit on none of ``nodes`` nodes for want of GPUs:
    "k pods Unschedulable:" and the real scheduler's FailedScheduling message, every node counted
    (``FitError.Error()``, pkg/scheduler/framework/types.go L1470-1521; its PostFilter part, preemption's
    message, is left out). Held word for word by ``tests/test_kube_default_message.py``."""
    return (f"{pods} pod{'s' if pods > 1 else ''} Unschedulable: 0/{nodes} nodes are available: "
            f"{nodes} Insufficient nvidia.com/gpu.")


class KubeDefault(Policy):
    name = "kube-default"

    def topology_note(self, job) -> str | None:
        if job.topology and self.workload.cluster.topology:
            return (f"kube-default is topology-blind: topology {{{job.topology[0]}: {job.topology[1]}}} "
                    "was ignored; each pod went where the default scheduler put it")
        return None

    def __init__(self, workload: Workload, seed: int = 0, preemption: bool = False,
                 pod_order: tuple[str, ...] | None = None):
        super().__init__(workload, seed)
        self.preemption = preemption
        # The order in which the Job controller really created the pods of jobs submitted
        # together: one job name per pod (recorded from a real control plane by
        # ``courselib kube replay``). ``None``: round-robin, the model's own assumption.
        self.pod_order = list(pod_order) if pod_order is not None else None
        self.queue: list[JobRun] = []  # one entry per pending pod, in creation order
        self.known: dict[str, JobRun] = {}  # jobs whose pods this scheduler was given
        self._known_pos: dict[str, int] = {}  # a job's place in ``known`` (the reasons' order)
        # fast path: priority -> {GPUs a pod (0: not plain) -> [[run, pods, creation order], ...]}
        self._lists: dict[int, dict[int | None, list[list]]] = {}
        self._created = 0
        self._last: JobRun | None = None  # the run whose pods were created last
        self._queued: dict[str, int] = {}  # pods of each run waiting in the queue
        self._settled: set[str] = set()  # queued runs whose reason is already "k pods Unschedulable"
        self._fresh: dict[str, JobRun] = {}  # queued runs whose reason the next cycle must set
        self._preempting: bool | None = None  # whether any job of the workload may preempt

    @property
    def fast(self) -> bool:
        if self._preempting is None:   # (the workload never changes: look at its jobs once)
            self._preempting = any(j.preemption_policy for j in self.workload.jobs)
        return not (self.reference or self.preemption or self._preempting)

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        self.create_pods(runs, {r.name: r.job.pods for r in runs}, recorded=True)

    def create_pods(self, runs: list[JobRun], counts: dict[str, int], state: SchedState | None = None,
                    recorded: bool = False) -> None:
        """Round-robin pod creation across jobs created at the same instant (or, with
        ``pod_order``, the order the real Job controller created them in)."""
        self.known.update((r.name, r) for r in runs)
        for r in runs:
            self._known_pos.setdefault(r.name, len(self._known_pos))
        order = self._recorded_order(runs, counts) if recorded else None
        if state is not None and len(runs) > 1:
            if order is None:
                names = ", ".join(f"{r.name}-{k}" for k in range(2) for r in runs)
                state.log(runs[0].name, f"pods of {len(runs)} jobs created round-robin: {names}, ...")
            else:
                state.log(runs[0].name, f"pods of {len(runs)} jobs created in the recorded order: "
                                        f"{', '.join(r.name for r in order[:6])}, ...")
        if self.fast:
            if order is None:
                self._create_runs(runs, counts)
            else:
                for run in order:
                    self._append(run, 1)
            return
        if order is not None:
            self.queue.extend(order)
            return
        for k in range(max(counts.values(), default=0)):
            for run in runs:
                if k < counts[run.name]:
                    self.queue.append(run)

    def _recorded_order(self, runs: list[JobRun], counts: dict[str, int]) -> list[JobRun] | None:
        """The next pods of ``runs`` in ``pod_order`` (consumed), or ``None`` without one.

        A recorded order must name exactly ``counts`` pods of each run at its front (the pods of
        jobs submitted together), else it does not describe this workload: a ``ValueError``.
        """
        if self.pod_order is None:
            return None
        by_name = {r.name: r for r in runs}
        need = dict(counts)
        total = sum(need.values())
        head, rest = self.pod_order[:total], self.pod_order[total:]
        for name in head:
            if need.get(name, 0) <= 0:
                raise ValueError(f"pod_order: expected {total} pods of {', '.join(by_name)} next, "
                                 f"found {name!r}")
            need[name] -= 1
        if any(need.values()):
            raise ValueError(f"pod_order: too few pods recorded for {', '.join(by_name)}")
        self.pod_order = rest
        return [by_name[name] for name in head]

    def _create_runs(self, runs: list[JobRun], counts: dict[str, int]) -> None:
        """The same round-robin order, as runs of consecutive pods of one job."""
        left = {r.name: counts[r.name] for r in runs if counts[r.name] > 0}
        while left:
            alive = [r for r in runs if left.get(r.name)]
            if len(alive) == 1:  # the last job's remaining pods: one run
                self._append(alive[0], left.pop(alive[0].name))
                break
            for r in alive:
                self._append(r, 1)
                left[r.name] -= 1
                if not left[r.name]:
                    del left[r.name]

    def _plain_class(self, job) -> int:
        """GPUs a pod for a plain job (only free GPUs decide where it fits), else 0."""
        return job.gpus_per_pod if job.constraint is None and is_plain(job, self.workload.cluster) else 0

    def _append(self, run: JobRun, count: int) -> None:
        lst = self._lists.setdefault(run.job.priority, {}).setdefault(self._plain_class(run.job), [])
        if lst and lst[-1][0] is run and self._last is run:  # truly consecutive pods: one run
            lst[-1][1] += count
        else:
            self._created += 1
            lst.append([run, count, self._created])
        self._last = run
        self._queued[run.name] = self._queued.get(run.name, 0) + count
        self._settled.discard(run.name)
        self._fresh[run.name] = run

    def drop_pods(self, run: JobRun) -> None:
        """The job's pods are deleted (Kueue evicted it): their reason is no longer ours to set."""
        self.known.pop(run.name, None)
        self.queue = [r for r in self.queue if r is not run]
        for classes in self._lists.values():
            for cls, lst in classes.items():
                classes[cls] = [seg for seg in lst if seg[0] is not run]
        self._queued.pop(run.name, None)
        self._settled.discard(run.name)
        self._fresh.pop(run.name, None)
        self._last = None

    def schedule(self, state: SchedState) -> list[float]:
        if self.fast:
            return self._schedule_fast(state)
        cluster = state.cluster
        order = sorted((r for r in self.queue if not r.finished),  # a finished job's pods are gone
                       key=lambda r: -r.job.priority)  # stable: creation order kept
        self.queue = []  # pods re-created during this cycle (preemption victims) land here
        failed: dict[tuple, int] = {}  # (constraint, exclusive owner, memory) -> least GPUs that failed
        left: list[JobRun] = []
        unschedulable: dict[str, int] = {}
        for run in order:
            job = run.job
            key = (job.constraint, job.name if job.exclusive else None, job.memory_per_pod)
            if key in failed and job.gpus_per_pod >= failed[key]:
                left.append(run)
                unschedulable[run.name] = unschedulable.get(run.name, 0) + 1
                continue
            node = cluster.first_fit_node(job, spread=True)
            if node is None and self.may_preempt(job):
                node = self._preempt_for(state, run)
            if node is None:
                failed[key] = min(job.gpus_per_pod, failed.get(key, job.gpus_per_pod))
                left.append(run)
                unschedulable[run.name] = unschedulable.get(run.name, 0) + 1
                continue
            state.bind(run, node)
        self.queue = [r for r in left if not r.finished] + self.queue
        n = len(cluster.nodes)
        for run in sorted(self.known.values(), key=lambda r: self._known_pos[r.name]):
            k = unschedulable.get(run.name)
            state.set_reason(run, None if k is None else unschedulable_reason(k, n))
        return []

    def _schedule_fast(self, state: SchedState) -> list[float]:
        cluster = state.cluster
        if state.reason_changes is None:
            state.reason_changes = []
        changed = {r.name: r for r in state.reason_changes}  # by another policy since our last cycle
        for name, run in changed.items():
            if name in self._settled:
                self._settled.discard(name)
                self._fresh[name] = run
        top = cluster.max_free()
        failed: dict[tuple, int] = {}
        touched: dict[str, JobRun] = {}  # runs whose pods were looked at this cycle
        plain_fail = top + 1  # plain pods of this many GPUs or more cannot fit any more
        for prio in sorted(self._lists, reverse=True):  # PrioritySort; creation order within
            classes = self._lists[prio]
            pos = dict.fromkeys(classes, 0)
            kept: dict = {cls: [] for cls in classes}
            active = [cls for cls in classes if cls < plain_fail]  # 0 (not plain) always
            while True:
                best, best_seq = None, None
                for cls in active:  # the next pod run in creation order, over the live lists
                    lst, i = classes[cls], pos[cls]
                    if i < len(lst) and (best_seq is None or lst[i][2] < best_seq):
                        best, best_seq = cls, lst[i][2]
                if best is None:
                    break
                seg = classes[best][pos[best]]
                pos[best] += 1
                run, count = seg[0], seg[1]
                if run.finished:  # a finished job's pods are gone
                    self._queued.pop(run.name, None)
                    continue
                touched[run.name] = run
                job = run.job
                key = (job.constraint, job.name if job.exclusive else None, job.memory_per_pod)
                placed = 0
                if not (key in failed and job.gpus_per_pod >= failed[key]):
                    while placed < count:
                        node = cluster.first_fit_node(job, spread=True)
                        if node is None:
                            failed[key] = min(job.gpus_per_pod, failed.get(key, job.gpus_per_pod))
                            if best:  # no plain pod this wide or wider fits now
                                plain_fail = min(plain_fail, job.gpus_per_pod)
                                active = [c for c in active if c < plain_fail]
                            break
                        state.bind(run, node)
                        placed += 1
                self._queued[run.name] -= placed
                if placed < count:
                    seg[1] = count - placed
                    kept[best].append(seg)
            for cls in list(classes):
                if pos[cls]:  # in place: the unwalked tail is not copied
                    classes[cls][:pos[cls]] = kept[cls]
                    if not classes[cls]:
                        del classes[cls]
        n = len(cluster.nodes)
        # reasons: of every job that bound pods, is new (not settled) or was changed by someone
        # else; a settled job's reason ("k pods Unschedulable") is already what the cycle gives it
        todo = dict(touched)
        todo.update((name, r) for name, r in changed.items() if name in self.known)
        todo.update(self._fresh)
        for name in sorted(todo, key=self._known_pos.__getitem__):
            run = todo[name]
            k = None if run.finished else (self._queued.get(name) or None)
            state.set_reason(run, None if k is None else unschedulable_reason(k, n))
            if k is None:
                self._queued.pop(name, None)
                self._settled.discard(name)
                self._fresh.pop(name, None)
            elif run.job.min_member == run.job.pods:  # else it may finish with pods still queued
                self._settled.add(name)
                self._fresh.pop(name, None)
            else:
                self._fresh[name] = run
        state.reason_changes = []
        return []

    # ---- events: pods lost and created again ---------------------------------------------------
    def forget_pods(self, state: SchedState, run: JobRun) -> None:
        self.drop_pods(run)

    def requeue_pods(self, state: SchedState, run: JobRun, count: int, restart: bool) -> None:
        self.create_pods([run], {run.name: count})

    def may_preempt(self, job) -> bool:
        """The job's PriorityClass says ``PreemptLowerPriority`` (or, without one, the policy's
        ``preemption`` option does)."""
        if job.preemption_policy is not None:
            return job.preemption_policy == "PreemptLowerPriority"
        return self.preemption

    # ---- preemption (PostFilter) -----------------------------------------------------------
    def _preempt_for(self, state: SchedState, run: JobRun) -> int | None:
        """DefaultPreemption for one pod of ``run`` (kube-scheduler v1.37.2, GenericWorkload off).

        On each node (``preemption.go`` ``DryRunPreemption`` L430–503): every pod of a lower
        priority is a potential victim (``default_preemption.go`` L479–483); all are removed, and
        if the pod then fits they are reprieved one by one, most important first — higher
        priority, then the earlier start (``preemption/util.go`` ``MoreImportantVictim`` L67–84) —
        each kept if the pod still fits with it back (``default_preemption.go`` L286–448). Of the
        nodes where this works, ``pickOneNodeForPreemption`` (``preemption.go`` L324–428) takes the
        one with the lowest highest-priority victim, then the lowest sum of victim priorities
        (each + 2^31: in effect the fewest victims), then the fewest victims, then the node whose
        highest-priority victims' earliest start is the latest; then "the first such node" — a map's order in the real scheduler, the lowest node
        index here. The victims are deleted (their GPUs come back, :meth:`SchedState.lose_pod`)
        and the pod binds there.
        """
        cluster, job = state.cluster, run.job
        allowed = cluster.allowed(job.constraint)
        best = None
        for i, node in enumerate(cluster.nodes):
            if allowed is not None and i not in allowed:
                continue
            pods = []  # (priority, start, job name) per lower-priority pod on the node
            gone: dict[str, int] = {}  # pods taken off the node in the dry run, per job
            for name, count in cluster.jobs_on[i].items():
                other = state.runs[name]
                if other.job.priority < job.priority:
                    start = other.first_bound if other.first_bound is not None else state.now
                    pods += [(other.job.priority, start, other.seq, name)] * count
                    gone[name] = count
            if not pods or not cluster.fits_without(job, i, gone):
                continue       # nothing to take, or no room even with every lower-priority pod gone
            victims = []
            for p in sorted(pods, key=lambda p: (-p[0], p[1], p[2])):  # most important first
                gone[p[3]] -= 1                        # put it back ...
                if not cluster.fits_without(job, i, gone):
                    gone[p[3]] += 1                    # ... the pod no longer fits: a victim
                    victims.append(p)
            if not victims:
                continue
            top = max(v[0] for v in victims)
            score = (top, sum(v[0] + 2 ** 31 for v in victims), len(victims),
                     -min(v[1] for v in victims if v[0] == top), i)
            if best is None or score < best[0]:
                best = (score, i, victims)
        if best is None:
            return None
        _, i, victims = best
        for prio, _, _, name in victims:
            state.lose_pod(state.runs[name], i, "preempted", by=run.name)
        if not cluster.fits(job, i):
            return None
        return i
