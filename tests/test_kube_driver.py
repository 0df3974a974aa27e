"""The Kubernetes replay driver's settle and clock logic, driven with a fake API client and a fake clock.

The driver (:func:`courselib.live.kube.replay.drive`) is given its API client, its extensions' hooks
and its clock, as httpx is given its transport: here a fake control plane in memory (a Job controller
that creates a Job's pods at once, a first-fit scheduler that runs whenever its metrics are read, no
kubelet) and a clock that only counts. What is checked is the driver's own logic — virtual time from
event to event, the barrier, ends that free GPUs before the next submission, the verdict, the order in
which the named extension points are called — in milliseconds, without a real control plane.
"""
from __future__ import annotations

import itertools
import math
import threading

import pytest

from courselib.live.kube import extension
from courselib.live.kube import plan as kplan
from courselib.live.kube import replay as kreplay
from courselib.live.kube import result as kresult
from courselib.errors import CourseError
from courselib.live.kube.watch import JOB_LABEL
from courselib.model.workload import ClusterSpec, Job, Workload


class FakeClock(kreplay.Clock):
    """Real time that only moves when the driver sleeps."""

    def __init__(self):
        self.t = 1000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.slept += seconds

    def wall(self) -> float:
        return 1.8e9


class FakeWatch:
    def __init__(self, api, selector):
        self.api, self.selector = api, selector
        self.restarts, self.last_error = 0, None

    @property
    def created(self):
        return list(self.api.created)

    def start(self):
        pass

    def wait_ready(self, timeout=30.0):
        pass

    def check(self):
        pass

    def stop(self):
        pass

    def snapshot(self):
        self.api.schedule()      # the scheduler works whether or not the driver reads its metrics
        with self.api.lock:
            return self.api.version, {n: dict(p) for n, p in self.api.pods.items()}


class FakeApi:
    """A control plane in memory: Jobs make their pods at once, in order; a first-fit scheduler binds
    whatever fits whenever the driver looks (its watch, its metrics); a pod's GPUs come back when it succeeds."""

    def __init__(self, nodes: int, gpus_per_node: int):
        self.nodes = {f"node{k}": gpus_per_node for k in range(1, nodes + 1)}
        self.pods: dict[str, dict] = {}
        self.jobs: dict[str, dict] = {}
        self.created: list[str] = []
        self.seen_labels: list = []
        self.version = 0
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._names = itertools.count()

    # ---- the API
    def create(self, path: str, body: dict, **kw):
        self.calls.append(("POST", path))
        if path.endswith("/jobs"):
            name = body["metadata"]["name"]
            self.seen_labels.append(body["metadata"]["labels"].get("example/seen"))
            self.jobs[name] = body
            template = body["spec"]["template"]
            with self.lock:
                for i in range(body["spec"]["parallelism"]):
                    pod = f"{name}-{i}-{next(self._names)}"
                    self.pods[pod] = {"metadata": {"name": pod, "labels": {**template["metadata"]["labels"],
                                                                           JOB_LABEL: name}},
                                      "spec": dict(template["spec"]), "status": {"phase": "Pending"}}
                    self.created.append(pod)
                self.version += 1
        return body

    def delete(self, path: str, query=None):
        self.calls.append(("DELETE", path))
        with self.lock:
            if path.endswith("/pods"):
                self.pods.clear()
            elif path.endswith("/jobs"):
                self.jobs.clear()
            self.version += 1

    def raw(self, method: str, path: str, body=None, query=None, **kw):
        self.calls.append((method, path))
        if method == "GET" and path.endswith("/jobs"):
            return {"items": list(self.jobs.values())}
        return {"items": []}

    def list_pods(self, selector=None):
        return {"items": list(self.pods.values())}

    def patch_status(self, name: str, status: dict):
        with self.lock:
            if name in self.pods:
                self.pods[name] = {**self.pods[name], "status": {**self.pods[name]["status"], **status}}
                self.version += 1

    # ---- beside the API
    def stopped(self):
        return []

    def log_tail(self, role):
        return ""

    def log_hint(self):
        return "a fake control plane"

    def watch(self, selector, path=None):
        return FakeWatch(self, selector)

    def free_gpus(self) -> dict[str, int]:
        """Each node's GPUs not held by a bound pending or running pod (call with the lock held)."""
        free = dict(self.nodes)
        for pod in self.pods.values():
            node = pod["spec"].get("nodeName")
            if node and pod["status"]["phase"] in ("Pending", "Running"):
                free[node] -= _gpus(pod)
        return free

    def scheduler_metrics(self) -> str:
        """One more scheduling pass, then the metrics text."""
        self.schedule()
        return ('scheduler_pending_pods{queue="active"} 0\n'
                'scheduler_pending_pods{queue="backoff"} 0\n'
                'scheduler_schedule_attempts_total{result="scheduled"} 1\n')

    def schedule(self) -> None:
        """One first-fit pass over the unbound pods in creation order."""
        with self.lock:
            free = self.free_gpus()
            changed = False
            for name in self.created:
                pod = self.pods.get(name)
                if pod is None or pod["spec"].get("nodeName"):
                    continue
                node = next((n for n, g in free.items() if g >= _gpus(pod)), None)
                if node is not None:
                    free[node] -= _gpus(pod)
                    pod["spec"] = {**pod["spec"], "nodeName": node}
                    pod["status"] = {"phase": "Pending"}
                    changed = True
                elif not pod["status"].get("conditions"):
                    pod["status"] = {"phase": "Pending", "conditions": [
                        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": f"0/{len(self.nodes)} nodes are available: Insufficient nvidia.com/gpu."}]}
                    changed = True
            if changed:
                self.version += 1


def _gpus(pod: dict) -> int:
    return int(pod["spec"]["containers"][0]["resources"]["requests"].get("nvidia.com/gpu", 0))


def _workload(nodes: int, jobs: list[Job]) -> Workload:
    return Workload(ClusterSpec(nodes=nodes, gpus_per_node=8), jobs)


def _drive(workload: Workload, **kw):
    plan = kplan.plan_replay(workload)
    api, clock = FakeApi(workload.cluster.nodes, workload.cluster.gpus_per_node), FakeClock()
    result = kreplay.drive(api, plan, clock=clock, versions={"kubernetes": "fake"}, **kw)
    return result, api, clock


def test_a_job_that_does_not_fit_waits_holding_nothing_and_starts_when_the_first_ends():
    wl = _workload(2, [Job("a", 2, 8, duration=3600.0), Job("b", 2, 8, duration=3600.0)])
    result, api, clock = _drive(wl)
    a, b = result.job("a"), result.job("b")
    assert (a.start, a.end, b.start, b.end) == (0.0, 3600.0, 3600.0, 7200.0)
    assert b.timeline[0] == (0.0, 0)  # it waited holding no GPU
    assert result.pod_order == ["a", "a", "b", "b"] and result.batches == [["a", "b"]]
    assert not result.deadlock and result.start_order() == ["a", "b"]
    assert result.versions == {"kubernetes": "fake"} and result.recorded_at == "2027-01-15"
    # two hours of the workload cost seconds of (fake) real time: one quiet period per settle
    assert result.settles == 3 and clock.slept < 10 * result.settles
    c = kresult.compare(result, name="fake")
    assert c.agreement == 1.0, kresult.format_comparison(c)


def test_pods_held_by_a_gang_that_can_never_complete_are_a_deadlock():
    wl = _workload(2, [Job("big", 3, 8, duration=600.0)])
    result, _, _ = _drive(wl)
    big = result.job("big")
    assert big.start is None and big.bound_at_end == 2 and big.state == "HOLDING"
    assert big.reason.startswith("Unschedulable: 0/2 nodes")
    assert result.deadlock
    c = kresult.compare(result)
    assert c.real_deadlock and c.model_deadlock and c.agreement == 1.0


def test_the_scheduler_s_metrics_are_read_only_once_the_pods_are_calm():
    """The settle reads kube-scheduler's metrics (it renders thousands of lines each time) only when
    nothing is left to bind or mark: while a Job's pods are still unbound and untried it cannot end, and a
    read every 0.15 s there was work for the real scheduler for nothing."""
    class SlowScheduler(FakeApi):
        looks = 0
        early_reads = 0

        def schedule(self):
            self.looks += 1
            if self.looks > 20:                 # the pods wait untried for the first 20 looks
                super().schedule()

        def scheduler_metrics(self):
            if any(not p["spec"].get("nodeName") and not p["status"].get("conditions")
                   for p in self.pods.values()):
                self.early_reads += 1
            return super().scheduler_metrics()
    plan = kplan.plan_replay(_workload(1, [Job("a", 1, 8, duration=60.0)]))
    api = SlowScheduler(1, 8)
    result = kreplay.drive(api, plan, clock=FakeClock(), versions={"kubernetes": "fake"})
    assert result.job("a").start == 0.0 and api.looks > 20
    assert api.early_reads == 0, api.early_reads


def test_a_later_submission_waits_for_its_instant_and_ends_come_first():
    wl = _workload(1, [Job("a", 1, 8, duration=600.0), Job("b", 1, 8, duration=60.0, submit=600.0)])
    result, api, _ = _drive(wl)
    # at t=600 `a` ends first and its GPUs come back, then `b` is submitted and starts at once
    assert (result.job("a").end, result.job("b").submitted, result.job("b").start) == (600.0, 600.0, 600.0)
    assert result.batches == [["a"], ["b"]]
    posts = [p for m, p in api.calls if m == "POST"]
    assert [p.rsplit("/", 1)[-1] for p in posts] == ["jobs", "jobs"]


def test_the_driver_times_out_in_one_line_instead_of_hanging():
    class Stuck(FakeApi):
        def scheduler_metrics(self):
            self.version += 1  # something changes all the time: never settles
            return 'scheduler_pending_pods{queue="active"} 1\n'
    plan = kplan.plan_replay(_workload(1, [Job("a", 1, 8, duration=60.0)]))
    with pytest.raises(kreplay.CourseError, match="did not settle in time"):
        kreplay.drive(Stuck(1, 8), plan, clock=FakeClock(), timeout=30)


class GangApi(FakeApi):
    """Native gang scheduling in memory: a job's pods are bound all together or not at all; each
    failed PodGroup attempt (one per pass: each look at the watch, each metrics read) writes its pods'
    condition anew, in words that alternate between two placements as the real scheduler's do (Go's
    map order)."""

    def __init__(self, nodes: int, gpus_per_node: int):
        super().__init__(nodes, gpus_per_node)
        self.group_attempts = 0

    def scheduler_metrics(self) -> str:
        self.schedule()
        return ('scheduler_pending_pods{queue="active"} 0\n'
                'scheduler_pending_pods{queue="backoff"} 0\n'
                f'scheduler_podgroup_schedule_attempts_total{{result="unschedulable"}} {self.group_attempts}\n')

    def schedule(self) -> None:
        with self.lock:
            free = self.free_gpus()
            for job in dict.fromkeys(p["metadata"]["labels"][JOB_LABEL] for p in self.pods.values()):
                waiting = [n for n in self.created if n in self.pods and not self.pods[n]["spec"].get("nodeName")
                           and self.pods[n]["metadata"]["labels"][JOB_LABEL] == job]
                if not waiting:
                    continue
                trial, placed = dict(free), {}
                for name in waiting:
                    node = next((n for n, g in trial.items() if g >= _gpus(self.pods[name])), None)
                    if node is None:
                        break
                    trial[node] -= _gpus(self.pods[name])
                    placed[name] = node
                self.group_attempts += 1
                if len(placed) == len(waiting):
                    free = trial
                    for name, node in placed.items():
                        self.pods[name] = {**self.pods[name], "spec": {**self.pods[name]["spec"], "nodeName": node}}
                else:
                    for name in waiting:
                        self.pods[name] = {**self.pods[name], "status": {"phase": "Pending", "conditions": [
                            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                             "message": f"0/{1 + self.group_attempts % 2} placements are available"}]}}
                self.version += 1


def test_a_waiting_gang_settles_though_each_attempt_rewords_its_pods_condition():
    """A failed attempt's new words on a waiting pod are not a change of the control plane: the settle
    ends once the waiting gang has been tried again, not at the replay's deadline (the old fingerprint
    counted every watch event and ran mixed.yaml's real replay into it)."""
    wl = Workload(ClusterSpec(nodes=2, gpus_per_node=8),
                  [Job("a", 2, 8, duration=3600.0), Job("b", 2, 8, duration=600.0)])
    plan = kplan.plan_replay(wl, gang=True)
    api, clock = GangApi(2, 8), FakeClock()
    result = kreplay.drive(api, plan, clock=clock, versions={"kubernetes": "fake"}, timeout=60)
    a, b = result.job("a"), result.job("b")
    assert (a.start, a.end, b.start) == (0.0, 3600.0, 3600.0)
    assert b.timeline[0] == (0.0, 0)  # it waited holding nothing
    assert result.settles == 3 and clock.slept < 5 * result.settles


class Recording(extension.ReplayHooks):
    """An extension that takes part at every point and writes down the order it was called in."""

    def __init__(self, run, log):
        super().__init__(run)
        self.log, self.fired = log, False

    def prepare(self):
        self.log.append("prepare")

    def manifest(self, job, body):
        self.log.append(f"manifest {job.name}")
        body["metadata"]["labels"]["example/seen"] = "yes"
        return body

    def settled(self, pods):
        if not self.log or self.log[-1] != "settled":
            self.log.append("settled")
        return (), True, frozenset()

    def observe(self, t):
        self.log.append(f"observe {t:g}")

    def next_event(self):
        return math.inf if self.fired else 300.0

    def wait(self):
        self.fired = True
        self.log.append("wait")
        return self.run.api_deadline

    def report(self):
        self.log.append("report")
        return {"example": {"replay_id": self.run.replay_id}}

    def cleanup(self):
        self.log.append("cleanup")


def test_an_extension_takes_part_at_the_named_points_in_order():
    log: list[str] = []
    wl = _workload(1, [Job("a", 1, 8, duration=600.0)])
    plan = kplan.plan_replay(wl)
    api, clock = FakeApi(1, 8), FakeClock()

    def hooks(replay_id):
        run = extension.ReplayRun(None, api, plan, replay_id, lambda m: None)
        run.api_deadline = clock.t + 120
        return extension.AllHooks([Recording(run, log)])
    result = kreplay.drive(api, plan, hooks=hooks, clock=clock)
    assert log == ["prepare", "manifest a", "settled", "observe 0", "wait", "settled", "observe 300",
                   "settled", "observe 600", "cleanup", "report"]
    assert result.extra["example"]["replay_id"].startswith("r")
    assert api.seen_labels == ["yes"]  # the Job went to the API server as the extension left it
    assert result.job("a").end == 600.0  # the timer at 300 s moved the clock, the end came after


def test_the_replay_driver_imports_no_extension():
    """The core of the kube package names no plugin: extensions come in through the registry."""
    import ast
    from pathlib import Path
    core = Path(kreplay.__file__).parent
    for name in ("cluster.py", "api.py", "plan.py", "watch.py", "replay.py", "result.py", "extension.py"):
        tree = ast.parse((core / name).read_text())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | \
               {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not [m for m in mods if m.startswith("courselib.live.kube.kueue")
                    or m == "courselib.live.kube.plugins"], (name, mods)


def test_a_failed_pod_ends_a_batch_job_and_the_comparison_counts_it():
    """A workload's `fail` event: the pod exits 1; a batch Job (backoffLimit 0) fails — as the model says."""
    from courselib.model.workload import Fail
    wl = Workload(ClusterSpec(nodes=2, gpus_per_node=8), [Job("a", 2, 8, duration=3600.0)],
                  events=[Fail(600.0, "a", 1)])
    result, api, clock = _drive(wl)
    a = result.job("a")
    assert (a.start, a.state, a.end) == (0.0, "FAILED", 600.0)
    c = kresult.compare(result, name="fake")
    (row,) = c.jobs
    assert row.losses_compared and row.real_failed == row.model_failed == "BackoffLimitExceeded"
    assert c.agreement == 1.0, kresult.format_comparison(c)


SCHEDULER_TEXT = """# HELP scheduler_pending_pods [STABLE] Number of pending pods, by the queue type.
# TYPE scheduler_pending_pods gauge
scheduler_pending_pods{queue="active"} 3
scheduler_pending_pods{queue="backoff"} 2
scheduler_pending_pods{queue="gated"} 7
scheduler_pending_pods_total 99
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 40
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 5
scheduler_podgroup_schedule_attempts_total{result="unschedulable"} 4
scheduler_schedule_attempts_total_bucket{le="1"} 1000
"""


def test_several_metrics_are_read_in_one_pass_as_each_alone():
    """The settle loop reads four of the scheduler's metrics in one pass: the same sums as one at a time,
    a name's longer namesakes (``…_total``, ``…_bucket``) not counted, a metric that is absent 0."""
    from courselib.live.kube.watch import metric, metrics
    queries = [("scheduler_pending_pods", {"queue": "active"}), ("scheduler_pending_pods", {"queue": "backoff"}),
               ("scheduler_schedule_attempts_total", {}), ("scheduler_podgroup_schedule_attempts_total", {}),
               ("scheduler_pending_pods", {}), ("kueue_pending_workloads", {"status": "active"})]
    assert metrics(SCHEDULER_TEXT, *queries) == [3.0, 2.0, 45.0, 4.0, 12.0, 0.0]
    assert [metric(SCHEDULER_TEXT, name, **labels) for name, labels in queries] == [3.0, 2.0, 45.0, 4.0, 12.0, 0.0]


class RealWatchApi(FakeApi):
    """:class:`FakeApi` with the real :class:`PodWatch` (never started here: set-up fails first)."""

    def watch(self, selector, path=None):
        from courselib.live.kube.watch import PodWatch
        return PodWatch(self, selector, path)


class FailingPrepare(extension.ReplayHooks):
    def prepare(self):
        raise CourseError("Kueue's queues of an earlier replay are still there after 60 s")

    def cleanup(self):
        self.run.api.cleaned = True


def test_a_set_up_that_fails_is_the_error_the_reader_sees():
    """A set-up that fails before the watch starts: its own error, not the watch's join's RuntimeError
    ('cannot join thread before it is started' hid the real cause of a kueue lane's failure, CI of fd1ffd1),
    and the extension's cleanup still runs."""
    wl = _workload(1, [Job("a", 1, 8, duration=600.0)])
    plan = kplan.plan_replay(wl)
    api, clock = RealWatchApi(1, 8), FakeClock()

    def hooks(replay_id):
        return extension.AllHooks([FailingPrepare(extension.ReplayRun(None, api, plan, replay_id, lambda m: None))])
    with pytest.raises(CourseError, match="still there after 60 s"):
        kreplay.drive(api, plan, hooks=hooks, clock=clock)
    assert api.cleaned
