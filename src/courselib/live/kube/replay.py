"""The replay driver: a workload on the real local Kubernetes control plane, in virtual time.

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
how two Jobs' pods interleave in the scheduler's queue. :func:`courselib.live.kube.result.compare`
gives the model that order (``pod_order``) and also shows what the model predicts with its own
round-robin assumption.

**Extensions** (Kueue, a JobSet controller, a topology set-up) take part through the named hooks
of :mod:`courselib.live.kube.extension` — prepare, manifest, settled, observe, next_event, wait,
report, cleanup — and the driver imports none of them. **The driver** (:func:`drive`) is given its
API client, its hooks and its clock: :func:`run_replay` gives it the real control plane's; a unit
test gives it a fake API and a fake clock and runs its settle and clock logic in milliseconds.
"""
from __future__ import annotations

import contextlib
import http.client
import math
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from dataclasses import replace as _replace

from courselib.errors import CourseError
from courselib.live.kube.api import Api, ApiError
from courselib.live.kube.cluster import ControlPlane, KUBERNETES_VERSION, NAMESPACE, reshape
from courselib.live.kube.extension import AllHooks, ReplayRun
from courselib.live.kube.plan import (IMAGE, REPLAY_LABEL, ReplayPlan, job_manifest, pod_group_manifest,
                                      preempts, priority_class_manifest)
from courselib.live.kube.queue import pod_group_cycles
from courselib.live.kube.watch import job_of, metrics, pending_message, phase
from courselib.live.replays import JobsResult
from courselib.units import format_duration as _fmt

QUIET = 1.0  # s without any change before the control plane counts as settled
#: With native gang scheduling: how long a quiet control plane is watched for a waiting PodGroup's
#: retry before its failure counts as final (it is retried from the backoff queue, v1.37).
GANG_PATIENCE = 30.0
#: How long the Job controller may take to create the first pod of a submitted Job.
NO_PODS_PATIENCE = 180.0
#: A Job with no pod after this many seconds is touched so that its controller syncs it (at most
#: MAX_NUDGES times, NUDGE_AFTER seconds apart).
NUDGE_AFTER, MAX_NUDGES = 20.0, 4


class Clock:
    """The driver's real time: deadlines and quiet periods (``monotonic``), polling (``sleep``), and
    the replay's ID and date (``wall``). A unit test gives the driver a clock that only counts."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wall(self) -> float:
        return time.time()


REAL_CLOCK = Clock()


class FakeKubelet:
    """The kubelet's part, for status only (as KWOK does): a bound pod runs; a finished job's pods
    succeed. Nothing runs: the pods' containers are never started."""

    def __init__(self, api):
        self.api = api
        self.marked_running: set[str] = set()
        self.marked_done: set[str] = set()

    @staticmethod
    def _now() -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def _patch_status(self, name: str, status: dict) -> None:
        self.api.patch_status(name, status)

    def run_bound(self, pods: dict[str, dict]) -> int:
        """Mark every newly bound, still pending pod Running and Ready; how many. The requests go out
        in parallel, as the kubelets of as many nodes would send them (a 512-pod gang bound at once
        is 512 status writes)."""
        todo = [name for name, pod in pods.items()
                if name not in self.marked_running and pod.get("spec", {}).get("nodeName")
                and not pod["metadata"].get("deletionTimestamp") and phase(pod) == "Pending"]
        if not todo:
            return 0
        now = self._now()
        conds = [{"type": t, "status": "True", "lastTransitionTime": now}
                 for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")]
        status = {"phase": "Running", "startTime": now, "hostIP": "127.0.0.1",
                  "hostIPs": [{"ip": "127.0.0.1"}], "conditions": conds,
                  "containerStatuses": [{"name": "train", "image": IMAGE, "imageID": "", "ready": True,
                                         "started": True, "restartCount": 0,
                                         "state": {"running": {"startedAt": now}}}]}
        self._patch_all(todo, status)
        self.marked_running.update(todo)
        return len(todo)

    def _patch_all(self, names: list[str], status: dict) -> None:
        if len(names) == 1:
            self._patch_status(names[0], status)
            return
        with ThreadPoolExecutor(max_workers=8) as pool:
            for _ in pool.map(lambda n: self._patch_status(n, status), names):
                pass

    def _ended(self, exit_code: int, reason: str) -> dict:
        now = self._now()
        return {"phase": "Failed",
                "conditions": [{"type": t, "status": "False", "reason": "PodFailed", "lastTransitionTime": now}
                               for t in ("Ready", "ContainersReady")],
                "containerStatuses": [{"name": "train", "image": IMAGE, "imageID": "", "ready": False,
                                       "started": False, "restartCount": 0,
                                       "state": {"terminated": {"exitCode": exit_code, "reason": reason,
                                                                "startedAt": now, "finishedAt": now}}}]}

    def terminate(self, pods: dict[str, dict]) -> int:
        """Honour deletions: a running pod that is being deleted (the scheduler preempted it, its
        Job or JobSet is being deleted) ends as a real kubelet ends it — its container killed after
        the grace period (0 s here: SIGKILL, exit 137) and the pod ``Failed`` — so that its Job
        controller counts it and lets it go. How many."""
        n = 0
        for name, pod in pods.items():
            if not pod["metadata"].get("deletionTimestamp") or phase(pod) != "Running" or name in self.marked_done:
                continue
            with contextlib.suppress(ApiError):
                self._patch_status(name, self._ended(137, "Error"))
            self.marked_done.add(name)
            n += 1
        return n

    def fail(self, name: str) -> None:
        """A workload's ``fail`` event: the pod's container exits 1 and the pod ends ``Failed``."""
        self._patch_status(name, self._ended(1, "Error"))
        self.marked_done.add(name)

    def succeed(self, names: list[str]) -> None:
        """The job trained to its end: its pods exit 0 — all at once, as far as HTTP allows (the
        requests go out in parallel), so the scheduler sees the GPUs come back together."""
        now = self._now()
        status = {
            "phase": "Succeeded",
            "conditions": [{"type": t, "status": "False", "reason": "PodCompleted",
                            "lastTransitionTime": now} for t in ("Ready", "ContainersReady")],
            "containerStatuses": [{"name": "train", "image": IMAGE, "imageID": "", "ready": False,
                                   "started": False, "restartCount": 0,
                                   "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                            "startedAt": now, "finishedAt": now}}}]}
        todo = [n for n in names if n not in self.marked_done]
        if todo:
            self._patch_all(todo, status)
        self.marked_done.update(todo)


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
    #: it stopped training because pods were lost (preempted, failed): [(lost at, every pod
    #: running again at or None, pods bound meanwhile at each settle [(t, bound)])]
    losses: list = field(default_factory=list)
    created_real: float | None = field(default=None, repr=False)  # monotonic clock, not recorded


@dataclass
class ReplayResult(JobsResult):
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


def clear(api, timeout: float = 120.0, *, gang: bool = False, clock: "Clock | None" = None) -> None:
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
    clock = clock or REAL_CLOCK
    deadline = clock.monotonic() + timeout
    patience = clock.monotonic() + 2.0
    while True:
        pods = api.list_pods(REPLAY_LABEL).get("items", [])
        jobs = api.raw("GET", jobs_path, query={"labelSelector": REPLAY_LABEL}).get("items", [])
        if not pods and not jobs:
            return
        if clock.monotonic() > patience:
            for pod in pods:
                path = f"{pods_path}/{pod['metadata']['name']}"
                with contextlib.suppress(ApiError):
                    if pod["metadata"].get("finalizers"):
                        api.raw("PATCH", path, {"metadata": {"finalizers": None}},
                                content_type="application/merge-patch+json")
                    if not pod["metadata"].get("deletionTimestamp"):
                        api.delete(path, {"gracePeriodSeconds": "0"})
        if clock.monotonic() > deadline:
            raise CourseError(f"{len(pods)} pods and {len(jobs)} Jobs of an earlier replay are "
                              "still there", hint="run `courselib kube down` and `up` again")
        clock.sleep(0.3)


def run_replay(cp: ControlPlane, plan: ReplayPlan, *, say=lambda msg: None,
               timeout: float | None = None) -> ReplayResult:
    """Submit ``plan`` to the running control plane, advancing the workload's clock as it settles.

    The fake nodes are made the workload's first (they are only objects); the extensions the
    plan's shape names take part through their hooks."""
    missing = [w for w in plan.shape.with_ if w not in cp.shape.with_]
    if missing:
        raise CourseError(f"this replay needs {', '.join(missing)} on the control plane (its workload says "
                          f"so), which runs without",
                          hint=f"`courselib kube up {_replace(cp.shape, with_=tuple(cp.shape.with_) + tuple(missing)).cli_args()}` "
                               "joins it to the running control plane")
    api = Api(cp)
    if not cp.shape.same_nodes(plan.shape):
        clear(api, gang=cp.shape.gang)
        reshape(cp, plan.shape, say=say)
    api = Api(cp)

    def hooks(replay_id: str) -> AllHooks:
        run = ReplayRun(cp, api, plan, replay_id, say)
        # the extensions the plan's shape names, and those it implies (the topology set-up)
        return AllHooks(h for h in (ext.replay(run) for ext in plan.shape.extensions()) if h is not None)
    log = cp.log_files("kube-scheduler")[-1]
    offset = log.stat().st_size if log.exists() else 0
    result = drive(api, plan, hooks=hooks, say=say, timeout=timeout,
                   versions={"kubernetes": KUBERNETES_VERSION, **cp.versions})
    if plan.shape.gang:
        # the order the scheduler tried the PodGroups: nothing else shows it (courselib.live.kube.queue)
        with open(log, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
        result.extra["podgroup_cycles"] = pod_group_cycles(text, NAMESPACE, [j.name for j in plan.workload.jobs])
    return result


def drive(api, plan: ReplayPlan, *, hooks=None, say=lambda msg: None, timeout: float | None = None,
          clock: Clock = REAL_CLOCK, versions: dict | None = None) -> ReplayResult:
    """Run ``plan`` through ``api`` (the real :class:`~courselib.live.kube.api.Api` or a fake with
    the same methods), in virtual time. ``hooks(replay_id)``: the extensions' part
    (:class:`~courselib.live.kube.extension.ReplayHooks`); ``clock``: real time by default."""
    return _Driver(api, plan, hooks, say, timeout, clock, versions or {}).run()


class _Driver:
    """One replay's state while :func:`drive` runs it."""

    def __init__(self, api, plan: ReplayPlan, hooks, say, timeout, clock: Clock, versions: dict):
        self.api, self.plan, self.say, self.clock, self.versions = api, plan, say, clock, versions
        self.gang = plan.shape.gang
        self.replay_id = f"r{int(clock.wall() * 1000) % 10**10}"
        self.hooks = hooks(self.replay_id) if hooks is not None else AllHooks(())
        pods = sum(j.pods for j in plan.workload.jobs)
        self.budget = timeout if timeout is not None else 120.0 + 3.0 * pods / 10
        self.t0 = self.deadline = 0.0
        self.real = {j.name: RealJob(j.name, j.pods) for j in plan.workload.jobs}
        self.durations = {j.name: j.duration for j in plan.workload.jobs}
        self.min_member = {j.name: j.min_member for j in plan.workload.jobs}
        self.watch = api.watch(f"{REPLAY_LABEL}={self.replay_id}")
        self.kubelet = FakeKubelet(api)
        self.batches_done: list[list[str]] = []
        self.settles = 0
        self.ends: dict[str, float] = {}  # job -> virtual end time
        self.submitted: dict[str, float] = {}

    def run(self) -> ReplayResult:
        api, hooks, real = self.api, self.hooks, self.real
        self.hooks.clear()
        clear(api, gang=self.gang, clock=self.clock)
        self.t0 = self.clock.monotonic()
        self.deadline = self.t0 + self.budget
        try:
            hooks.prepare()
            for p, pre in sorted({(j.priority, preempts(j)) for j in self.plan.workload.jobs if j.priority}):
                body = priority_class_manifest(p, self.plan.preemption, pre)
                path = "/apis/scheduling.k8s.io/v1/priorityclasses"
                api.delete(f"{path}/{body['metadata']['name']}")  # its preemptionPolicy is immutable
                api.create(path, body)
            self.watch.start()
            self.watch.wait_ready()
            pending = self.plan.batches()
            fails = sorted((e.at, e.job, e.pod) for e in self.plan.workload.events if hasattr(e, "pod"))
            while True:
                # the next instant: a training's end or a submission, whichever comes first
                t_end = min(self.ends.values(), default=math.inf)
                t_sub = pending[0][0] if pending else math.inf
                # or an extension's timer (Kueue: PodsReady timeout, requeue backoff), first on a tie
                t_ext = hooks.next_event()
                t_fail = fails[0][0] if fails else math.inf
                t = min(t_end, t_sub, t_ext, t_fail)
                if t == math.inf or t > hooks.horizon:
                    break
                if t == t_fail and t < min(t_end, t_sub, t_ext):
                    self.fail(*fails.pop(0))
                    self.observe(self.settle(), t)
                    continue
                if t == t_ext:
                    self.deadline = max(self.deadline, hooks.wait())  # its timer, in real time
                    self.observe(self.settle(), t)
                    continue
                finishing = sorted(n for n, e in self.ends.items() if e == t)
                if finishing:
                    self.finish(finishing, t)
                    self.observe(self.settle(), t)
                if pending and pending[0][0] == t:
                    self.submit(pending.pop(0)[1], t)
                    self.observe(self.settle(), t)
            # the end: nothing can change any more
            _, pods = self.watch.snapshot()
            deadlock = any(rj.start is None and rj.bound_at_end > 0 for rj in real.values())
            if hooks.next_event() < math.inf:
                deadlock = False  # an extension's timer is still to come: not stuck (the horizon)
            created = [job_of(pods[n]) if n in pods else _job_from_pod_name(n, real)
                       for n in self.watch.created]
        finally:
            self.watch.stop()
            with contextlib.suppress(Exception):
                hooks.clear()
                clear(api, gang=self.gang, clock=self.clock)
            hooks.cleanup()
        # pods recreated after preemption come after their batch: keep the first creations per batch
        order = _batch_order(created, self.batches_done, real)
        return ReplayResult(self.plan, [real[j.name] for j in self.plan.workload.jobs], order,
                            self.batches_done, round(self.clock.monotonic() - self.t0, 2), self.settles,
                            deadlock, dict(self.versions),
                            time.strftime("%Y-%m-%d", time.gmtime(self.clock.wall())), hooks.report())

    def fail(self, t: float, name: str, index: int) -> None:
        """A ``fail`` event: pod ``index`` of ``name`` (its completion index) exits 1 — or, if that
        one is not running, the running pod of ``name`` with the lowest index."""
        _, pods = self.watch.snapshot()
        running = sorted((int(p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-completion-index", 0)), n)
                         for n, p in pods.items() if job_of(p) == name and phase(p) == "Running"
                         and not p["metadata"].get("deletionTimestamp"))
        if not running:
            self.say(f"t={_fmt(t)}: {name}: pod {index} would fail, but no pod of it runs: no effect")
            return
        victim = next((n for i, n in running if i == index), running[0][1])
        self.kubelet.fail(victim)
        self.say(f"t={_fmt(t)}: {name}: pod {victim} fails (exit 1)")
        job = next(j for j in self.plan.workload.jobs if j.name == name)
        rj = self.real[name]
        if getattr(job, "kind", "job") == "jobset" and name in self.ends:
            # its controller restarts (or fails) the whole JobSet, perhaps within the next settle:
            # training stops now either way
            del self.ends[name]
            rj.losses.append([t, None, [(t, 0)]])
            rj.state = "RESTARTING"
        if getattr(job, "kind", "job") == "job":
            # a batch/v1 Job with backoffLimit 0: it fails, and its other pods are deleted
            rj = self.real[name]
            rj.end, rj.state, rj.bound_at_end = t, "FAILED", 0
            self.ends.pop(name, None)

    def finish(self, names: list[str], t: float) -> None:
        """The jobs ``names`` trained to their end at ``t``: their pods succeed."""
        _, pods = self.watch.snapshot()
        for name in names:
            self.kubelet.succeed([p for p, pod in pods.items() if job_of(pod) == name
                                  and pod.get("spec", {}).get("nodeName")])
            rj = self.real[name]
            rj.end, rj.state, rj.bound_at_end = t, "COMPLETED", 0
            del self.ends[name]
            self.say(f"t={_fmt(t)}: {name}: trained to its end; its pods succeed")

    def submit(self, batch, t: float) -> None:
        """Create the Jobs (and PodGroups) of the jobs submitted at ``t``."""
        for job in batch:
            if self.gang:
                self.api.create(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups",
                                self.hooks.pod_group(job, pod_group_manifest(job, self.replay_id)))
            body = self.hooks.manifest(job, job_manifest(job, self.plan.workload, self.replay_id,
                                                         gang=self.gang))
            group = "api/v1" if body["apiVersion"] == "v1" else f"apis/{body['apiVersion']}"
            self.api.create(f"/{group}/namespaces/{NAMESPACE}/{body['kind'].lower()}s", body)
            self.submitted[job.name] = t
            self.real[job.name].submitted = t
            self.real[job.name].created_real = self.clock.monotonic()
        self.batches_done.append([j.name for j in batch])
        self.say(f"t={_fmt(t)}: submitted {', '.join(j.name for j in batch)} "
                 f"({sum(j.pods for j in batch)} pods)")

    def observe(self, pods: dict[str, dict], t: float) -> None:
        """What each job holds after the settle at virtual time ``t``; a job whose ``min_member``
        pods are all bound and running has passed its barrier and trains from ``t``."""
        by_job: dict[str, list[dict]] = {}
        for pod in pods.values():
            by_job.setdefault(job_of(pod), []).append(pod)
        for name, rj in self.real.items():
            if name not in self.submitted or rj.end is not None:
                continue
            live = [p for p in by_job.get(name, []) if phase(p) in ("Pending", "Running")
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
            rj.reason = pending_message(waiting[0]) if waiting else None
            if waiting and not rj.describe:
                rj.describe = describe_waiting(self.api, t, min(p["metadata"]["name"] for p in waiting),
                                               name if self.gang else None)
            need = self.min_member[name] or rj.pods
            if rj.start is not None and name in self.ends and len(bound) < need:
                # pods lost while training: the barrier is broken, training stops (what its
                # controller does next — replace one pod, restart the gang, fail — shows in the pods)
                del self.ends[name]
                rj.losses.append([t, None, [(t, len(bound))]])
                rj.state = "RESTARTING"
                self.say(f"t={_fmt(t)}: {name}: {need - len(bound)} of its pods gone; training stops")
            elif rj.losses and rj.losses[-1][1] is None:
                if rj.losses[-1][2][-1][1] != len(bound):
                    rj.losses[-1][2].append((t, len(bound)))
                if len(bound) >= need:
                    rj.losses[-1][1] = t
                    rj.state = "RUNNING"
                    self.ends[name] = t + self.durations[name]   # trains again from its start
                    self.say(f"t={_fmt(t)}: {name}: all {len(bound)} pods back and running after "
                             f"{_fmt(t - rj.losses[-1][0])}; training again for {_fmt(self.durations[name])}")
            if rj.start is None and len(bound) >= need:
                rj.start = t
                rj.state = "RUNNING"
                self.ends[name] = t + self.durations[name]
                self.say(f"t={_fmt(t)}: {name}: all {len(bound)} pods bound and running; the barrier "
                         f"passes, training for {_fmt(self.durations[name])}")
            elif rj.start is None:
                rj.state = "HOLDING" if bound else "PENDING"
        self.hooks.observe(t)

    def settle(self) -> dict[str, dict]:
        """Wait until the control plane has nothing left to do (see the module docstring).

        The extensions add what settled means for them (Kueue: every Workload exists, its scheduler
        has nothing to try, ``idle`` the jobs it keeps suspended).

        With native gang scheduling, a PodGroup that does not fit goes back to the backoff queue and
        is popped again whenever the scheduler is otherwise idle (SchedulerPopFromBackoffQ, on by
        default in v1.37): the backoff queue is never empty while a gang waits, and attempts keep
        counting. There, settled means: nothing in the active queue, no pod created, bound, started,
        ended, deleted or nominated for a quiet period, and since then every waiting gang tried
        again twice over (the scheduler's PodGroup attempts), or GANG_PATIENCE. A failed attempt's
        own write to its pods' PodScheduled condition is not a change: with a topology the
        scheduler words it after whichever placement Go's map order tried first, so the message
        alternates from one attempt to the next, and counting it kept the quiet period from ever
        beginning (a settle of mixed.yaml ran until the replay's deadline)."""
        self.settles += 1
        api, watch, kubelet, real, clock, gang = (self.api, self.watch, self.kubelet, self.real,
                                                  self.clock, self.gang)
        last = None
        since = clock.monotonic()
        group_attempts_at_change = None
        unread = (-1.0, -1.0, -1.0, -1.0)
        scraped = unread   # the scheduler's queue and attempt counts, last read
        while True:
            watch.check()
            dead = api.stopped()
            if dead:
                raise CourseError(f"{', '.join(dead)} of the local control plane stopped during the replay",
                                  hint=f"{api.log_hint()}; `courselib kube down`, then `up`")
            events, pods = watch.snapshot()
            kubelet.run_bound(pods)
            kubelet.terminate(pods)
            counts: dict[str, int] = {}
            unbound_untried = 0
            for pod in pods.values():
                if pod["metadata"].get("deletionTimestamp"):
                    continue
                name = job_of(pod)
                if phase(pod) in ("Pending", "Running"):
                    counts[name] = counts.get(name, 0) + 1
                if not pod.get("spec", {}).get("nodeName") and pending_message(pod) is None:
                    unbound_untried += 1
            ext_fp, ext_calm, idle = self.hooks.settled(pods)
            all_created = all(counts.get(n, 0) == (0 if n in idle else real[n].pods)
                              for n in self.submitted if real[n].end is None)
            _nudge_if_stuck(api, real, self.submitted, counts, idle, clock=clock)
            running_ok = all(n in kubelet.marked_running for n, p in pods.items()
                             if p.get("spec", {}).get("nodeName") and phase(p) == "Pending"
                             and not p["metadata"].get("deletionTimestamp"))
            pods_calm = all_created and running_ok and unbound_untried == 0 and ext_calm
            if pods_calm:
                # Read only once the pods are calm: until then the settle cannot end, and a read (the
                # scheduler renders every metric it has, thousands of lines) every 0.15 s through a Job's
                # pod creation was work for nothing. A change between reads still shows at the next.
                try:
                    scraped = tuple(metrics(
                        api.scheduler_metrics(), ("scheduler_pending_pods", {"queue": "active"}),
                        ("scheduler_pending_pods", {"queue": "backoff"}), ("scheduler_schedule_attempts_total", {}),
                        ("scheduler_podgroup_schedule_attempts_total", {})))
                except (OSError, http.client.HTTPException):  # the scheduler went away mid-answer
                    scraped = unread
            active, backoff, attempts, group_attempts = scraped
            fp = ((_pods_state(pods),) if gang else (events, active, backoff, attempts)) + (ext_fp,)
            calm = pods_calm and active == 0 and (gang or backoff == 0)
            t = clock.monotonic()
            if fp != last:
                last, since = fp, t
                # the attempts counted at the change; a read from before it (pods not calm) is not
                group_attempts_at_change = group_attempts if pods_calm else None
            elif calm and t - since >= QUIET:
                if not gang:
                    return pods
                if group_attempts_at_change is None:    # the first read since the change
                    group_attempts_at_change = group_attempts
                # every gang still waiting has been tried again since the last change, and failed
                waiting = {job_of(p) for p in pods.values() if not p.get("spec", {}).get("nodeName")
                           and phase(p) == "Pending" and not p["metadata"].get("deletionTimestamp")}
                retried = group_attempts - group_attempts_at_change
                if retried >= 2 * len(waiting) or t - since >= GANG_PATIENCE:
                    return pods
            if t > self.deadline or (not counts and any(n not in idle for n in self.submitted)
                                     and t - since > NO_PODS_PATIENCE):
                if not counts:
                    listed = len(api.list_pods(watch.selector).get("items", []))
                    why = (f"no pod of any submitted Job appeared in the watch ({listed} listed by the API "
                           f"server, {watch.restarts} watch restarts, last {watch.last_error or 'none'})")
                else:
                    why = f"pods created per job {counts}, scheduler active {active:g}, backoff {backoff:g}"
                raise CourseError(f"the control plane did not settle in time ({why}; the controller "
                                  f"manager's last error: {api.log_tail('kube-controller-manager') or 'none'})",
                                  hint=api.log_hint())
            clock.sleep(0.15)


def _pods_state(pods: dict[str, dict]) -> int:
    """What a pod change can mean to a gang's placement: which pods exist, where each is bound, its
    phase, whether it is being deleted, the node it is nominated to (preemption); not the words of
    a waiting pod's condition, which each failed attempt may write anew."""
    return hash(frozenset((name, (p.get("spec") or {}).get("nodeName"), phase(p),
                           bool(p["metadata"].get("deletionTimestamp")),
                           (p.get("status") or {}).get("nominatedNodeName")) for name, p in pods.items()))


def describe_waiting(api, t: float, pod: str, pod_group: str | None) -> dict:
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


def _nudge_if_stuck(api, real: dict, submitted: dict, counts: dict, idle=frozenset(), *,
                    clock: "Clock | None" = None) -> None:
    """A Job with no pod NUDGE_AFTER seconds after it was created (or unsuspended) is touched (an
    annotation), so that its controller syncs it at once. Seen under heavy CPU load with Kubernetes
    v1.37.2: a new Job's first syncs fail ("read version … is not as new as written version …", the
    controller's consistency check, pkg/controller/util/consistency) and are retried with a backoff
    that doubles to a minute (job_controller.go DefaultJobApiBackOff, MaxJobApiBackOff). Touching a
    Job changes when it is synced, not what the scheduler decides; the replay reports every nudge."""
    now = (clock or REAL_CLOCK).monotonic()
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
