"""``kueue``: ClusterQueue quota admission, all-or-nothing per workload, no placement check (FACTS §3.2).

- **Admission** reserves quota for the *whole* Workload or not at all (``all_or_nothing.md``
  L17–19). A podset fits if its GPUs ≤ the ClusterQueue's unused ``nominalQuota`` (1), or ≤
  the cohort's unused quota (2) **and** ≤ unused ``nominalQuota + borrowingLimit`` (3)
  (``cluster_queue.md`` L229–241); other queues lend at most their ``lendingLimit``. The
  arithmetic is Kueue v0.17.0's own (:meth:`Kueue.available`): quota one queue has borrowed is
  gone from the cohort for everyone, and a request above the maximum capacity is told so. A queue
  not declared in the workload has the whole cluster as its nominal quota.
- **No placement check**: an admitted workload's pods are created and bound one by one by the
  default scheduler (``kube-default``); quota is not placement (``all_or_nothing.md`` L35–37),
  so an admitted workload can hold part of its GPUs and wait.
- **waitForPodsReady**: what Kueue does when its configuration says nothing **depends on the
  release** (``version``; the course runs Kueue v0.17.1, ``courselib/data/versions.toml``):

  - **v0.15–v0.18**: *off*. In the ``v1beta2`` configuration the block's presence turns it on (no
    ``enable`` field: strict decoding refuses one), and then ``timeout`` **must be given** — no
    default (v0.17.1 ``apis/config/v1beta2/defaults.go`` L97–103 default nothing unless the block
    is there, ``pkg/util/waitforpodsready/waitforpodsready.go`` L21–23, ``pkg/config/validation.go``
    L201–208 "must be specified", ``pkg/config/config.go`` L57 ``EnableStrict``).
  - **v0.19 and later**: *on* by default, ``timeout`` 30 min and ``recoveryTimeout`` = ``timeout``
    (v0.19.2 ``apis/config/v1beta2/defaults.go`` L48, L99–112; CHANGELOG-0.19.md L215); only the
    ``DisableWaitForPodsReady`` feature gate (alpha, off; ``pkg/features/kube_features.go`` L52,
    L667–669; ``pkg/util/waitforpodsready/waitforpodsready.go`` L24–29) turns it off.

  ``wait_for_pods_ready=None`` is that default of ``version`` (``disable_gate``: the v0.19 gate).
  The course's ``kueue`` policy (``wait_for_pods_ready=True``, the default) *configures* it with a
  30-minute ``timeout`` — what the all-or-nothing documentation recommends, and from v0.19 simply
  the default; ``False`` leaves the block out (from v0.19 that also needs the gate). Every
  admission line of the trace says which, and by whose choice. When it is on:
  if an admitted workload's pods are not all ready ``timeout`` after
  admission, the admission is cancelled (reason ``PodsReadyTimeout``), its pods are deleted,
  and the workload is re-queued after ``backoff_base × 2^(n−1)`` s, capped at ``backoff_max``
  (``setup_wait_for_pods_ready.md`` L64–70, L101, L112–118). ``config_api="v1beta1"`` is the old
  configuration (``enable: true``): timeout 5 min, ``block_admission`` true
  (v0.17.1 ``apis/config/v1beta1/defaults.go`` L46, L97–101). Backoff 60 s → 3600 s in both.
  After ``backoff_limit`` re-queues the workload is deactivated (None = never).

Pending order is Kueue v0.17's (``pkg/cache/queue/cluster_queue.go`` ``baseCompareFunc``):
priority, then the *queue-order timestamp*, then the Workload's UID. The timestamp is the creation
time, except for a workload evicted by the PodsReady timeout: with ``requeuingStrategy.timestamp:
Eviction`` (the default, ``apis/config/v1beta2/defaults.go``) it is the eviction's time
(``pkg/workload/workload.go`` ``GetQueueOrderTimestamp``), so a requeued workload goes behind the
ones created before it was evicted (``requeuing_timestamp="Creation"`` keeps its place). UIDs are
random: between workloads created in the same second the order is a coin toss; here it is the
submission order, or ``queue_order`` (job names, the order a real Kueue drew — ``courselib kube
replay --policy kueue`` records it). Admission is ``BestEffortFIFO``: a workload that does not fit
lets the next one try. "Pods ready" is modelled as the barrier passed (``min_member`` pods placed,
which is all pods unless ``min_member`` is set); a workload that is training is never evicted by
the timeout.

Two paths, one behaviour: the reference re-sorts and re-sums every workload ever submitted in
every cycle; the fast path keeps each ClusterQueue's admitted GPUs as a running total (quota
usage), checks timeouts only among the admitted, and looks at a workload refused for quota again
only when its ClusterQueue has room for it (:class:`~courselib.model.waitlist.NeedIndex`), so a
cycle does not cost more with every workload that waits and cannot change (issue 23). A waiting
workload's "k more needed" is the count of its first refusal (``SchedState.set_reason`` kinds).
On a topology the fast path asks TAS again for a waiting workload only when a domain of its
level (for ``required``; else the whole cluster) has the free pods for it: the largest domain's
free pods are kept per change of the cluster, and its refusal keeps its first text (issue 29).
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from courselib.model import topology
from courselib.model.gang import RUNNING, JobRun, SchedState
from courselib.model.policies.base import Policy
from courselib.model.policies.kube_default import KubeDefault
from courselib.model.waitlist import NeedIndex
from courselib.model.workload import Workload
from courselib.versions import pinned

TIMEOUTS = {"v1beta2": 30 * 60.0, "v1beta1": 5 * 60.0}
BLOCK_ADMISSION = {"v1beta2": False, "v1beta1": True}
#: The Kueue releases whose waitForPodsReady defaults the model knows (read at v0.17.1, v0.18.6 and
#: v0.19.2; v0.15 is the first to serve the v1beta2 configuration), and the first with it on by default.
KNOWN_MINORS = range(15, 20)
DEFAULT_ON_SINCE = 19


def kueue_minor(version: str) -> int:
    """``"v0.17.1"`` -> 17: the Kueue minor release whose defaults apply (a ValueError for one the
    model has not read)."""
    parts = str(version).lstrip("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise ValueError(f"version={version!r}: a Kueue release such as v0.17.1") from None
    if major != 0 or minor not in KNOWN_MINORS:
        raise ValueError(f"version={version!r}: the model knows Kueue's waitForPodsReady defaults for "
                         f"v0.{KNOWN_MINORS[0]} to v0.{KNOWN_MINORS[-1]} only (read from their source)")
    return minor


def default_wait_for_pods_ready(version: str, disable_gate: bool = False) -> bool:
    """Whether Kueue ``version`` runs waitForPodsReady when its configuration leaves it out."""
    minor = kueue_minor(version)
    if disable_gate and minor < DEFAULT_ON_SINCE:
        raise ValueError(f"disable_gate: the DisableWaitForPodsReady gate exists from "
                         f"v0.{DEFAULT_ON_SINCE} (Kueue {version} has none)")
    return minor >= DEFAULT_ON_SINCE and not disable_gate


def pinned_version() -> str:
    """The Kueue release the course runs (``courselib/data/versions.toml``)."""
    return pinned("kueue").version
#: the kind of "k more needed" (SchedState.set_reason): the count is that of the first refusal
QUOTA = "Pending: insufficient unused quota"
#: the one ResourceFlavor of the course's Kueue set-up, and how a refused pod set's message begins
#: (flavorassigner.go L1043-1063 at v0.17.1: the refusal names the flavor, not the ClusterQueue)
FLAVOR = "default-flavor"
ASSIGN = "couldn't assign flavors to pod set main:"
TAS = "Pending: topology"   # the kind of TAS's "allows to fit only k out of n pod(s)"
BLOCKED = "Pending: admission blocked until admitted workloads have PodsReady"


def plan_text(state: SchedState, plan) -> str:
    """``node3 x2, node4 x4``: where a plan puts its pods."""
    return ", ".join(f"{state.cluster.nodes[i].name} x{n}" for i, n in plan)


def requeue_delay(n: int, base: float = 60.0, cap: float = 3600.0) -> float:
    """Seconds before the n-th re-queue (n ≥ 1): 60, 120, 240, …, 3600 (FACTS §3.2)."""
    return min(base * 2 ** (n - 1), cap)


class Kueue(Policy):
    name = "kueue"

    def __init__(self, workload: Workload, seed: int = 0, wait_for_pods_ready: bool | None = True,
                 config_api: str = "v1beta2", timeout: float | None = None,
                 block_admission: bool | None = None, backoff_base: float = 60.0,
                 backoff_max: float = 3600.0, backoff_limit: int | None = None,
                 requeuing_timestamp: str = "Eviction", queue_order: tuple[str, ...] | None = None,
                 version: str | None = None, disable_gate: bool = False):
        super().__init__(workload, seed)
        if config_api not in TIMEOUTS:
            raise ValueError(f"config_api must be one of {', '.join(TIMEOUTS)}")
        self.version = version or pinned_version()
        self.minor = kueue_minor(self.version)
        # who decided: the configuration (True/False) or the release's own default (None)
        self.by_default = wait_for_pods_ready is None
        if self.by_default:
            if config_api != "v1beta2":
                raise ValueError("wait_for_pods_ready=None (Kueue's own default) is read for the "
                                 "v1beta2 configuration only")
            wait_for_pods_ready = default_wait_for_pods_ready(self.version, disable_gate)
        elif disable_gate:
            default_wait_for_pods_ready(self.version, disable_gate)   # the gate must exist
            if wait_for_pods_ready:
                raise ValueError("disable_gate turns waitForPodsReady off: it cannot be on as well")
        self.disable_gate = disable_gate
        if requeuing_timestamp not in ("Eviction", "Creation"):
            raise ValueError("requeuing_timestamp must be Eviction or Creation")
        self.requeue_by_eviction = requeuing_timestamp == "Eviction"
        # ties (same priority and timestamp) in this order; jobs not named after the named ones
        self._rank = {name: i for i, name in enumerate(queue_order or ())}
        self._order_time: dict[str, float] = {}  # name -> eviction time (queue-order timestamp)
        self.wait_for_pods_ready = wait_for_pods_ready
        self.timeout = TIMEOUTS[config_api] if timeout is None else timeout
        self.block_admission = BLOCK_ADMISSION[config_api] if block_admission is None else block_admission
        self.backoff_base, self.backoff_max, self.backoff_limit = backoff_base, backoff_max, backoff_limit
        self.pods = KubeDefault(workload, seed)  # the scheduler that places admitted pods
        self.workloads: list[JobRun] = []
        self.admitted: dict[str, float] = {}  # name -> admission time
        self.requeues: dict[str, int] = {}
        self.deactivated: set[str] = set()
        # fast path: workloads the next cycle must look at (new, backoff over, after a block),
        # workloads refused for quota by ClusterQueue (by GPUs, then queue order), those in backoff
        self._fresh: dict[str, JobRun] = {}
        self._held: dict[str, NeedIndex] = {}
        self._backoff: list[tuple] = []  # (eligible_at, seq, name) heap
        self._usage: dict[str, int] = {}
        self._deadlines: list[tuple] = []  # (admitted + timeout, seq, name, admitted) heap
        self._specs: dict = {}                   # queue name -> its Queue (Workload.queue, once)
        self._usage_moves = 0                    # fast path: bumped when quota in use changes
        self._avail: dict[str, tuple] = {}       # fast path: queue -> (_usage_moves, available())
        self._queue_names = sorted({j.queue for j in workload.jobs} | {q.name for q in workload.queues})
        self.recovering: dict[str, float] = {}  # admitted workloads that lost pods -> since when
        self.was_ready: set[str] = set()         # admitted workloads that have been ready since
        self._unready: set[str] = set()          # fast path: admitted, not in was_ready since
        self._largest: dict[tuple, tuple] = {}   # fast path: (g, level) -> (changes, largest domain's pods)
        self._wake: list[float] = []             # timers asked for between cycles
        self._plans: dict[str, list] = {}        # TAS assignments found, not yet bound
        self._tas_refused: dict[str, int] = {}   # fast path: refused by TAS at this cluster.changes

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        plain = [r for r in runs if not self.managed(r.job)]
        if plain:   # no queue: Kueue does not see them; the scheduler places their pods at once
            self.pods.create_pods(plain, {r.name: r.job.pods for r in plain})
        runs = [r for r in runs if self.managed(r.job)]
        self.workloads.extend(runs)
        for run in runs:
            self._fresh[run.name] = run

    @staticmethod
    def managed(job) -> bool:
        """A job Kueue manages: it names a queue (a workload event's preempting job without one
        is a plain pod that only the kube-scheduler sees)."""
        return job.queue != ""

    # ---- events: pods lost and created again -------------------------------------------------
    def forget_pods(self, state: SchedState, run: JobRun) -> None:
        self.pods.drop_pods(run)

    def requeue_pods(self, state: SchedState, run: JobRun, count: int, restart: bool) -> None:
        """The lost pods (or, after a JobSet restart, all pods) are created again while the workload
        stays admitted: the JobSet restarts inside its quota. Its PodsReady condition turns false
        with reason ``WaitForRecovery`` (``pkg/controller/jobframework/reconciler.go`` L1630–1656),
        and with waitForPodsReady on, a workload not ready again within ``recoveryTimeout`` (in the
        v1beta2 configuration the ``timeout`` unless set, ``apis/config/v1beta2/defaults.go`` L99)
        is evicted (``pkg/controller/core/workload_controller.go`` L1343–1346)."""
        self.pods.create_pods([run], {run.name: count})
        if self.managed(run.job) and run.name in self.admitted and self.wait_for_pods_ready:
            self.was_ready.add(run.name)
            self.recovering[run.name] = state.now
            self._wake.append(state.now + self.timeout)

    def _key(self, run: JobRun) -> tuple:
        """Kueue's queue order: priority, queue-order timestamp, then (UID) the tie order."""
        return (-run.job.priority, self._order_time.get(run.name, run.job.submit),
                self._rank.get(run.name, len(self._rank)), run.seq)

    # ---- quota -------------------------------------------------------------------------------
    def spec(self, queue: str):
        """The ClusterQueue ``queue`` as declared (``Workload.queue``), looked up once: a cycle asks
        for it at every quota check, and an undeclared queue's default is built only once."""
        spec = self._specs.get(queue)
        if spec is None:
            spec = self._specs[queue] = self.workload.queue(queue)
        return spec

    def nominal(self, state: SchedState, queue: str) -> int:
        q = self.spec(queue).nominal_quota
        return state.cluster.total_gpus if q is None else q

    def usage(self, queue: str) -> int:
        """GPUs of the workloads admitted in ``queue`` (quota reserved)."""
        if not self.reference:
            return self._usage.get(queue, 0)
        return sum(r.job.gpus for r in self.workloads if r.name in self.admitted and r.job.queue == queue)

    def _set_admitted(self, run: JobRun, at: float | None) -> None:
        """Admit ``run`` at time ``at`` (reserve its quota) or, with None, release its quota."""
        self.was_ready.discard(run.name)
        if at is None:
            self._unready.discard(run.name)
            if self.admitted.pop(run.name, None) is None:
                return
            sign = -1
        else:
            self.admitted[run.name] = at
            self._unready.add(run.name)
            if self.wait_for_pods_ready:  # only then does anything read the deadlines
                heapq.heappush(self._deadlines, (at + self.timeout, run.seq, run.name, at))
            sign = 1
        self._usage[run.job.queue] = self._usage.get(run.job.queue, 0) + sign * run.job.gpus
        self._usage_moves += 1

    def _local(self, state: SchedState, queue: str) -> int:
        """``localQuota``: the part of a queue's nominal quota its ``lendingLimit`` keeps from the
        cohort (``pkg/cache/scheduler/resource_node.go``)."""
        lending = self.spec(queue).lending_limit
        return 0 if lending is None else max(0, self.nominal(state, queue) - lending)

    def _cohort(self, state: SchedState, cohort: str) -> tuple[int, int]:
        """(``SubtreeQuota``, ``Usage``) of a cohort: what its queues lend, and what they use
        beyond what they keep for themselves."""
        quota = used = 0
        for q in self._queue_names:
            if self.spec(q).cohort == cohort:
                local = self._local(state, q)
                quota += self.nominal(state, q) - local
                used += max(0, self.usage(q) - local)
        return quota, used

    def available(self, state: SchedState, queue: str) -> tuple[int, int]:
        """(``Available``, ``PotentialAvailable``) GPUs for ``queue``, as Kueue v0.17.0 computes them
        for a ClusterQueue in a flat cohort (``pkg/cache/scheduler/resource_node.go`` ``available``,
        ``potentialAvailable``): its own unused kept quota, plus what the cohort has left, capped by
        its ``borrowingLimit``; the potential is the same with nothing in use."""
        if not self.reference:   # a function of the quota in use: kept until an admission or a release
            hit = self._avail.get(queue)
            if hit is not None and hit[0] == self._usage_moves:
                return hit[1]
            out = self._available(state, queue)
            self._avail[queue] = (self._usage_moves, out)
            return out
        return self._available(state, queue)

    def _available(self, state: SchedState, queue: str) -> tuple[int, int]:
        spec, nominal, usage = self.spec(queue), self.nominal(state, queue), self.usage(queue)
        if spec.cohort is None:
            return nominal - usage, nominal
        quota, used = self._cohort(state, spec.cohort)
        local = self._local(state, queue)
        parent, potential = quota - used, local + quota
        if spec.borrowing_limit is not None:
            parent = min(parent, nominal - local - max(0, usage - local) + spec.borrowing_limit)
            potential = min(potential, nominal + spec.borrowing_limit)
        return max(0, local - usage) + parent, potential

    def fits_quota(self, state: SchedState, run: JobRun) -> tuple[bool, str | None]:
        """Whether ``run``'s whole podset fits its ClusterQueue now, and if not, Kueue's reason
        (``flavorassigner.go`` ``fitsResourceQuota``): a request above the maximum capacity can
        never fit; otherwise so many GPUs more are needed."""
        need = run.job.gpus
        avail, potential = self.available(state, run.job.queue)
        if need > potential:
            return False, (f"{ASSIGN} insufficient quota for nvidia.com/gpu in flavor {FLAVOR}, previously "
                           f"considered podsets requests (0) + current podset request ({need}) > maximum "
                           f"capacity ({potential})")
        if need <= avail:
            return True, None
        return False, (f"{ASSIGN} insufficient unused quota for nvidia.com/gpu in flavor {FLAVOR}, "
                       f"{need - avail} more needed")

    @staticmethod
    def _refuse(state: SchedState, run: JobRun, why: str) -> None:
        """A workload that does not fit gets its reason; "k more needed" keeps its first count."""
        state.set_reason(run, f"Pending: {why}", kind=QUOTA if "insufficient unused quota" in why else None)

    # ---- cycle -------------------------------------------------------------------------------
    def schedule(self, state: SchedState) -> list[float]:
        self.pods.reference = self.reference
        wake, self._wake = self._wake, []
        now = state.now
        for name, since in list(self.recovering.items()):
            run = state.runs[name]
            if run.finished or run.state == RUNNING or name not in self.admitted:
                del self.recovering[name]
            elif now >= since + self.timeout:
                del self.recovering[name]
                wake += self._evict(state, run, "PodsReadyTimeout (WaitForRecovery)")
        if self.reference:
            self.was_ready.update(n for n in self.admitted if state.runs[n].state == RUNNING)
        else:   # the same set: only a workload admitted and not yet seen ready can join it
            seen = [n for n in self._unready if state.runs[n].state == RUNNING]
            self.was_ready.update(seen)
            self._unready.difference_update(seen)
        if self.wait_for_pods_ready:
            for run in (list(self.workloads) if self.reference else self._timed_out(state)):
                t0 = self.admitted.get(run.name)
                if t0 is not None and run.state != RUNNING and not run.finished and now >= t0 + self.timeout \
                        and run.name not in self.was_ready:   # WaitForStart; after: WaitForRecovery
                    wake += self._evict(state, run)
        # One walk: a workload refused in it is not tried again because another was admitted after
        # it. Kueue v0.17.1 puts a refused workload among the ClusterQueue's inadmissible ones
        # (pkg/cache/queue/cluster_queue.go L403-428, unless a requeue came after its pop) and only
        # a requeue moves it back: a workload that finishes, is evicted or deleted
        # (pkg/controller/core/workload_controller.go L1084, L1140-1199), or a change of a queue,
        # flavor, topology or node (NotifyRetryInadmissible), each 1 s later (the requeuer's batch
        # period, pkg/cache/queue/inadmissible_workloads.go L262-263, constants.go L33). An
        # admission is none of these (workload_controller.go L1156-1163). A recorded run once
        # showed a second try after an admission; the Kueue log showed its cause: the requeue
        # that creating the replay's ClusterQueue had set off one second before (the replay now
        # waits for it before the first job, live/kube/kueue/replay.py QUIET).
        self._admit(state, wake)
        self.pods.schedule(state)
        return wake

    def _timed_out(self, state: SchedState) -> list[JobRun]:
        """Admitted workloads past their PodsReady deadline and not training, in submission order.
        A workload training at its deadline is never evicted (nothing in this model stops it)."""
        out, now = [], state.now
        while self._deadlines and now >= self._deadlines[0][0]:
            _, _, name, t0 = heapq.heappop(self._deadlines)
            run = state.runs[name]
            if self.admitted.get(name) == t0 and not run.finished and run.state != RUNNING:
                out.append(run)
        return sorted(out, key=lambda r: r.seq)

    def _admit(self, state: SchedState, wake: list[float]) -> None:
        if not self.reference:
            self._admit_fast(state, wake)
            return
        order = sorted((r for r in self.workloads if r.name not in self.admitted and not r.finished),
                       key=self._key)
        for run in order:
            if run.name in self.deactivated:
                continue
            if run.eligible_at > state.now:
                state.set_reason(run, f"Requeued: backoff until t={run.eligible_at:g}s")
                continue
            if self.block_admission and any(r.state != RUNNING for r in self.workloads
                                            if r.name in self.admitted and not r.finished):
                state.set_reason(run, BLOCKED)
                continue
            ok, why = self.fits_quota(state, run)
            if not ok and self.spec(run.job.queue).within_cluster_queue == "LowerPriority":
                ok = self._preempt_within(state, run)
            if not ok:
                self._refuse(state, run, why)
                continue
            if not self._tas(state, run):
                continue
            self._admit_one(state, run, wake)

    def _tas(self, state: SchedState, run: JobRun) -> bool:
        """Topology-Aware Scheduling at admission (on a cluster with a topology, i.e. a TAS
        ResourceFlavor; a job without a request is TAS *implied*, unconstrained, since every flavor
        of the ClusterQueue is topology-aware): Kueue finds the domains before it admits
        (``tas_flavorassigner.go``); none found, the workload stays pending with TAS's message
        and is tried again next cycle. Found, the plan waits in ``_plans`` for :meth:`_admit_one`."""
        job = run.job
        if not self.workload.cluster.topology:
            return True
        # no request: implied TAS, unconstrained (every flavor of the ClusterQueue is topology-aware)
        mode, level = job.topology or ("unconstrained", None)
        if not self.reference:
            if self._tas_refused.get(run.name) == state.cluster.changes:
                return False   # refused on this very free capacity: the same answer (the reference asks again)
            if run.reason_kind == TAS and state.cluster.plain(job) and not self._tas_can_fit(state, job, mode, level):
                return False   # refused again, and its reason keeps its first text (kind TAS)
        rooms = self._rooms(state, job)
        tas = topology.kueue_tas if self.reference or not state.cluster.plain(job) else topology.kueue_tas_fast
        plan, fit = tas(self.workload.cluster, rooms, job.pods, mode, level)
        if plan is None:
            why = topology.tas_not_fit(fit, job.pods, nodes=len(rooms), excluded=topology.tas_exclusions(
                rooms, state.cluster.allowed(job.constraint)))
            state.set_reason(run, f"Pending: {why}", kind=TAS)
            self._tas_refused[run.name] = state.cluster.changes
            return False
        self._tas_refused.pop(run.name, None)
        self._plans[run.name] = plan
        return True

    def _rooms(self, state: SchedState, job) -> "np.ndarray | list[int]":
        """``Cluster.rooms``; on the fast path, for a plain job, from one array of the free GPUs
        per change of the cluster (``Cluster.changes``) instead of a list built per call."""
        cluster = state.cluster
        if self.reference or not cluster.plain(job):
            return cluster.rooms(job)
        return cluster.free_array() // job.gpus_per_pod

    def _tas_can_fit(self, state: SchedState, job, mode: str, level: str | None) -> bool:
        """Fast path, a plain job: whether :func:`~courselib.model.topology.kueue_tas` would find
        its domains now, without asking it. ``required``: some domain of ``level`` holds every pod
        (``findLevelWithFitDomains`` fits at the level or fails); ``preferred`` and
        ``unconstrained``: the free pods in all hold them (the greedy fill at the top, the nodes
        least free first). The largest domain's free pods per (GPUs a pod, level) are kept per
        change of the cluster."""
        cluster, g = state.cluster, job.gpus_per_pod
        if mode != "required":
            return cluster.fit_count(g) >= job.pods
        key = (g, level)
        hit = self._largest.get(key)
        if hit is None or hit[0] != cluster.changes:
            size = self.workload.cluster.level_size(level)
            hit = self._largest[key] = (cluster.changes,
                                        int((cluster.free_array() // g).reshape(-1, size).sum(axis=1).max()))
        return hit[1] >= job.pods

    def _preempt_within(self, state: SchedState, run: JobRun) -> bool:
        """Kueue's classical preemption within a ClusterQueue (``preemption.withinClusterQueue:
        LowerPriority``; Kueue v0.17.1 ``pkg/scheduler/preemption/preemption.go``
        ``classicalPreemptions`` L271–326): candidates are the admitted workloads of the same
        ClusterQueue with a lower priority, in ``CandidatesOrdering`` (``common/ordering.go``
        L41–81: lower priority first, then the most recently admitted); they are removed one by one
        until the workload fits, then every one but the last is added back if it still fits
        (``fillBackWorkloads`` L328–341). Each target is evicted **as a whole** — all its pods
        deleted (a JobSet is suspended, which deletes its child Jobs) — and requeued with its
        creation timestamp (``pkg/workload/workload.go`` L1257–1275)."""
        queue = run.job.queue
        cands = sorted((r for r in self.workloads
                        if r.name in self.admitted and not r.finished and r.job.queue == queue
                        and r.job.priority < run.job.priority),
                       key=lambda r: (r.job.priority, -self.admitted[r.name], r.seq))
        free = self.available(state, queue)[0]
        targets = []
        for cand in cands:
            targets.append(cand)
            free += cand.job.gpus
            if run.job.gpus <= free:
                break
        else:
            return False
        for cand in reversed(targets[:-1]):   # fill back
            if run.job.gpus <= free - cand.job.gpus:
                free -= cand.job.gpus
                targets.remove(cand)
        for cand in targets:
            state.log(cand.name, f"Preempted: evicted by Kueue to admit {run.name} "
                                 f"(withinClusterQueue LowerPriority, priority {cand.job.priority} < "
                                 f"{run.job.priority})")
            self._evict(state, cand, "Preempted")
            state.preemptions += [(state.now, cand.name, run.name)] * cand.job.pods
        return self.fits_quota(state, run)[0]

    def _admit_one(self, state: SchedState, run: JobRun, wake: list[float]) -> None:
        self._set_admitted(run, state.now)
        state.set_reason(run, None)
        ready = self.describe_wait_for_pods_ready()
        state.log(run.name, f"admitted: quota reserved for {run.job.gpus} GPUs "
                            f"(placement not checked; {ready})")
        plan = self._plans.pop(run.name, None)
        if plan is not None:   # TAS: the pods are ungated onto the assigned nodes and bound there
            state.log(run.name, f"topology assignment: {plan_text(state, plan)}")
            state.bind_plan(run, plan)
        else:
            self.pods.create_pods([run], {run.name: run.job.pods})
        if self.wait_for_pods_ready:
            wake.append(state.now + self.timeout)

    def describe_wait_for_pods_ready(self) -> str:
        """The admission line's words: on or off, and by whose choice (the release's or the
        configuration's)."""
        if self.wait_for_pods_ready:
            why = f"Kueue v0.{self.minor}'s default" if self.by_default else "configured"
            return (f"waitForPodsReady on ({why}): evicted unless all pods are ready within "
                    f"{self.timeout / 60:g} min")
        if self.disable_gate:
            return f"waitForPodsReady off (DisableWaitForPodsReady gate, Kueue v0.{self.minor}): no timeout"
        if self.minor < DEFAULT_ON_SINCE:
            return f"waitForPodsReady off (Kueue v0.{self.minor}'s default): no timeout"
        return "waitForPodsReady off (configured): no timeout"

    def _admit_fast(self, state: SchedState, wake: list[float]) -> None:
        """:meth:`_admit` without walking the workloads that cannot change: one refused for quota
        waits in ``_held`` and is looked at again only when its ClusterQueue has room for it (the
        first such in queue order, :class:`~courselib.model.waitlist.NeedIndex`; quota used only
        grows during a cycle, so one that did not fit when the walk passed it cannot fit later);
        it keeps its reason meanwhile (``QUOTA``). New workloads, those out of backoff and those
        a blocked admission passed over are looked at in queue order; a request above the
        maximum capacity is never returned by the index (only a blocked admission touches it)."""
        now = state.now
        while self._backoff and self._backoff[0][0] <= now:
            _, _, name = heapq.heappop(self._backoff)
            run = state.runs[name]
            if run.eligible_at <= now and name not in self.admitted and name not in self.deactivated:
                self._fresh[name] = run
        fresh = sorted((r for r in self._fresh.values() if not r.finished), key=self._key)
        self._fresh = {}
        blocked = self.block_admission and any(state.runs[name].state != RUNNING for name in self.admitted
                                               if not state.runs[name].finished)
        if blocked:
            self._block(state, fresh, None)
            return
        i = 0
        while True:
            run = fresh[i] if i < len(fresh) else None
            key = self._key(run) if run is not None else None
            held = None
            for q, idx in self._held.items():
                if not len(idx):
                    continue
                hit = idx.first_at_most(self.available(state, q)[0])
                if hit is not None and (key is None or hit[0] < key):
                    key, run, held = hit[0], hit[1], idx
            if run is None:
                return
            if held is not None:  # it fits now: admitted
                held.remove(run.job.gpus, key, run)
            else:
                i += 1
                ok, why = self.fits_quota(state, run)
                if not ok:  # it waits (one above the maximum capacity is never returned by the
                    self._refuse(state, run, why)  # index, but a blocked admission passes it over)
                    self._held_index(state, run.job.queue).add(run.job.gpus, key, run)
                    continue
            if not self._tas(state, run):   # quota, but no domains: tried again next cycle
                self._fresh[run.name] = run
                continue
            self._admit_one(state, run, wake)
            if self.block_admission:  # the workload just admitted is not ready yet
                self._block(state, fresh[i:], key)
                return

    def _block(self, state: SchedState, fresh: list[JobRun], after: tuple | None) -> None:
        """blockAdmission: every eligible waiting workload after ``after`` in queue order (all with
        None) is passed over with its reason; the next cycle looks at each of them again."""
        rest = [(self._key(r), r) for r in fresh]
        for idx in self._held.values():
            rest += idx.pop_after(after) if after is not None else idx.pop_after((-math.inf,))
        rest.sort(key=lambda e: e[0])
        for _, run in rest:
            state.set_reason(run, BLOCKED)
            self._fresh[run.name] = run

    def _held_index(self, state: SchedState, queue: str) -> NeedIndex:
        if queue not in self._held:
            self._held[queue] = NeedIndex(j.gpus for j in self.workload.jobs if j.queue == queue)
        return self._held[queue]

    def _evict(self, state: SchedState, run: JobRun, why: str = "PodsReadyTimeout") -> list[float]:
        self._set_admitted(run, None)
        self.recovering.pop(run.name, None)
        if run.state == RUNNING:   # evicted while training: every pod goes, the job stops
            state.stop_training(run, f"evicted by Kueue ({why})", restart=False)
            run.pods_lost += state.bound(run)
            run.recoveries.append([state.now, None])
        self.pods.drop_pods(run)
        state.release(run, f"evicted: {why}")
        if why == "Preempted":   # requeued at once, keeping its creation timestamp
            run.evictions += 1
            state.set_reason(run, "Pending: preempted; waiting for quota")
            return []
        if self.requeue_by_eviction:  # back in the queue as if created now (GetQueueOrderTimestamp)
            self._order_time[run.name] = state.now
        n = self.requeues[run.name] = self.requeues.get(run.name, 0) + 1
        if self.backoff_limit is not None and n > self.backoff_limit:
            self.deactivated.add(run.name)
            state.set_reason(run, "Deactivated: requeuing limit exceeded")
            return []
        run.eligible_at = state.now + requeue_delay(n, self.backoff_base, self.backoff_max)
        run.evictions += 1
        state.set_reason(run, f"Requeued: backoff until t={run.eligible_at:g}s")
        if not self.reference:
            heapq.heappush(self._backoff, (run.eligible_at, run.seq, run.name))
        return [run.eligible_at]

    def cycle_when_ready(self) -> bool:
        """With blockAdmission, the PodsReady condition of the admitted workload unblocks the next
        admission at once (the controller reconciles on the condition change), not at the next
        timer (``setup_wait_for_pods_ready.md``)."""
        return self.wait_for_pods_ready and self.block_admission

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        self._set_admitted(run, None)
