"""Replay a workload on the real local Kubernetes control plane, and compare it with courselib's model.

A replay submits every job of a :class:`~courselib.model.workload.Workload` as a real ``batch/v1``
Job (``parallelism = completions = pods``, Indexed, ``restartPolicy: Never``, each pod asking for
``gpus_per_pod`` × ``nvidia.com/gpu``); the real Job controller creates the pods and the real
kube-scheduler binds them to the fake nodes. courselib plays the kubelet's part for status only
(:class:`FakeKubelet`): a bound pod is marked Running and Ready; once *all* of a job's pods run, the
NCCL init barrier has passed and the job trains; after its duration its pods are marked Succeeded,
the Job controller completes the Job and the scheduler sees the GPUs come back.

**Virtual time.** The workload's clock does not run in real time. The replay advances it from event
to event (a submission, a training's end) and only when the control plane has *settled*: every Job
has all its pods, the scheduler's active and backoff queues are empty (its own metric
``scheduler_pending_pods``), every bound pod runs, and nothing changed for a quiet second. So a
two-hour job costs seconds, and no real latency can reorder two events of the workload. At one
instant, trainings end first and the control plane settles, then the jobs of that instant are
submitted: what was waiting is retried before new pods arrive, as in the model's queue.

**What is recorded.** Every pod's creation and binding, in the order the API server's watch
delivered them (etcd's revision order): the Job controller's real creation order is what decides
how two Jobs' pods interleave in the scheduler's queue. :func:`compare` gives the model that order
(``pod_order``) and also shows what the model predicts with its own round-robin assumption.
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import math
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.live.kube import (FEATURE_PREFIX, GPU, KUBERNETES_VERSION, NAMESPACE, ControlPlane,
                                 KubeShape, is_ours, scheduler_metrics)
from courselib.live.kube_api import Api, ApiError
from courselib.model.workload import ClusterSpec, Job, Workload

REPLAY_LABEL = "courselib/replay"
#: The chapter replays live only when this is "1" (and a control plane of the right shape is up).
LIVE_ENV = "COURSELIB_LIVE"
JOB_LABEL = "batch.kubernetes.io/job-name"
IMAGE = "registry.invalid/allornothing/train:stand-in"  # never pulled: there is no kubelet
QUIET = 1.0  # s without any change before the control plane counts as settled
SETTLE_TIMEOUT = 300.0
#: With native gang scheduling: how long a quiet control plane is watched for a waiting PodGroup's
#: retry before its failure counts as final (it is retried from the backoff queue, v1.37).
GANG_PATIENCE = 30.0
#: How long the Job controller may take to create the first pod of a submitted Job.
NO_PODS_PATIENCE = 180.0
#: A Job with no pod after this many seconds is touched so that its controller syncs it (at most
#: MAX_NUDGES times, NUDGE_AFTER seconds apart).
NUDGE_AFTER, MAX_NUDGES = 20.0, 4


# ----------------------------------------------------------------------------- planning

def shape_for(spec: ClusterSpec, gang: bool = False, with_: tuple[str, ...] = ()) -> KubeShape:
    """The local control plane that emulates ``spec``: same nodes, GPUs and per-node features."""
    by_feature: dict[str, list[int]] = {}
    for node in spec.node_list():
        for f in sorted(node.features):
            by_feature.setdefault(f, []).append(node.index + 1)
    feats = []
    for name, ks in sorted(by_feature.items()):
        if len(ks) == spec.nodes:
            feats.append((name, None))
        elif ks == list(range(1, len(ks) + 1)):
            feats.append((name, len(ks)))
        else:
            feats.append((name, tuple(ks)))
    mem = f"{spec.memory_per_node // 2**20}Mi" if spec.memory_per_node else "1024Gi"
    return KubeShape(nodes=spec.nodes, gpus_per_node=spec.gpus_per_node, features=tuple(feats),
                     gang=gang, memory_per_node=mem, with_=tuple(with_))


def _affinity(constraint: str | None) -> dict | None:
    from courselib.model.cluster import parse_constraint
    terms = parse_constraint(constraint)
    if not terms:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": FEATURE_PREFIX + f, "operator": "In", "values": ["true"]}
                              for f in sorted(term)]} for term in terms]}}}


def priority_class_name(priority: int) -> str:
    return f"courselib-priority-{priority}".replace("-" * 2, "-minus-")


def job_manifest(job: Job, workload: Workload, replay_id: str, *, gang: bool = False) -> dict:
    """The ``batch/v1`` Job that stands for ``job``. Its pods ask for GPUs, and for one CPU and
    16 GiB per GPU (1/64 of a fake node's 64 CPUs and 1 TiB, never the scarce resource), so that
    the scheduler's default scoring — NodeResourcesFit LeastAllocated over CPU and memory, and
    BalancedAllocation — ranks nodes by their free GPUs, as it does for real GPU jobs that ask for
    their share of a node."""
    spec = workload.cluster
    if job.memory_per_pod and spec.memory_per_node:
        mem = f"{job.memory_per_pod // 2**20}Mi"
    else:
        mem = f"{16 * job.gpus_per_pod}Gi" if job.gpus_per_pod else "256Mi"
    resources = {"cpu": f"{job.gpus_per_pod}" if job.gpus_per_pod else "100m", "memory": mem}
    if job.gpus_per_pod:
        resources[GPU] = str(job.gpus_per_pod)
    pod_spec: dict = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "train", "image": IMAGE,
                        "command": ["torchrun", "--nnodes", str(job.pods), "train.py"],
                        "resources": {"requests": resources, "limits": resources}}],
    }
    aff = _affinity(job.constraint)
    if aff:
        pod_spec["affinity"] = aff
    if job.priority:
        pod_spec["priorityClassName"] = priority_class_name(job.priority)
    if gang:
        # v1.37: a pod joins its PodGroup by this immutable field (core/v1 PodSchedulingGroup)
        pod_spec["schedulingGroup"] = {"podGroupName": job.name}
    labels = {REPLAY_LABEL: replay_id, "app.kubernetes.io/name": job.name}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job.name, "namespace": NAMESPACE, "labels": dict(labels)},
        "spec": {"parallelism": job.pods, "completions": job.pods, "completionMode": "Indexed",
                 "backoffLimit": 0,
                 "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}},
    }


def pod_group_manifest(job: Job, replay_id: str) -> dict:
    """Kubernetes v1.37's own PodGroup (``scheduling.k8s.io/v1beta1``) for ``job``: the gang
    policy with ``minCount`` = the job's ``min_member``; its priority is the pods' (the scheduler
    refuses a group whose pods' priority differs, schedule_one_podgroup.go validatePodGroup)."""
    spec: dict = {"schedulingPolicy": {"gang": {"minCount": job.min_member or job.pods}}}
    if job.priority:
        spec["priorityClassName"] = priority_class_name(job.priority)
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": job.name, "namespace": NAMESPACE,
                         "labels": {REPLAY_LABEL: replay_id}},
            "spec": spec}


def priority_class_manifest(priority: int, preemption: bool) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": priority_class_name(priority)}, "value": priority,
            "preemptionPolicy": "PreemptLowerPriority" if preemption else "Never",
            "description": "courselib replay"}


@dataclass(frozen=True)
class ReplayPlan:
    workload: Workload
    shape: KubeShape
    policy: str
    preemption: bool = False
    notes: tuple[str, ...] = ()
    #: the model's options (``simulate(**dict(options))``), e.g. Kueue's timeout
    options: tuple[tuple[str, object], ...] = ()

    def batches(self) -> list[tuple[float, list[Job]]]:
        out: dict[float, list[Job]] = {}
        for j in self.workload.jobs:
            out.setdefault(j.submit, []).append(j)
        return sorted(out.items())


def job_notes(workload: Workload, file: str | None = None) -> list[str]:
    """Refuse a job Kubernetes cannot express; note what a replay leaves out."""
    notes = []
    for j in workload.jobs:
        if j.exclusive and j.gpus_per_pod != workload.cluster.gpus_per_node:
            raise InputError(f"job {j.name}: `exclusive` is a Slurm notion; Kubernetes has no "
                             "whole-node allocation for a pod smaller than its node",
                             file=file, field="exclusive",
                             hint="give the pods a whole node's GPUs, or drop exclusive")
        if j.time_limit:
            notes.append(f"{j.name}: time_limit is not replayed (a Job's activeDeadlineSeconds "
                         "is not a scheduling input)")
    return notes


def plan_replay(workload: Workload, *, policy: str | None = None, preemption: bool = False,
                gang: bool | None = None, file: str | None = None,
                options: dict | None = None) -> ReplayPlan:
    """Check that ``workload`` can be replayed on Kubernetes and choose the model to compare with."""
    if policy is None:
        policy = "kube-gang" if gang else "kube-default"
    if policy not in ("kube-default", "kube-gang", "kueue"):
        raise InputError(f"--policy {policy}: a kube replay compares with kube-default, kube-gang "
                         "or kueue", file=file,
                         hint="Volcano cannot be built here (the Go module proxy refuses volcano.sh/volcano)")
    if policy == "kueue":
        from courselib.live.kueue_replay import plan_kueue_replay
        return plan_kueue_replay(workload, file=file, options=options or {})
    if options:
        raise InputError(f"--set {', '.join(options)}: only a --policy kueue replay takes model "
                         "options", file=file, field="--set")
    gang = policy == "kube-gang" if gang is None else gang
    notes = job_notes(workload, file)
    if workload.queues and any(q.nominal_quota is not None for q in workload.queues):
        notes.append("queues and quotas are not replayed (they are Kueue's)")
    return ReplayPlan(workload, shape_for(workload.cluster, gang=gang), policy, preemption,
                      tuple(notes))


# ----------------------------------------------------------------------------- the API

class PodWatch(threading.Thread):
    """Every pod of one replay as the API server's watch delivers it: creation and binding order."""

    def __init__(self, api: Api, replay_id: str, path: str | None = None):
        super().__init__(daemon=True, name="courselib-kube-pod-watch")
        self.api, self.selector = api, f"{REPLAY_LABEL}={replay_id}"
        self.path = path or f"/api/v1/namespaces/{NAMESPACE}/pods"  # another kind: subclass _apply
        self.pods: dict[str, dict] = {}
        self.created: list[str] = []  # pod names, in creation order
        self.bound: list[tuple[str, str]] = []  # (pod, node) in binding order
        self.events = 0
        self.restarts = 0
        self.last_error: str | None = None
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._resp = None

    def run(self):
        from kubernetes.watch.watch import iter_resp_lines
        try:
            first = self.api.raw("GET", self.path, query={"labelSelector": self.selector})
            rv = first["metadata"]["resourceVersion"]
            with self.lock:
                for pod in first.get("items", []):
                    self._apply("ADDED", pod)
            self._ready.set()
            while not self._stopping.is_set():
                resp = self.api.raw("GET", self.path, query={
                    "labelSelector": self.selector, "watch": "true", "resourceVersion": rv,
                    "allowWatchBookmarks": "true", "timeoutSeconds": "30"}, timeout=60, stream=True)
                self._resp = resp.response  # the urllib3 response, read as it streams
                if resp.status >= 400:
                    raise CourseError(f"the pod watch was refused: {resp.status} {resp.reason}")
                for line in iter_resp_lines(resp.response):
                    if self._stopping.is_set():
                        break
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        raise CourseError(f"the pod watch ended: {obj.get('message', obj)}")
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev.get("type") == "BOOKMARK":
                        continue
                    with self.lock:
                        self._apply(ev["type"], obj)
        except BaseException as err:  # noqa: BLE001 — reported to the replay's thread
            if not self._stopping.is_set():
                self.error = err
        finally:
            self._ready.set()

    def _apply(self, kind: str, pod: dict) -> None:
        name = pod["metadata"]["name"]
        self.events += 1
        if kind == "DELETED":
            self.pods.pop(name, None)
            return
        if name not in self.pods and kind == "ADDED":
            self.created.append(name)
        old = self.pods.get(name)
        node = pod.get("spec", {}).get("nodeName")
        if node and not (old and old.get("spec", {}).get("nodeName")):
            self.bound.append((name, node))
        self.pods[name] = pod

    def wait_ready(self, timeout: float = 30.0) -> None:
        if not self._ready.wait(timeout):
            raise CourseError("the pod watch did not start", hint="is the API server up?")
        self.check()

    def check(self) -> None:
        if self.error is not None:
            err = self.error
            raise err if isinstance(err, CourseError) else CourseError(f"the pod watch failed: {err}")

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(Exception):
            if self._resp is not None:
                self._resp.shutdown()  # unblocks the thread's read (urllib3 >= 2.3)
        self.join(timeout=5)

    def snapshot(self) -> tuple[int, dict[str, dict]]:
        with self.lock:
            return self.events, dict(self.pods)


def job_of(pod: dict) -> str:
    return pod["metadata"].get("labels", {}).get(JOB_LABEL) or \
        pod["metadata"].get("labels", {}).get("app.kubernetes.io/name", "?")


def _phase(pod: dict) -> str:
    return pod.get("status", {}).get("phase", "Pending")


def _now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FakeKubelet:
    """The kubelet's part, for status only (as KWOK does): a bound pod runs; a finished job's pods
    succeed. Nothing runs: the pods' containers are never started."""

    def __init__(self, api: Api):
        self.api = api
        self.marked_running: set[str] = set()
        self.marked_done: set[str] = set()

    def _patch_status(self, name: str, status: dict) -> None:
        self.api.patch_status(name, status)

    def run_bound(self, pods: dict[str, dict]) -> int:
        """Mark every newly bound, still pending pod Running and Ready; how many."""
        n = 0
        for name, pod in pods.items():
            if name in self.marked_running or not pod.get("spec", {}).get("nodeName"):
                continue
            if pod["metadata"].get("deletionTimestamp") or _phase(pod) != "Pending":
                continue
            now = _now_rfc3339()
            conds = [{"type": t, "status": "True", "lastTransitionTime": now}
                     for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")]
            self._patch_status(name, {
                "phase": "Running", "startTime": now, "hostIP": "127.0.0.1",
                "hostIPs": [{"ip": "127.0.0.1"}], "conditions": conds,
                "containerStatuses": [{"name": "train", "image": IMAGE, "imageID": "", "ready": True,
                                       "started": True, "restartCount": 0,
                                       "state": {"running": {"startedAt": now}}}]})
            self.marked_running.add(name)
            n += 1
        return n

    def succeed(self, names: list[str]) -> None:
        """The job trained to its end: its pods exit 0 — all at once, as far as HTTP allows (the
        requests go out in parallel), so the scheduler sees the GPUs come back together."""
        from concurrent.futures import ThreadPoolExecutor
        now = _now_rfc3339()
        status = {
            "phase": "Succeeded",
            "conditions": [{"type": t, "status": "False", "reason": "PodCompleted",
                            "lastTransitionTime": now} for t in ("Ready", "ContainersReady")],
            "containerStatuses": [{"name": "train", "image": IMAGE, "imageID": "", "ready": False,
                                   "started": False, "restartCount": 0,
                                   "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                            "startedAt": now, "finishedAt": now}}}]}
        todo = [n for n in names if n not in self.marked_done]
        with ThreadPoolExecutor(max_workers=8) as pool:
            for _ in pool.map(lambda n: self._patch_status(n, status), todo):
                pass
        self.marked_done.update(todo)


def _metric(text: str, name: str, **labels) -> float:
    """The sum of a Prometheus metric's samples whose labels include ``labels``."""
    total = 0.0
    pat = re.compile(rf"^{re.escape(name)}(\{{[^}}]*\}})?\s+(\S+)$")
    for line in text.splitlines():
        m = pat.match(line)
        if not m:
            continue
        lab = m.group(1) or ""
        if all(f'{k}="{v}"' in lab for k, v in labels.items()):
            total += float(m.group(2))
    return total


# ----------------------------------------------------------------------------- the run

@dataclass
class RealJob:
    """What the real control plane did with one job (times in the workload's clock, seconds)."""
    name: str
    pods: int
    submitted: float | None = None
    start: float | None = None  # every pod bound and running: the barrier passed
    end: float | None = None
    bound_at_end: int = 0
    bound_max: int = 0
    timeline: list = field(default_factory=list)  # [(t, pods bound)] at every settle where it changed
    nodes: dict = field(default_factory=dict)  # node -> pods at the end (or at the start)
    reason: str | None = None  # the scheduler's message on a pending pod, at the end
    state: str = "PENDING"
    # what `kubectl describe` shows of it while it waits (first seen): a pending pod's events and,
    # with native gang scheduling, its PodGroup's conditions
    describe: dict = field(default_factory=dict)
    nudges: int = 0  # times the replay touched the Job because its controller created no pod
    created_real: float | None = field(default=None, repr=False)  # monotonic clock, not recorded


@dataclass
class ReplayResult:
    plan: ReplayPlan
    jobs: list[RealJob]
    pod_order: list[str]  # job name per pod, in the order the Job controller created them
    batches: list[list[str]]  # job names per submission instant (in order)
    wall_seconds: float
    settles: int
    deadlock: bool
    versions: dict
    recorded_at: str = ""
    extra: dict = field(default_factory=dict)  # what an extension recorded (Kueue: its events)

    def job(self, name: str) -> RealJob:
        return next(j for j in self.jobs if j.name == name)

    def start_order(self) -> list[str]:
        started = [j for j in self.jobs if j.start is not None]
        return [j.name for j in sorted(started, key=lambda j: j.start)]


def clear(api: Api, timeout: float = 120.0, *, gang: bool = False) -> None:
    """Delete every Job and pod of earlier replays (pods at once: no kubelet waits for them)."""
    jobs_path = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    # Every pod at once, forced (a bound pod's graceful deletion waits for a kubelet that does not
    # exist); then the Jobs. The Job controller lifts its tracking finalizer from a deleted Job's
    # pods; whatever still carries one after a moment has it lifted here.
    api.delete(pods_path, {"labelSelector": REPLAY_LABEL, "gracePeriodSeconds": "0"})
    api.delete(jobs_path, {"labelSelector": REPLAY_LABEL, "propagationPolicy": "Background"})
    if gang:
        api.delete(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups",
                   {"labelSelector": REPLAY_LABEL})
    deadline = time.monotonic() + timeout
    patience = time.monotonic() + 2.0
    while True:
        pods = api.list_pods(REPLAY_LABEL).get("items", [])
        jobs = api.raw("GET", jobs_path, query={"labelSelector": REPLAY_LABEL}).get("items", [])
        if not pods and not jobs:
            return
        if time.monotonic() > patience:
            for pod in pods:
                path = f"{pods_path}/{pod['metadata']['name']}"
                with contextlib.suppress(ApiError):
                    if pod["metadata"].get("finalizers"):
                        api.raw("PATCH", path, {"metadata": {"finalizers": None}},
                                content_type="application/merge-patch+json")
                    if not pod["metadata"].get("deletionTimestamp"):
                        api.delete(path, {"gracePeriodSeconds": "0"})
        if time.monotonic() > deadline:
            raise CourseError(f"{len(pods)} pods and {len(jobs)} Jobs of an earlier replay are "
                              "still there", hint="run `courselib kube down` and `up` again")
        time.sleep(0.3)


def run_replay(cp: ControlPlane, plan: ReplayPlan, *, say=lambda msg: None,
               timeout: float | None = None) -> ReplayResult:
    """Submit ``plan`` to the running control plane, advancing the workload's clock as it settles."""
    from courselib.live.kube import reshape
    api = Api(cp)
    if not cp.shape.same_nodes(plan.shape):
        clear(api, gang=cp.shape.gang)
        reshape(cp, plan.shape, say=say)  # fake nodes are only objects: make them the workload's
    api = Api(cp)
    gang = plan.shape.gang
    clear(api, gang=gang)
    replay_id = f"r{int(time.time() * 1000) % 10**10}"
    t0 = time.monotonic()
    deadline = t0 + (timeout if timeout is not None else 120.0 + 3.0 * sum(j.pods for j in plan.workload.jobs) / 10)
    real = {j.name: RealJob(j.name, j.pods) for j in plan.workload.jobs}
    durations = {j.name: j.duration for j in plan.workload.jobs}
    min_member = {j.name: j.min_member for j in plan.workload.jobs}
    priorities = sorted({j.priority for j in plan.workload.jobs if j.priority})
    watch = PodWatch(api, replay_id)
    kubelet = FakeKubelet(api)
    batches_done: list[list[str]] = []
    settles = 0
    ext = None  # what a scheduler in front of kube-scheduler adds (Kueue: courselib.live.kueue_replay)
    if plan.policy == "kueue":
        from courselib.live.kueue_replay import KueueReplay
        ext = KueueReplay(cp, api, plan, replay_id, say)
    try:
        if ext is not None:
            ext.prepare()
        for p in priorities:
            body = priority_class_manifest(p, plan.preemption)
            path = "/apis/scheduling.k8s.io/v1/priorityclasses"
            api.delete(f"{path}/{body['metadata']['name']}")  # its preemptionPolicy is immutable
            api.create(path, body)
        watch.start()
        watch.wait_ready()
        pending = plan.batches()
        ends: dict[str, float] = {}  # job -> virtual end time
        now = 0.0
        submitted: dict[str, float] = {}

        def settle() -> dict[str, dict]:
            nonlocal settles
            settles += 1
            return _settle(cp, watch, kubelet, real, submitted, deadline, gang=gang,
                           extra=ext.calm if ext is not None else None)

        def observe(pods: dict[str, dict], t: float) -> None:
            by_job: dict[str, list[dict]] = {}
            for pod in pods.values():
                by_job.setdefault(job_of(pod), []).append(pod)
            for name, rj in real.items():
                if name not in submitted or rj.end is not None:
                    continue
                live = [p for p in by_job.get(name, []) if _phase(p) in ("Pending", "Running")
                        and not p["metadata"].get("deletionTimestamp")]
                bound = [p for p in live if p.get("spec", {}).get("nodeName")]
                rj.bound_at_end = len(bound)
                rj.bound_max = max(rj.bound_max, len(bound))
                if not rj.timeline or rj.timeline[-1][1] != len(bound):
                    rj.timeline.append((t, len(bound)))
                nodes: dict[str, int] = {}
                for p in bound:
                    nodes[p["spec"]["nodeName"]] = nodes.get(p["spec"]["nodeName"], 0) + 1
                rj.nodes = dict(sorted(nodes.items(), key=lambda kv: _node_key(kv[0])))
                waiting = [p for p in live if not p.get("spec", {}).get("nodeName")]
                rj.reason = _pending_message(waiting[0]) if waiting else None
                if waiting and not rj.describe:
                    rj.describe = describe_waiting(api, t, min(p["metadata"]["name"] for p in waiting),
                                                   name if gang else None)
                need = min_member[name] or rj.pods
                if rj.start is None and len(bound) >= need:
                    rj.start = t
                    rj.state = "RUNNING"
                    ends[name] = t + durations[name]
                    say(f"t={_fmt(t)}: {name}: all {len(bound)} pods bound and running; the barrier "
                        f"passes, training for {_fmt(durations[name])}")
                elif rj.start is None:
                    rj.state = "HOLDING" if bound else "PENDING"
            if ext is not None:
                ext.observe(t)

        while True:
            # the next instant: a training's end or a submission, whichever comes first
            t_end = min(ends.values(), default=math.inf)
            t_sub = pending[0][0] if pending else math.inf
            # or a timer of Kueue's (PodsReady timeout, requeue backoff), first on a tie
            t_ext = ext.next_event() if ext is not None else math.inf
            t = min(t_end, t_sub, t_ext)
            if t == math.inf or (ext is not None and t > ext.horizon):
                break
            now = t
            if t == t_ext:
                deadline = max(deadline, ext.wait())  # the real manager's timer, in real time
                observe(settle(), now)
                continue
            finishing = sorted(n for n, e in ends.items() if e == t)
            if finishing:
                _, pods = watch.snapshot()
                for name in finishing:
                    kubelet.succeed([p for p, pod in pods.items() if job_of(pod) == name
                                     and pod.get("spec", {}).get("nodeName")])
                    real[name].end = t
                    real[name].state = "COMPLETED"
                    real[name].bound_at_end = 0
                    del ends[name]
                    say(f"t={_fmt(t)}: {name}: trained to its end; its pods succeed")
                observe(settle(), now)
            if pending and pending[0][0] == t:
                _, batch = pending.pop(0)
                for job in batch:
                    if gang:
                        api.create(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups",
                                   pod_group_manifest(job, replay_id))
                    body = job_manifest(job, plan.workload, replay_id, gang=gang)
                    if ext is not None:
                        body = ext.job_manifest(job, body)
                    api.create(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", body)
                    submitted[job.name] = t
                    real[job.name].submitted = t
                    real[job.name].created_real = time.monotonic()
                batches_done.append([j.name for j in batch])
                say(f"t={_fmt(t)}: submitted {', '.join(j.name for j in batch)} "
                    f"({sum(j.pods for j in batch)} pods)")
                observe(settle(), now)
        # the end: nothing can change any more
        _, pods = watch.snapshot()
        deadlock = any(rj.start is None and rj.bound_at_end > 0 for rj in real.values())
        if ext is not None and ext.next_event() < math.inf:
            deadlock = False  # a timer of Kueue's is still to come: not stuck (the model's horizon)
        created = [job_of(pods[n]) if n in pods else _job_from_pod_name(n, real)
                   for n in watch.created]
    finally:
        watch.stop()
        with contextlib.suppress(Exception):
            clear(api, gang=gang)
        if ext is not None:
            ext.cleanup()
    # pods recreated after preemption come after their batch: keep the first creations per batch
    order = _batch_order(created, batches_done, real)
    return ReplayResult(plan, [real[j.name] for j in plan.workload.jobs], order, batches_done,
                        round(time.monotonic() - t0, 2), settles, deadlock,
                        {"kubernetes": KUBERNETES_VERSION, **cp.versions},
                        time.strftime("%Y-%m-%d", time.gmtime()),
                        ext.report() if ext is not None else {})


def describe_waiting(api: Api, t: float, pod: str, pod_group: str | None) -> dict:
    """What `kubectl describe` would show of a waiting job at workload time ``t``: the events of one
    of its pending pods (the scheduler's FailedScheduling) and its PodGroup's status conditions."""
    out: dict = {"t": t, "pod": pod, "events": [], "podgroup": []}
    with contextlib.suppress(ApiError):
        evs = api.raw("GET", f"/api/v1/namespaces/{NAMESPACE}/events",
                      query={"fieldSelector": f"involvedObject.name={pod}"}).get("items", [])
        evs.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        for e in evs:
            row = {"type": e.get("type"), "reason": e.get("reason"),
                   "from": (e.get("source") or {}).get("component") or e.get("reportingComponent"),
                   "message": e.get("message")}
            if row not in out["events"]:  # the same warning again is one line, as kubectl shows it
                out["events"].append(row)
        out["events"] = out["events"][-3:]
    if pod_group:
        with contextlib.suppress(ApiError):
            pg = api.raw("GET", f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups/{pod_group}")
            out["podgroup"] = [{"type": c.get("type"), "status": c.get("status"), "reason": c.get("reason"),
                                "message": c.get("message")}
                               for c in (pg.get("status") or {}).get("conditions", [])]
    return out


def format_describe(result: "ReplayResult") -> str:
    """The waiting jobs as `kubectl describe pod` / `describe podgroup` would show them."""
    lines = []
    for rj in result.jobs:
        d = rj.describe
        if not d:
            continue
        lines.append(f"{rj.name}: waiting at t={_fmt(d['t'])}; pod {d['pod']}")
        for e in d["events"]:
            lines.append(f"  Events:   {e['type']:<8} {e['reason']:<17} {e['from'] or '':<18} {e['message']}")
        for c in d["podgroup"]:
            lines.append(f"  PodGroup {rj.name}: {c['type']}={c['status']} ({c['reason']}): {c['message']}")
    return "\n".join(lines) if lines else "(no job waited)"


def _job_from_pod_name(pod: str, real: dict) -> str:
    # an Indexed Job's pod is <job>-<index>-<suffix>
    for name in sorted(real, key=len, reverse=True):
        if pod.startswith(name + "-"):
            return name
    return "?"


def _batch_order(created: list[str], batches: list[list[str]], real: dict) -> list[str]:
    """The creation order, pods of each submission batch in turn (first ``pods`` of each job)."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for batch in batches:
        want = {n: real[n].pods for n in batch}
        for name in created:
            if name in want and seen.get(name, 0) < want[name]:
                seen[name] = seen.get(name, 0) + 1
                out.append(name)
    return out


def _node_key(name: str):
    m = re.match(r"node(\d+)$", name)
    return (0, int(m.group(1))) if m else (1, name)


def _pending_message(pod: dict) -> str | None:
    for c in pod.get("status", {}).get("conditions", []) or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return f"{c.get('reason', '')}: {c.get('message', '')}".strip(": ")
    return None


def _nudge_if_stuck(api: Api, real: dict, submitted: dict, counts: dict, idle=frozenset()) -> None:
    """A Job with no pod NUDGE_AFTER seconds after it was created (or unsuspended) is touched (an
    annotation), so that its controller syncs it at once. Seen under heavy CPU load with Kubernetes
    v1.37.2: a new Job's first syncs fail ("read version … is not as new as written version …", the
    controller's consistency check, pkg/controller/util/consistency) and are retried with a backoff
    that doubles to a minute (job_controller.go DefaultJobApiBackOff, MaxJobApiBackOff). Touching a
    Job changes when it is synced, not what the scheduler decides; the replay reports every nudge."""
    now = time.monotonic()
    for name in submitted:
        rj = real[name]
        if name in idle or counts.get(name):  # suspended on purpose (Kueue), or under way
            rj.created_real = now
            continue
        if rj.end is None and rj.created_real is not None and rj.nudges < MAX_NUDGES and \
                now - rj.created_real > NUDGE_AFTER:
            rj.nudges += 1
            rj.created_real = now
            with contextlib.suppress(ApiError):
                api.raw("PATCH", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}",
                        {"metadata": {"annotations": {"courselib/nudge": str(rj.nudges)}}},
                        content_type="application/merge-patch+json")


def _settle(cp: ControlPlane, watch: PodWatch, kubelet: FakeKubelet, real: dict, submitted: dict,
            deadline: float, *, gang: bool = False, extra=None) -> dict[str, dict]:
    """Wait until the control plane has nothing left to do (see the module docstring).

    ``extra(pods)``, if given, adds what settled means for a scheduler in front of kube-scheduler
    (Kueue): ``(fingerprint, calm, idle)``, ``idle`` the jobs that should have no pods (suspended).

    With native gang scheduling, a PodGroup that does not fit goes back to the backoff queue and is
    popped again whenever the scheduler is otherwise idle (SchedulerPopFromBackoffQ, on by default
    in v1.37): the backoff queue is never empty while a gang waits, and attempts keep counting.
    There, settled means: nothing in the active queue, and no pod, binding or status changed for a
    quiet period (twice the one used otherwise, so several retries have come and gone)."""
    last = None
    since = time.monotonic()
    group_attempts_at_change = None
    while True:
        watch.check()
        dead = [p.role for p in cp.procs if not is_ours(p)]
        if dead:
            raise CourseError(f"{', '.join(dead)} of the local control plane stopped during the replay",
                              hint=f"see the logs in {cp.state_dir}/log; `courselib kube down`, then `up`")
        events, pods = watch.snapshot()
        kubelet.run_bound(pods)
        counts: dict[str, int] = {}
        unbound_untried = 0
        for pod in pods.values():
            if pod["metadata"].get("deletionTimestamp"):
                continue
            name = job_of(pod)
            if _phase(pod) in ("Pending", "Running"):
                counts[name] = counts.get(name, 0) + 1
            if not pod.get("spec", {}).get("nodeName") and _pending_message(pod) is None:
                unbound_untried += 1
        ext_fp, ext_calm, idle = extra(pods) if extra is not None else ((), True, frozenset())
        all_created = all(counts.get(n, 0) == (0 if n in idle else real[n].pods)
                          for n in submitted if real[n].end is None)
        _nudge_if_stuck(watch.api, real, submitted, counts, idle)
        running_ok = all(n in kubelet.marked_running for n, p in pods.items()
                         if p.get("spec", {}).get("nodeName") and _phase(p) == "Pending"
                         and not p["metadata"].get("deletionTimestamp"))
        try:
            metrics = scheduler_metrics(cp)
            active = _metric(metrics, "scheduler_pending_pods", queue="active")
            backoff = _metric(metrics, "scheduler_pending_pods", queue="backoff")
            attempts = _metric(metrics, "scheduler_schedule_attempts_total")
            group_attempts = _metric(metrics, "scheduler_podgroup_schedule_attempts_total")
        except (OSError, http.client.HTTPException):  # the scheduler went away mid-answer
            active = backoff = attempts = group_attempts = -1
        fp = ((events, active) if gang else (events, active, backoff, attempts)) + (ext_fp,)
        calm = all_created and running_ok and active == 0 and unbound_untried == 0 and \
            (gang or backoff == 0) and ext_calm
        t = time.monotonic()
        if fp != last:
            last, since = fp, t
            group_attempts_at_change = group_attempts
        elif calm and t - since >= QUIET:
            if not gang:
                return pods
            # every gang still waiting has been tried again since the last change, and failed
            waiting = {job_of(p) for p in pods.values() if not p.get("spec", {}).get("nodeName")
                       and _phase(p) == "Pending" and not p["metadata"].get("deletionTimestamp")}
            retried = group_attempts - (group_attempts_at_change or 0)
            if retried >= 2 * len(waiting) or t - since >= GANG_PATIENCE:
                return pods
        if t > deadline or (not counts and any(n not in idle for n in submitted)
                            and t - since > NO_PODS_PATIENCE):
            from courselib.live.kube import _log_tail
            if not counts:
                listed = len(watch.api.list_pods(watch.selector).get("items", []))
                why = (f"no pod of any submitted Job appeared in the watch ({listed} listed by the API "
                       f"server, {watch.restarts} watch restarts, last {watch.last_error or 'none'})")
            else:
                why = f"pods created per job {counts}, scheduler active {active:g}, backoff {backoff:g}"
            raise CourseError(f"the control plane did not settle in time ({why}; the controller "
                              f"manager's last error: {_log_tail(cp, 'kube-controller-manager') or 'none'})",
                              hint=f"see the logs in {cp.state_dir}/log")
        time.sleep(0.15)


def _fmt(seconds: float) -> str:
    from courselib.units import format_duration
    return format_duration(seconds)


# ----------------------------------------------------------------------------- comparison

@dataclass
class JobComparison:
    name: str
    real_complete: bool
    model_complete: bool
    real_bound_end: int
    model_bound_end: int
    real_start: float | None
    model_start: float | None
    round_robin_bound_end: int  # the model with its own round-robin assumption
    # Kueue: how often the job's Workload was evicted (PodsReadyTimeout); None: not compared
    real_evictions: int | None = None
    model_evictions: int | None = None

    @property
    def complete_agrees(self) -> bool:
        return self.real_complete == self.model_complete

    @property
    def evictions_compared(self) -> bool:
        return self.real_evictions is not None and self.model_evictions is not None

    @property
    def evictions_agree(self) -> bool:
        return not self.evictions_compared or self.real_evictions == self.model_evictions

    @property
    def bound_agrees(self) -> bool:
        return self.real_bound_end == self.model_bound_end


@dataclass
class Comparison:
    """Where the real kube-scheduler and courselib's policy agree, job by job."""
    workload: str
    policy: str
    jobs: list[JobComparison]
    real_order: list[str]
    model_order: list[str]
    order_pairs: int
    order_agree: int
    order_disagreements: list[tuple[str, str]]
    real_deadlock: bool
    model_deadlock: bool
    round_robin_deadlock: bool
    max_start_error: float | None

    @property
    def checks(self) -> int:
        return 2 * len(self.jobs) + self.order_pairs + 1 + sum(j.evictions_compared for j in self.jobs)

    @property
    def agreed(self) -> int:
        return (sum(j.complete_agrees for j in self.jobs) + sum(j.bound_agrees for j in self.jobs)
                + self.order_agree + (self.real_deadlock == self.model_deadlock)
                + sum(j.evictions_compared and j.evictions_agree for j in self.jobs))

    @property
    def agreement(self) -> float:
        return self.agreed / self.checks if self.checks else 1.0

    def to_dict(self) -> dict:
        d = asdict(self)
        for row, j in zip(d["jobs"], self.jobs):
            row["complete_agrees"], row["bound_agrees"] = j.complete_agrees, j.bound_agrees
            if j.evictions_compared:
                row["evictions_agree"] = j.evictions_agree
        d["checks"], d["agreed"], d["agreement"] = self.checks, self.agreed, self.agreement
        return d


def quorum_order(workload: Workload, pod_order: list[str], batches: list[list[str]]) -> list[str]:
    """Jobs in the order they reached ``min_member`` created pods, batch by batch: the order in which
    their PodGroups passed PreEnqueue and entered the scheduling queue."""
    need = {j.name: j.min_member or j.pods for j in workload.jobs}
    out: list[str] = []
    pos = 0
    for batch in batches:
        total = sum(next(j.pods for j in workload.jobs if j.name == n) for n in batch)
        seen: dict[str, int] = {}
        for name in pod_order[pos:pos + total]:
            seen[name] = seen.get(name, 0) + 1
            if seen[name] == need[name]:
                out.append(name)
        out += [n for n in batch if n not in out]
        pos += total
    return out


def model_run(workload: Workload, policy: str, pod_order=None, preemption: bool = False,
              batches=None, options=()):
    from courselib.sim.gang import simulate
    opts = dict(options)
    if policy == "kube-default":
        opts["preemption"] = preemption
        if pod_order is not None:
            opts["pod_order"] = tuple(pod_order)
    elif policy == "kube-gang" and pod_order is not None and batches is not None:
        opts["group_order"] = tuple(quorum_order(workload, list(pod_order), batches))
    return simulate(workload, policy, **opts)


def compare(result: ReplayResult, *, name: str = "", tolerance: float = 1e-6) -> Comparison:
    """Compare a real replay with the model on the same workload (given the real pod order).

    Checks, per job: whether it ever had all its pods placed (its barrier passed), and how many
    pods it held at the end; over pairs of jobs the model starts at different times, the start
    order; and the verdict (deadlock or not).
    """
    plan = result.plan
    wl = plan.workload
    # what the real run drew where the model needs to be told (Kueue: its UID tie order)
    recorded = tuple((result.extra or {}).get("model_options", {}).items())
    model = model_run(wl, plan.policy, result.pod_order, plan.preemption, result.batches,
                      plan.options + recorded)
    rr = model_run(wl, plan.policy, None, plan.preemption, options=plan.options)
    rows = []
    for job in wl.jobs:
        rj, mj, rrj = result.job(job.name), model.job(job.name), rr.job(job.name)
        per = max(1, job.gpus_per_pod)
        evicted = result.extra.get("evictions") if result.extra else None
        rows.append(JobComparison(job.name, rj.start is not None, mj.start is not None,
                                  rj.bound_at_end, mj.gpus_held // per if job.gpus_per_pod else 0,
                                  rj.start, mj.start, rrj.gpus_held // per if job.gpus_per_pod else 0,
                                  None if evicted is None else evicted.get(job.name, 0),
                                  None if evicted is None else mj.evictions))
    both = [r for r in rows if r.real_start is not None and r.model_start is not None]
    pairs = agree = 0
    bad = []
    for a in both:
        for b in both:
            if a.model_start + tolerance < b.model_start:
                pairs += 1
                if a.real_start < b.real_start:
                    agree += 1
                else:
                    bad.append((a.name, b.name))
    errs = [abs(r.real_start - r.model_start) for r in both]
    m_order = [j.name for j in sorted((j for j in model.jobs if j.start is not None), key=lambda j: j.start)]
    return Comparison(name, plan.policy, rows, result.start_order(), m_order, pairs, agree, bad,
                      result.deadlock, model.deadlock, rr.deadlock,
                      round(max(errs), 3) if errs else None)


def format_comparison(c: Comparison) -> str:
    def t(x):
        return "-" if x is None else _fmt(x)
    given = {"kube-gang": "the order in which the real PodGroups reached their quorum",
             "kueue": "the order the real Kueue drew among Workloads created together (UIDs)"
             }.get(c.policy, "the pod order the real Job controller created")
    lines = [f"model: courselib {c.policy}, given {given}; in brackets, with its own assumption "
             "(round-robin pods, groups in workload order)",
             f"{'job':<12} {'complete: real':>14} {'model':>6}  {'pods bound at end: real':>23} "
             f"{'model':>6} {'(round-robin)':>13}  {'start: real':>11} {'model':>8}  agree"]
    evictions = any(r.evictions_compared for r in c.jobs)
    if evictions:
        lines[-1] = lines[-1].replace("  agree", "  evicted: real model  agree")
    for r in c.jobs:
        ok = r.complete_agrees and r.bound_agrees and r.evictions_agree
        ev = f"  {r.real_evictions:>13} {r.model_evictions:>5}" if r.evictions_compared else \
            ("  " + " " * 19 if evictions else "")
        lines.append(f"{r.name:<12} {'yes' if r.real_complete else 'no':>14} "
                     f"{'yes' if r.model_complete else 'no':>6}  {r.real_bound_end:>23} "
                     f"{r.model_bound_end:>6} {r.round_robin_bound_end:>13}  {t(r.real_start):>11} "
                     f"{t(r.model_start):>8}{ev}  {'yes' if ok else 'NO'}")
    lines.append(f"start order  real: {' '.join(c.real_order) or '-'}")
    lines.append(f"             model: {' '.join(c.model_order) or '-'}")
    if c.order_disagreements:
        lines.append("  out of order: " + ", ".join(f"{a} before {b}" for a, b in c.order_disagreements))
    lines.append(f"verdict      real: {'DEADLOCK' if c.real_deadlock else 'no deadlock'}; model: "
                 f"{'DEADLOCK' if c.model_deadlock else 'no deadlock'} (round-robin: "
                 f"{'DEADLOCK' if c.round_robin_deadlock else 'no deadlock'})")
    lines.append(f"agreement: {c.agreed}/{c.checks} checks = {100 * c.agreement:.0f}% "
                 f"(complete {sum(r.complete_agrees for r in c.jobs)}/{len(c.jobs)}, bound at end "
                 f"{sum(r.bound_agrees for r in c.jobs)}/{len(c.jobs)}, order {c.order_agree}/{c.order_pairs}, "
                 f"verdict {int(c.real_deadlock == c.model_deadlock)}/1"
                 + (f", evictions {sum(r.evictions_agree for r in c.jobs if r.evictions_compared)}"
                    f"/{sum(r.evictions_compared for r in c.jobs)}" if evictions else "") + ")")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- output

def replay_to_dict(result: ReplayResult) -> dict:
    plan = result.plan
    return {
        "shape": plan.shape.describe(),
        "policy": plan.policy,
        "versions": result.versions,
        "notes": list(plan.notes),
        "jobs": [{k: v for k, v in asdict(j).items() if k != "created_real"} for j in result.jobs],
        "start_order": result.start_order(),
        "deadlock": result.deadlock,
        "batches": result.batches,
        "pod_order": _compress(result.pod_order),
        "wall_seconds": result.wall_seconds,
        "settles": result.settles,
        **({"options": [list(kv) for kv in plan.options]} if plan.options else {}),
        **({"extra": result.extra} if result.extra else {}),
    }


def _compress(order: list[str]) -> list[list]:
    """``[a, a, b]`` -> ``[[a, 2], [b, 1]]`` (runs of one job's pods)."""
    out: list[list] = []
    for name in order:
        if out and out[-1][0] == name:
            out[-1][1] += 1
        else:
            out.append([name, 1])
    return out


def _expand(runs: list[list]) -> list[str]:
    return [name for name, n in runs for _ in range(n)]


def format_replay(result: ReplayResult) -> str:
    plan = result.plan
    lines = [f"Kubernetes {result.versions.get('kubernetes', KUBERNETES_VERSION)} (real kube-apiserver, "
             f"kube-scheduler, kube-controller-manager), {plan.shape.describe()}"]
    lines += [f"note: {n}" for n in plan.notes]
    runs = _compress(result.pod_order)
    if len(runs) > 1:
        head = ", ".join(f"{n}×{k}" for n, k in runs[:8])
        lines.append(f"pod creation order (Job controller): {head}{', ...' if len(runs) > 8 else ''} "
                     f"({len(runs)} runs)")
    lines.append(f"{'job':<12} {'pods':>5} {'submit':>8} {'start':>8} {'end':>8} {'bound max':>9} "
                 f"{'bound at end':>12}  {'state':<10} nodes")
    for rj in result.jobs:
        def t(x):
            return "-" if x is None else _fmt(x)
        nodes = ", ".join(f"{n}:{k}" for n, k in list(rj.nodes.items())[:4]) + \
            (f", ... ({len(rj.nodes)} nodes)" if len(rj.nodes) > 4 else "")
        lines.append(f"{rj.name:<12} {rj.pods:>5} {t(rj.submitted):>8} {t(rj.start):>8} {t(rj.end):>8} "
                     f"{rj.bound_max:>9} {rj.bound_at_end:>12}  {rj.state:<10} {nodes or '-'}")
        if rj.reason and rj.start is None:
            lines.append(f"{'':<12} pending pods: {rj.reason[:110]}")
    nudged = [f"{rj.name} ({rj.nudges}x)" for rj in result.jobs if rj.nudges]
    if nudged:
        lines.append(f"note: the Job controller created no pod for {NUDGE_AFTER:g} s; the replay touched "
                     f"these Jobs so it would sync them: {', '.join(nudged)}")
    lines.append(f"start order: {' '.join(result.start_order()) or '-'}")
    if result.deadlock:
        held = sum(rj.bound_at_end for rj in result.jobs if rj.start is None)
        lines.append(f"DEADLOCK: {held} pods of incomplete gangs hold their GPUs and nothing can "
                     "change")
    lines.append(f"({result.settles} settles, {result.wall_seconds:g} s of real time)")
    return "\n".join(lines)


RECORDED_BY = "courselib kube replay --record"


def record(result: ReplayResult, path, *, workload_text: str, workload_file: str) -> Path:
    """Write a replay as JSON (the chapter's recorded run). Only overwrites files it wrote itself."""
    import platform
    path = Path(path)
    if path.exists():
        try:
            from courselib.io.policy import read_text as read_policy
            ours = json.loads(read_policy(path, "record")).get("recorded_by") == RECORDED_BY
        except ValueError:
            ours = False
        if not ours:
            raise CourseError(f"{path} exists and was not written by a replay; not overwriting it",
                              hint="choose another file")
    data = {"recorded_by": RECORDED_BY,
            "recorded_on": f"{platform.system()} {platform.release()}, Kubernetes "
                           f"{result.versions.get('kubernetes')}, etcd {result.versions.get('etcd')}"
                           + (f", Kueue {result.extra['kueue']}" if "kueue" in result.extra else ""),
            "recorded_at": result.recorded_at, "workload_file": workload_file,
            "workload_text": workload_text, "preemption": result.plan.preemption,
            "replay": replay_to_dict(result)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


@dataclass
class Recorded:
    result: ReplayResult
    recorded_on: str
    recorded_at: str
    workload_file: str


def load_recorded(name_or_path) -> Recorded:
    """A recorded replay: ``seed-600`` (shipped as ``courselib/data/recorded/kube-seed-600.json``)
    or a path."""
    from importlib import resources

    from courselib.io.workload import parse_workload
    from courselib.io.yamlfile import load_all_text
    p = Path(str(name_or_path))
    from courselib.io.policy import read_text as read_policy
    text = read_policy(p, "record") if p.suffix == ".json" else \
        resources.files("courselib.data").joinpath(f"recorded/kube-{name_or_path}.json").read_text()
    data = json.loads(text)
    workload = parse_workload(load_all_text(data["workload_text"], file=data["workload_file"])[0],
                              file=data["workload_file"])
    rep = data["replay"]
    plan = plan_replay(workload, policy=rep["policy"], preemption=data.get("preemption", False),
                       options={k: v for k, v in rep.get("options", [])})
    jobs = [RealJob(**{**j, "timeline": [tuple(x) for x in j["timeline"]]}) for j in rep["jobs"]]
    result = ReplayResult(plan, jobs, _expand(rep["pod_order"]), rep["batches"], rep["wall_seconds"],
                          rep["settles"], rep["deadlock"], rep["versions"], data["recorded_at"],
                          rep.get("extra", {}))
    return Recorded(result, data["recorded_on"], data["recorded_at"], data["workload_file"])


def live_or_recorded(name: str, workload_path, *, gang: bool = False, policy: str | None = None,
                     options: dict | None = None) -> tuple[ReplayResult, str | None]:
    """Replay ``workload_path`` on the local control plane if one of the right shape is up; else the
    recorded run ``name``. Returns the result and, for a recorded one, the label to show."""
    from courselib.io.workload import load_workload
    from courselib.live import kube
    plan = plan_replay(load_workload(workload_path), gang=gang,
                       policy=policy or ("kube-gang" if gang else "kube-default"), options=options)
    if os.environ.get(LIVE_ENV) != "1":
        why = (f"{LIVE_ENV} is not 1 (a replay this size takes minutes; with `courselib kube up "
               f"{plan.shape.cli_args()}` running, set {LIVE_ENV}=1 to run it live)")
    else:
        why = kube.unavailable_reason()
    if why is None:
        cp = kube.running()
        if cp is not None and cp.shape.same_nodes(plan.shape) and \
                set(plan.shape.with_) <= set(cp.shape.with_):
            return run_replay(cp, plan), None
        why = (f"no local control plane of this shape is up (`courselib kube up "
               f"{plan.shape.cli_args()}` starts one)")
    rec = load_recorded(name)
    return rec.result, f"RECORDED run ({rec.recorded_on}, {rec.recorded_at}), shown because {why}"
