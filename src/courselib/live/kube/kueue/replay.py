"""``courselib kube replay WORKLOAD --policy kueue``: the workload through the real Kueue.

The replay (:func:`courselib.live.kube.replay.run_replay`) submits each job as a real ``batch/v1``
Job carrying only the label ``kueue.x-k8s.io/queue-name``; Kueue's webhook suspends it, Kueue's
scheduler admits its Workload on quota (a ClusterQueue per workload queue, nominal quota = the
queue's GPUs or the cluster's, CPU and memory = the whole cluster's so only GPUs ever bind; one
ResourceFlavor; a LocalQueue of the same name), unsuspends it, and the real kube-scheduler places
its pods. This module is the Kueue part, at the driver's named hooks
(:mod:`courselib.live.kube.extension`): the queue objects, a watch on Workloads, what "settled"
means for Kueue, and its timers.

**Kueue's timers and the virtual clock.** The replay's clock is virtual: it jumps from event to
event once the control plane has settled. Kueue's ``waitForPodsReady`` timeout and requeue
backoff run on the manager's real clock. The manager therefore runs with short *stand-ins*
(:data:`REAL_TIMEOUT`, :data:`REAL_BACKOFF`; the backoff cap in the same ratio to the base as the
model's), and the replay advances its clock **through Kueue's own events**: when the next thing
that can happen in the model's time is one of Kueue's timers — an admitted Workload whose pods
are not all ready reaching ``admission + timeout``, an evicted one reaching ``eviction +
backoff(n)`` for Kueue's own requeue count ``n`` — the replay waits, in real time, for the real
manager to do it (the Workload loses its admission with reason ``PodsReadyTimeout``; its
``Requeued`` condition turns True with ``BackoffFinished``) and puts the virtual clock at that
instant *in the model's units* (the model's ``timeout``, ``backoff_base``, ``backoff_max``:
30 min, 60 s, 3600 s unless ``--set``). Events of the workload that come first in virtual time are
delivered before the real timer can fire; if the manager fires a timer the replay had not reached
(the real time between exceeded a stand-in), the replay stops with an error rather than record a
wrong order. The real intervals are recorded and checked against the manager's configuration
(:meth:`KueueReplay.timer_checks`): eviction ``timeout`` after admission, requeue
``base·2^(n−1)`` (capped) after eviction — Kueue's formula, measured on Kueue.

**Topology-Aware Scheduling.** On a cluster with a topology (``cluster.topology``) the fake
nodes carry one label per level (:mod:`courselib.live.kube.topology`); the replay creates Kueue's
``Topology`` named ``default`` with those labels as its levels, the ResourceFlavor names it
(``topologyName``) and selects the nodes by ``nvidia.com/gpu.present``, and a job's
``topology: {required|preferred: LEVEL}`` becomes the pod template's annotation
``kueue.x-k8s.io/podset-required-topology`` / ``…-preferred-topology`` whose value is the level's
label. TAS is beta and on by default in v0.17.1 (``pkg/features/kube_features.go`` L417–420): no
gate to set. Kueue finds the domains at admission; the admitted Job's pods are created behind the
scheduling gate ``kueue.x-k8s.io/topology``, which its TopologyUngater lifts pod by pod while
adding the assigned node's labels (down to ``kubernetes.io/hostname``) to the pod's nodeSelector;
the real kube-scheduler then binds each pod to that node and the fake kubelet runs it. A job
without a request is TAS too (every flavor of the ClusterQueue is topology-aware: *implied*,
unconstrained). The replay records Kueue's ``topologyAssignment`` and, for a job that waits, its
Workload's ``QuotaReserved`` message; the comparison checks each job's nodes and that message
against the model (``extra["compare_placement"]``).

**Jobs submitted together.** Kueue ranks equal Workloads by creation second, then random UID, and
admits a Workload as soon as it exists; so jobs of one virtual instant are created a second apart,
in the workload's order (:meth:`KueueReplay._space`), which makes the real order the model's.
"""
from __future__ import annotations

import contextlib
import math
import re
import time
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime

from courselib.errors import CourseError, InputError
from courselib.live.kube.api import ApiError
from courselib.live.kube.cluster import GPU, NAMESPACE
from courselib.live.kube.extension import ReplayHooks, ReplayRun
from courselib.live.kube.kueue import manager as kueue
from courselib.live.kube.plan import REPLAY_LABEL, ReplayPlan, job_notes, shape_for
from courselib.live.kube import topology as topo
from courselib.live.kube.watch import PodWatch, job_of, metrics, pending_message, phase
from courselib.model.policies import make_policy
from courselib.model.policies.kueue import requeue_delay
from courselib.model.topology import TAS_TOPOLOGY
from courselib.model.workload import Job, Workload
from courselib.units import format_duration as _fmt

#: The manager's real-time stand-ins (seconds): the PodsReady timeout and the requeue backoff base.
#: The timeout grows with the largest job: the real Job controller creates pods at its client's
#: 20 requests/s (kube-controller-manager's default --kube-api-qps), so 512 pods take ~30 s to
#: exist before any can be ready, and a stand-in shorter than that would evict a job the model
#: (and a real cluster with a 30-minute timeout) lets train.
REAL_TIMEOUT = kueue.PodsReady.timeout
REAL_TIMEOUT_PER_POD = 0.25
REAL_BACKOFF = kueue.PodsReady.backoff_base
#: Seconds between creating the replay's queue objects and its first job. Creating (and deleting)
#: a ClusterQueue, ResourceFlavor or Topology makes Kueue requeue the ClusterQueue's inadmissible
#: workloads one batch period later (v0.17.1 NotifyRetryInadmissible, the requeuer's
#: ``AddAfter(.., batchPeriod)`` pkg/cache/queue/inadmissible_workloads.go L262-263, 1 s:
#: pkg/constants/constants.go L33; a TAS flavor's reconcile on a node event adds one more). A job
#: refused in that window was tried again when it fired, by chance before or after the next job's
#: admission (a recorded run showed the quota message, a CI run the topology message for one job).
#: On a real cluster the queues are old: nothing of the set-up is left to requeue a job. (The end of
#: an earlier replay's Workloads does the same: :meth:`KueueReplay._wait_workloads_gone` first.)
QUIET = 2.5
#: A deleting queue object or Workload still there after this many seconds is touched with this
#: annotation, which makes Kueue's controller look at it again (:meth:`KueueReplay._until_gone`).
NUDGE_EVERY = 5.0
NUDGE_ANNOTATION = "courselib/nudged"
#: The model options a Kueue replay takes (the Kueue policy's, minus the pod order).
OPTIONS = ("wait_for_pods_ready", "config_api", "timeout", "block_admission", "backoff_base",
           "backoff_max", "backoff_limit")
KAPI = f"/apis/{kueue.KUEUE_API}"
#: A job's ``topology: {required|preferred: LEVEL}`` as the pod set annotation Kueue reads.
TOPOLOGY_ANNOTATION = {"required": "kueue.x-k8s.io/podset-required-topology",
                       "preferred": "kueue.x-k8s.io/podset-preferred-topology"}
#: The scheduling gate Kueue puts on a TAS workload's pods until its TopologyUngater has given
#: each its node (v0.17.1 topology_types.go L71-75, pkg/podset/podset.go L65-75,
#: pkg/controller/tas/topology_ungater.go L259-272: the gate goes, the node's labels join the
#: pod's nodeSelector).
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"


@contextmanager
def stand_ins(timeout: int, backoff: int):
    """Replays inside the ``with`` run the manager with these real-time stand-ins (whole seconds)
    instead of :data:`REAL_TIMEOUT` and :data:`REAL_BACKOFF`. Nothing the replay compares changes: the
    virtual clock still puts each timer at the model's time, and each real interval is still checked
    against what the manager was given. A stand-in only has to outlast one settle of the replay; a
    shorter one saves real waiting (the live tests' agreement replays of a few pods use 10 s and 5 s),
    a too short one stops the replay with an error, never a wrong order. ``courselib kube replay``
    and the recorded runs keep the defaults."""
    global REAL_TIMEOUT, REAL_BACKOFF
    kueue.PodsReady(timeout=timeout, backoff_base=backoff)  # whole seconds >= 1, or a located error
    old = REAL_TIMEOUT, REAL_BACKOFF
    REAL_TIMEOUT, REAL_BACKOFF = timeout, backoff
    try:
        yield
    finally:
        REAL_TIMEOUT, REAL_BACKOFF = old


def model_policy(workload: Workload, options: dict):
    return make_policy("kueue", workload, **options)


def real_timeout(workload: Workload) -> int:
    """The stand-in PodsReady timeout for ``workload`` (see :data:`REAL_TIMEOUT_PER_POD`)."""
    pods = max((j.pods for j in workload.jobs), default=0)
    return REAL_TIMEOUT + (0 if pods <= 16 else math.ceil(REAL_TIMEOUT_PER_POD * pods))


def real_settings(model) -> kueue.PodsReady:
    """The manager's waitForPodsReady for a replay compared with ``model`` (a Kueue policy)."""
    cap = max(REAL_BACKOFF, round(REAL_BACKOFF * model.backoff_max / model.backoff_base))
    return kueue.PodsReady(enabled=model.wait_for_pods_ready, timeout=real_timeout(model.workload),
                           backoff_base=REAL_BACKOFF, backoff_max=cap,
                           backoff_limit=model.backoff_limit, block_admission=model.block_admission)


def plan_kueue_replay(workload: Workload, *, file: str | None, options: dict) -> ReplayPlan:
    bad = [k for k in options if k not in OPTIONS]
    if bad:
        raise InputError(f"--set {bad[0]}: a Kueue replay takes {', '.join(OPTIONS)}", file=file,
                         field="--set")
    try:
        model = model_policy(workload, options)
    except (TypeError, ValueError) as err:
        raise InputError(str(err), file=file, field="--set") from None
    notes = job_notes(workload, file)
    for j in workload.jobs:
        if j.min_member and j.min_member < j.pods:
            notes.append(f"{j.name}: Kueue's PodsReady for a batch Job is all its pods ready "
                         "(min_member is not a Kueue notion)")
    if model.wait_for_pods_ready:
        real = real_settings(model)
        notes.append(f"Kueue's timers: the manager runs with timeout {real.timeout} s and backoff "
                     f"{real.backoff_base} s (max {real.backoff_max} s) in real time; the replay's "
                     f"clock puts them at the model's {_fmt(model.timeout)} and "
                     f"{_fmt(model.backoff_base)} (max {_fmt(model.backoff_max)})")
    # JobSet first: its CRD must exist when Kueue starts, or Kueue leaves its integration off
    with_ = (("jobset",) if any(getattr(j, "kind", "job") == "jobset" for j in workload.jobs) else ()) + ("kueue",)
    return ReplayPlan(workload, shape_for(workload.cluster, with_=with_), "kueue", False,
                      tuple(notes), tuple(sorted(options.items())))


def _times(quantity: str, n: int) -> str:
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", quantity)
    if not m:
        raise ValueError(f"quantity {quantity!r}")
    return f"{int(m.group(1)) * n}{m.group(2)}"


def queue_objects(workload: Workload, shape, replay_id: str) -> list[tuple[str, dict]]:
    """(API path, body) of the ResourceFlavor, one ClusterQueue per queue and its LocalQueue."""
    labels = {REPLAY_LABEL: replay_id}
    flavor = {"apiVersion": kueue.KUEUE_API, "kind": "ResourceFlavor",
              "metadata": {"name": kueue.FLAVOR, "labels": labels}}
    out = []
    if workload.cluster.topology:
        # Topology-Aware Scheduling (beta, on by default since v0.14: v0.17.1 pkg/features/
        # kube_features.go L417-420): a Topology whose levels are the nodes' labels, and a flavor
        # naming it, which must select its nodes by a label (resourceflavor_types.go L48, L106-111)
        out.append((f"{KAPI}/topologies", topo.kueue_topology(TAS_TOPOLOGY, workload.cluster.topology, labels)))
        flavor["spec"] = {"nodeLabels": dict([topo.GPU_NODE_LABEL]), "topologyName": TAS_TOPOLOGY}
    out.append((f"{KAPI}/resourceflavors", flavor))
    total_gpus = shape.nodes * shape.gpus_per_node
    # a workload event's preempting job without a queue ("") is not Kueue's: no ClusterQueue for it
    names = sorted(({j.queue for j in workload.jobs} | {q.name for q in workload.queues}) - {""})
    for name in names:
        spec = workload.queue(name)
        gpu = {"name": GPU, "nominalQuota": str(total_gpus if spec.nominal_quota is None
                                                else spec.nominal_quota)}
        if spec.borrowing_limit is not None:
            gpu["borrowingLimit"] = str(spec.borrowing_limit)
        if spec.lending_limit is not None:
            gpu["lendingLimit"] = str(spec.lending_limit)
        cq = {"namespaceSelector": {},
              "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
                  "name": kueue.FLAVOR, "resources": [
                      {"name": "cpu", "nominalQuota": str(shape.nodes * shape.cpus_per_node)},
                      {"name": "memory", "nominalQuota": _times(shape.memory_per_node, shape.nodes)},
                      gpu]}]}]}
        if spec.cohort is not None:
            cq["cohortName"] = spec.cohort
        if spec.within_cluster_queue != "Never":   # Kueue's own preemption of whole workloads
            cq["preemption"] = {"withinClusterQueue": spec.within_cluster_queue}
        out.append((f"{KAPI}/clusterqueues", {"apiVersion": kueue.KUEUE_API, "kind": "ClusterQueue",
                                              "metadata": {"name": name, "labels": labels},
                                              "spec": cq}))
        out.append((f"{KAPI}/namespaces/{NAMESPACE}/localqueues",
                    {"apiVersion": kueue.KUEUE_API, "kind": "LocalQueue",
                     "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
                     "spec": {"clusterQueue": name}}))
    return out


# ----------------------------------------------------------------------------- watching Workloads

#: the Evicted condition's reason when Kueue preempts a workload (``WorkloadEvictedByPreemption``)
PREEMPTED = "Preempted"

class WorkloadWatch(PodWatch):
    """Kueue's Workloads of one replay (Kueue copies the replay label from the Job), by job name."""

    def __init__(self, api, replay_id: str):
        super().__init__(api, f"{REPLAY_LABEL}={replay_id}", path=f"{KAPI}/namespaces/{NAMESPACE}/workloads")
        self.name = "courselib-kueue-workload-watch"
        self.by_job: dict[str, dict] = {}

    def _apply(self, kind: str, obj: dict) -> None:
        self.events += 1
        owner = next((o["name"] for o in obj["metadata"].get("ownerReferences", [])
                      if o.get("kind") in ("Job", "JobSet")), None)
        if owner is None:
            return
        if kind == "DELETED":
            if self.by_job.get(owner, {}).get("metadata", {}).get("uid") == obj["metadata"].get("uid"):
                self.by_job.pop(owner, None)
        else:
            self.by_job[owner] = obj

    def snapshot(self):
        with self.lock:
            return self.events, dict(self.by_job)


def condition(wl: dict | None, kind: str) -> dict | None:
    for c in ((wl or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return None


def is_true(wl: dict | None, kind: str) -> bool:
    c = condition(wl, kind)
    return c is not None and c.get("status") == "True"


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# ----------------------------------------------------------------------------- the extension

class KueueReplay(ReplayHooks):
    """The Kueue part of one replay (see the module docstring), at the driver's named hooks."""

    def __init__(self, run: ReplayRun):
        super().__init__(run)
        cp, api, plan, replay_id, say = run.cp, run.api, run.plan, run.replay_id, run.say
        if "kueue" not in cp.shape.with_:
            raise CourseError("the local control plane runs without Kueue",
                              hint=f"`courselib kube up {cp.shape.cli_args()} --with kueue` adds it")
        self.cp, self.api, self.plan, self.replay_id, self.say = cp, api, plan, replay_id, say
        self.model = model_policy(plan.workload, dict(plan.options))
        self.settings = real_settings(self.model)
        from courselib.sim.gang import default_horizon
        self.horizon = default_horizon(plan.workload)
        self.watch = WorkloadWatch(api, replay_id)
        self.submitted: list[str] = []
        self.pods_of = {j.name: j.pods for j in plan.workload.jobs}
        self.jobs_by_name = {j.name: j for j in plan.workload.jobs}
        # virtual clock bookkeeping (the model's units)
        self.admitted_v: dict[str, float] = {}       # job -> virtual time of its current admission
        self.backoff: dict[str, tuple[float, int]] = {}  # job -> (virtual eviction time, count)
        self.ready: set[str] = set()
        self.finished: set[str] = set()
        self.deactivated: set[str] = set()
        self._seen: dict[str, dict] = {}             # job -> last lastTransitionTimes seen
        self._meta: dict[str, tuple[str, str]] = {}  # job -> its Workload's (creationTimestamp, uid)
        self._pods: dict[str, dict] = {}             # the pods at the last settle
        self._next: tuple[float, str, str] | None = None
        self._expect: tuple[str, str] | None = None
        self.events: list[dict] = []                  # [{t, job, what, ...}] in virtual time
        self.real: list[dict] = []                    # the real intervals of Kueue's timers
        self.topology = bool(plan.workload.cluster.topology)
        self.pending: dict[str, list] = {}            # job -> [t, message]: the first time it waited
        self.assignments: dict[str, dict] = {}        # job -> Kueue's topologyAssignment (TAS)
        self.nudges = 0                               # deleting objects touched (_until_gone)

    # ---- hooks ---------------------------------------------------------------------------
    def prepare(self) -> None:
        running = kueue.settings_of(self.cp)
        if running != self.settings:
            self.say("restarting the Kueue manager with waitForPodsReady "
                     + (f"timeout {self.settings.timeout} s, backoff {self.settings.backoff_base} s"
                        if self.settings.enabled else "off"))
            kueue.stop(self.cp)
            kueue.start(self.cp, self.settings, say=self.say)
        self._delete_queues()
        self._wait_workloads_gone()
        for path, body in queue_objects(self.plan.workload, self.cp.shape, self.replay_id):
            self.api.create(path, body)
        created = time.monotonic()
        self._wait_queues_active()
        time.sleep(max(0.0, created + QUIET - time.monotonic()))   # see QUIET
        self.watch.start()
        self.watch.wait_ready()

    def manifest(self, job: Job, body: dict) -> dict:
        """The Job as a Kueue user writes it: the queue-name label, nothing else (the webhook
        suspends it). Called just before the Job is created; see :meth:`_space`."""
        if job.queue == "":   # a workload event's preempting job: no queue, Kueue does not see it
            return body
        self._space(job)
        body["metadata"]["labels"][kueue.QUEUE_LABEL] = job.queue
        if job.topology and self.plan.workload.cluster.topology:
            # the pod set's request, on the pod template (v0.17.1 apis/kueue/v1beta2/
            # topology_types.go L23-39): the value is the level's node label
            mode, level = job.topology
            tmpl = body["spec"]["template"]["metadata"]
            tmpl.setdefault("annotations", {})[TOPOLOGY_ANNOTATION[mode]] = topo.level_label(level)
        self.submitted.append(job.name)
        return body

    def _space(self, job: Job) -> None:
        """Jobs submitted at one virtual instant are created in the workload's order, each once the
        Workload of the one before exists and the clock has passed into the next second.

        Kueue ranks equals by their Workload's ``creationTimestamp`` (whole seconds), then by UID,
        which is random (``baseCompareFunc``); and its scheduler admits the first Workload the
        moment it exists, before the next Job has one (a CI run saw ``finetune`` admitted alone
        although ``pretrain``'s UID ranked first). A second apart, the real order is the
        workload's, the model's own tie rule, and the same every run."""
        prev = next((self.jobs_by_name[n] for n in reversed(self.submitted)), None)
        if prev is None or prev.submit != job.submit:
            return
        deadline = time.monotonic() + 60.0
        while True:
            self.watch.check()
            _, wls = self.watch.snapshot()
            wl = wls.get(prev.name)
            created = _ts(wl["metadata"].get("creationTimestamp")) if wl is not None else None
            if created is not None and time.time() >= created + 1.02:
                return
            if time.monotonic() > deadline:
                raise CourseError(f"Kueue made no Workload for the Job {prev.name} within 60 s",
                                  hint=f"see {self.cp.state_dir}/log/{kueue.ROLE}.log")
            time.sleep(0.05)

    def settled(self, pods: dict[str, dict] | None = None):
        """(fingerprint, calm, idle) for the driver's settle: every submitted Job has its Workload, Kueue's
        scheduler has no workload left to try (``kueue_pending_workloads{status="active"}`` 0), no
        pod waits at Kueue's topology gate (TAS), and an admitted Workload whose pods all run has
        been marked PodsReady."""
        self.watch.check()
        kueue.check_alive(self.cp)
        events, wls = self.watch.snapshot()
        if pods is not None:
            self._pods = pods
        try:
            text = kueue.metrics(self.cp)
            active, attempts = metrics(text, ("kueue_pending_workloads", {"status": "active"}),
                                       ("kueue_admission_attempts_total", {}))
        except OSError:
            active = attempts = -1
        idle = frozenset(n for n in self.submitted if not is_true(wls.get(n), "QuotaReserved"))
        calm = active == 0 and all(n in wls for n in self.submitted)
        if calm and pods is not None:
            running: dict[str, int] = {}
            done: dict[str, int] = {}
            for pod in pods.values():
                if pod["metadata"].get("deletionTimestamp"):
                    continue
                tally = running if phase(pod) == "Running" else done if phase(pod) == "Succeeded" \
                    else None
                if tally is not None:
                    tally[job_of(pod)] = tally.get(job_of(pod), 0) + 1
            # TAS: a pod still carrying Kueue's topology gate waits for its TopologyUngater
            if any(TOPOLOGY_GATE in {g.get("name") for g in pod.get("spec", {}).get("schedulingGates") or []}
                   for pod in pods.values() if not pod["metadata"].get("deletionTimestamp")):
                calm = False
            # a job whose pods all succeeded: Kueue has seen it finish (and freed its quota)
            calm = calm and all(is_true(wls.get(n), "Finished") for n in self.submitted
                                if done.get(n, 0) >= self.pods_of[n])
            # an admitted job whose pods all run: Kueue has marked it PodsReady
            if calm and self.settings.enabled:
                calm = all(is_true(wls.get(n), "PodsReady") for n in self.submitted
                           if n not in idle and running.get(n, 0) >= self.pods_of[n])
        return (events, active, attempts), calm, idle

    def observe(self, t: float) -> None:
        """Kueue's transitions since the last settle happened at virtual time ``t``."""
        _, wls = self.watch.snapshot()
        for name in self.submitted:
            wl = wls.get(name)
            if wl is None:
                continue
            seen = self._seen.setdefault(name, {})
            self._meta.setdefault(name, (wl["metadata"].get("creationTimestamp", ""),
                                         wl["metadata"].get("uid", "")))
            reserved = condition(wl, "QuotaReserved")
            if reserved is not None and reserved.get("status") == "False" and reserved.get("message") \
                    and name not in self.pending and not is_true(wl, "Finished"):
                self.pending[name] = [t, reserved["message"]]   # Kueue's words, the first time it waits
            elif reserved is not None and reserved.get("status") == "True":
                for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
                    if psa.get("topologyAssignment"):
                        self.assignments[name] = psa["topologyAssignment"]
            if is_true(wl, "Finished") and name not in self.finished:
                self.finished.add(name)
                self.admitted_v.pop(name, None)
                self._event(t, name, "finished")
            req = condition(wl, "Requeued")
            if req is not None and req.get("status") == "True" and \
                    req.get("reason") == "BackoffFinished" and name in self.backoff and \
                    req.get("lastTransitionTime") != seen.get("requeued"):
                seen["requeued"] = req.get("lastTransitionTime")
                if self._expect != (name, "requeue"):
                    raise self._early(name, "requeue", t)
                _, n = self.backoff.pop(name)
                self._event(t, name, "requeued", count=n, real=req.get("lastTransitionTime"))
                self._check_interval(name, "backoff", seen.get("evicted"),
                                     req.get("lastTransitionTime"), self._real_backoff(n))
            admitted = is_true(wl, "QuotaReserved") and is_true(wl, "Admitted")
            if not admitted and name in self.admitted_v and name not in self.finished:
                self._lost_admission(t, name, wl)
            ev = condition(wl, "Evicted")
            if ev is not None and ev.get("status") == "True" and \
                    ev.get("lastTransitionTime") != seen.get("evicted"):
                raise self._early(name, "evict", t)  # admitted and evicted within one settle
            adm = condition(wl, "Admitted")
            if admitted and adm.get("lastTransitionTime") != seen.get("admitted"):
                if name in self.backoff:  # admitted again without its backoff ending
                    raise self._early(name, "requeue", t)
                seen["admitted"] = adm.get("lastTransitionTime")
                self.admitted_v[name] = t
                self.ready.discard(name)
                self._event(t, name, "admitted", real=adm.get("lastTransitionTime"))
            if is_true(wl, "PodsReady") and name in self.admitted_v and name not in self.ready:
                self.ready.add(name)
                self._event(t, name, "pods ready")
            elif name in self.admitted_v and name not in self.ready:
                self._waiting(t, name)
        self._expect = None

    def _waiting(self, t: float, name: str) -> None:
        """An admitted job not ready: how many of its pods the scheduler placed, and why not the
        rest (its FailedScheduling message) - quota is not placement."""
        mine = [p for p in self._pods.values() if job_of(p) == name
                and not p["metadata"].get("deletionTimestamp")]
        bound = sum(1 for p in mine if p.get("spec", {}).get("nodeName"))
        why = next((pending_message(p) for p in mine if not p.get("spec", {}).get("nodeName")), None)
        last = next((e for e in reversed(self.events) if e["job"] == name), None)
        if last and last["what"] == "waiting" and last["bound"] == bound:
            return
        self._event(t, name, "waiting", bound=bound, pods=self.pods_of[name], scheduler=why)

    def _lost_admission(self, t: float, name: str, wl: dict) -> None:
        ev = condition(wl, "Evicted")
        reason = (ev or {}).get("reason", "")
        seen = self._seen[name]
        if reason == PREEMPTED:
            # Kueue's own preemption, caused by what the replay submitted at ``t`` (no timer): the
            # workload goes back to its queue at once, with no requeue backoff, and is admitted
            # again when quota frees (v0.17.1 apis/kueue/v1beta2/workload_types.go L1010-1012)
            v_adm = self.admitted_v.pop(name)
            seen["evicted"] = (ev or {}).get("lastTransitionTime")
            self._event(t, name, "evicted", reason=reason, count=0, admitted_at=v_adm, real=seen["evicted"])
            return
        if self._expect != (name, "evict"):
            raise self._early(name, "evict", t)
        v_adm = self.admitted_v.pop(name)
        seen["evicted"] = (ev or {}).get("lastTransitionTime")
        self._check_interval(name, "timeout", seen.get("admitted"), seen["evicted"],
                             float(self.settings.timeout))
        if wl.get("spec", {}).get("active") is False or reason in ("Deactivated", "InactiveWorkload"):
            self.deactivated.add(name)
            self._event(t, name, "deactivated", reason=reason)
            return
        count = int(((wl.get("status") or {}).get("requeueState") or {}).get("count") or 0)
        self.backoff[name] = (t, count)
        self._event(t, name, "evicted", reason=reason, count=count,
                    admitted_at=v_adm, real=seen["evicted"])

    def next_event(self) -> float:
        """Virtual time of the next of Kueue's timers (``inf``: none)."""
        cands = []
        if self.settings.enabled:
            for name, v in self.admitted_v.items():
                if name not in self.ready and name not in self.finished:
                    cands.append((v + self.model.timeout, 0, name, "evict"))
            for name, (v, n) in self.backoff.items():
                cands.append((v + requeue_delay(max(1, n), self.model.backoff_base,
                                                self.model.backoff_max), 1, name, "requeue"))
        if not cands:
            self._next = None
            return math.inf
        t, _, name, kind = min(cands)
        self._next = (t, name, kind)
        return t

    def wait(self) -> float:
        """Wait (real time) for the real manager to fire the timer :meth:`next_event` named;
        return a new deadline for the replay's next settle."""
        t, name, kind = self._next
        self._expect = (name, kind)
        budget = 60.0 + (self.settings.timeout if kind == "evict" else
                         self._real_backoff(self.backoff[name][1]))
        self.say(f"t={_fmt(t)}: waiting for Kueue's "
                 + ("PodsReady timeout of " if kind == "evict" else "requeue backoff of ") + name)
        deadline = time.monotonic() + budget
        while True:
            self.watch.check()
            kueue.check_alive(self.cp)
            _, wls = self.watch.snapshot()
            wl = wls.get(name)
            if kind == "evict" and not is_true(wl, "QuotaReserved"):
                break
            req = condition(wl, "Requeued")
            if kind == "requeue" and req is not None and req.get("status") == "True" and \
                    req.get("lastTransitionTime") != self._seen.get(name, {}).get("requeued"):
                break
            if time.monotonic() > deadline:
                raise CourseError(f"Kueue did not {'evict' if kind == 'evict' else 'requeue'} "
                                  f"{name} within {budget:g} s of real time",
                                  hint=f"see {self.cp.state_dir}/log/{kueue.ROLE}.log")
            time.sleep(0.1)
        return time.monotonic() + 120.0 + 0.3 * sum(self.pods_of.values())

    def report(self) -> dict:
        return {"kueue": kueue.KUEUE_VERSION, "config_api": kueue.CONFIG_API,
                "manager": asdict(self.settings),
                "model": {"wait_for_pods_ready": self.model.wait_for_pods_ready,
                          "timeout": self.model.timeout, "backoff_base": self.model.backoff_base,
                          "backoff_max": self.model.backoff_max,
                          "backoff_limit": self.model.backoff_limit,
                          "block_admission": self.model.block_admission},
                "events": self.events, "timers": self.real,
                "model_options": {"queue_order": self.queue_order()},
                # as the model counts them: a deactivation (requeue limit) is not an eviction
                "evictions": {n: sum(1 for e in self.events if e["job"] == n and e["what"] == "evicted")
                              for n in self.pods_of},
                # a waiting job's message (the first time it waits): its Workload's QuotaReserved
                # condition, Kueue's own words (tests/test_kueue_live.py reads the cohort limits')
                "pending": dict(self.pending),
                # TAS: Kueue assigns the very nodes, so where the pods landed is compared with the
                # model, and each message with the model's reason at that moment
                **({"compare_placement": True,
                    "topology_assignments": dict(self.assignments)} if self.topology else {})}

    def queue_order(self) -> list[str]:
        """The jobs in the order Kueue's queue ranks their Workloads among equals: virtual
        submission time, then the Workload's real creationTimestamp and UID (``baseCompareFunc``).
        :meth:`_space` creates jobs of one instant a second apart, so this is the workload's order
        unless the real run says otherwise."""
        submit = {j.name: j.submit for j in self.plan.workload.jobs}
        meta = {n: self._meta.get(n, ("", "")) for n in self.submitted}
        return sorted(self.submitted, key=lambda n: (submit[n], *meta[n]))

    def cleanup(self) -> None:
        self.watch.stop()
        try:
            self._delete_queues()
        except (CourseError, OSError):
            pass

    # ---- helpers -------------------------------------------------------------------------
    def _event(self, t: float, job: str, what: str, **more) -> None:
        self.events.append({"t": t, "job": job, "what": what, **more})
        if what in ("evicted", "requeued", "deactivated"):
            self.say(f"t={_fmt(t)}: Kueue {what} {job}"
                     + (f" ({more['reason']}, requeue #{more['count']})" if what == "evicted" else ""))

    def _early(self, name: str, kind: str, t: float) -> CourseError:
        what = "evicted" if kind == "evict" else "requeued"
        return CourseError(
            f"Kueue {what} {name} before the replay reached that moment (virtual t={_fmt(t)}): the "
            "real time the replay needed in between exceeded the manager's stand-in "
            f"({self.settings.timeout} s timeout, {self.settings.backoff_base} s backoff)",
            hint="a slow or busy machine: try again, or raise REAL_TIMEOUT / REAL_BACKOFF in "
                 "courselib.live.kube.kueue.replay")

    def _real_backoff(self, n: int) -> float:
        return float(min(self.settings.backoff_base * 2 ** (max(1, n) - 1), self.settings.backoff_max))

    def _check_interval(self, job: str, what: str, start: str | None, end: str | None,
                        want: float) -> None:
        a, b = _ts(start), _ts(end)
        if a is None or b is None:
            return
        self.real.append({"job": job, "timer": what, "seconds": b - a, "configured": want,
                          # conditions carry whole seconds: ±1 s, and the manager's reaction time
                          "ok": want - 1.5 <= b - a <= want + 3.0})

    def timer_checks(self) -> list[dict]:
        return list(self.real)

    def _delete_queues(self) -> None:
        """Every LocalQueue, ClusterQueue, ResourceFlavor and Topology of earlier replays (Kueue keeps a
        queue while a Workload uses it: its finalizer goes once the Jobs are gone)."""
        paths = [f"{KAPI}/namespaces/{NAMESPACE}/localqueues", f"{KAPI}/clusterqueues",
                 f"{KAPI}/resourceflavors", f"{KAPI}/topologies"]
        for path in paths:
            self.api.delete(path, {"labelSelector": REPLAY_LABEL})
        self._until_gone(paths, {"labelSelector": REPLAY_LABEL}, "Kueue's queues of an earlier replay")

    def _wait_workloads_gone(self) -> None:
        """Until no Workload of an earlier replay is left: the garbage collector deletes a deleted
        Job's Workload later, and its end requeues the inadmissible workloads of a ClusterQueue of the
        same name (workload_controller.go L1084, L1140) - of this replay's, if it came after (seen:
        2.5 s after the queues were made)."""
        self._until_gone([f"{KAPI}/namespaces/{NAMESPACE}/workloads"], {},
                         "the Kueue Workloads of an earlier replay")

    def _until_gone(self, paths: list[str], query: dict, what: str, timeout: float = 60.0,
                    every: float = NUDGE_EVERY) -> None:
        """Until no object is left under ``paths``. Every ``every`` s an object still being deleted is
        touched (an annotation): Kueue's controllers look again at a deleting object only on an event,
        and one that looked while it was still in use waits for the next. A Topology keeps its finalizer
        while a flavor of the TAS cache names it (v0.17.1 pkg/controller/tas/topology_controller.go
        L109-119); the flavor's end asks again once, a second later (L176-186), and can find it still
        there if the flavor controller has not yet dropped it from the cache (resourceflavor_controller.go
        L155-165, another handler of the same event). An update of a deleting Topology, ResourceFlavor
        or ClusterQueue is reconciled (topology_controller.go L150-151, resourceflavor_controller.go
        L173-174, clusterqueue_controller.go L380-381)."""
        deadline = time.monotonic() + timeout
        nudge = time.monotonic() + every

        def gone() -> bool:
            nonlocal nudge
            left = [(path, item) for path in paths
                    for item in self.api.raw("GET", path, query=query).get("items") or []]
            if not left:
                return True
            now = time.monotonic()
            if now > deadline:
                raise CourseError(f"{what} still there after {timeout:g} s: "
                                  + "; ".join(_leftover(path, item) for path, item in left),
                                  hint=f"see {self.cp.state_dir}/log/{kueue.ROLE}.log; "
                                       "run `courselib kube down` and `up` again")
            if now > nudge:
                nudge = now + every
                for path, item in left:
                    if item["metadata"].get("deletionTimestamp"):
                        self.nudges += 1
                        self.say(f"{_leftover(path, item)}: touched, for Kueue to look at it again")
                        with contextlib.suppress(ApiError):
                            self.api.raw("PATCH", f"{path}/{item['metadata']['name']}",
                                         {"metadata": {"annotations": {NUDGE_ANNOTATION: str(self.nudges)}}},
                                         content_type="application/merge-patch+json")
            return False
        # a daemon that dies meanwhile is named at once (wait_for); the deadline's error names what is left
        self.cp.wait_for(gone, timeout + 30, what)

    def _wait_queues_active(self) -> None:
        deadline = time.monotonic() + 60
        names = sorted(({j.queue for j in self.plan.workload.jobs} |
                        {q.name for q in self.plan.workload.queues}) - {""})
        for name in names:
            while True:
                try:
                    cq = self.api.raw("GET", f"{KAPI}/clusterqueues/{name}")
                except ApiError:
                    cq = None
                if is_true(cq, "Active"):
                    break
                if time.monotonic() > deadline:
                    raise CourseError(f"Kueue did not make ClusterQueue {name} active within 60 s",
                                      hint=f"see {self.cp.state_dir}/log/{kueue.ROLE}.log")
                time.sleep(0.2)


def _leftover(path: str, item: dict) -> str:
    """One object left behind, as an error names it: kind, name, and what holds it."""
    meta = item.get("metadata") or {}
    kind = item.get("kind") or path.rsplit("/", 1)[-1]
    if meta.get("deletionTimestamp"):
        finalizers = ", ".join(meta.get("finalizers") or []) or "none"
        held = f"deleting since {meta['deletionTimestamp']}, finalizers {finalizers}"
    else:
        owner = (meta.get("ownerReferences") or [{}])[0]
        held = "not deleted" + (f", owned by {owner.get('kind')} {owner.get('name')}" if owner else "")
    return f"{kind} {meta.get('name', '?')} ({held})"
