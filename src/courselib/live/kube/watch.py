"""Watch a replay's objects as the API server delivers them, and read what they say.

:class:`PodWatch` lists, then watches, every object of one replay (its label selector) in a
thread, in the order the API server's watch delivers them — etcd's revision order — so the
creation and binding order of pods is the Job controller's and the scheduler's own. A subclass
keeps another kind (Kueue's Workloads: :mod:`courselib.live.kube.kueue.replay`). The small readers
below (:func:`job_of`, :func:`phase`, :func:`pending_message`, :func:`metric`) are what the driver
and its extensions read from a pod or from a component's metrics.
"""
from __future__ import annotations

import contextlib
import json
import re
import threading

from courselib.errors import CourseError
from courselib.live.kube.cluster import NAMESPACE

JOB_LABEL = "batch.kubernetes.io/job-name"


class PodWatch(threading.Thread):
    """Every pod of one replay as the API server's watch delivers it: creation and binding order."""

    def __init__(self, api, selector: str, path: str | None = None):
        super().__init__(daemon=True, name="courselib-kube-pod-watch")
        self.api, self.selector = api, selector
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
        if self.ident is not None:  # started: a replay whose set-up failed never started its watch,
            self.join(timeout=5)    # and join's RuntimeError would stand in for the set-up's error

    def snapshot(self) -> tuple[int, dict[str, dict]]:
        with self.lock:
            return self.events, dict(self.pods)


def job_of(pod: dict) -> str:
    """The workload job a pod stands for: the replay's own label (a JobSet's child Job has a name
    of its own), else its Job's name."""
    return pod["metadata"].get("labels", {}).get("app.kubernetes.io/name") or \
        pod["metadata"].get("labels", {}).get(JOB_LABEL, "?")


def phase(pod: dict) -> str:
    return pod.get("status", {}).get("phase", "Pending")


def pending_message(pod: dict) -> str | None:
    for c in pod.get("status", {}).get("conditions", []) or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return f"{c.get('reason', '')}: {c.get('message', '')}".strip(": ")
    return None


#: one sample line of the Prometheus text format without a timestamp: name, {labels}, value
_SAMPLE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def metric(text: str, name: str, **labels) -> float:
    """The sum of a Prometheus metric's samples whose labels include ``labels``."""
    return metrics(text, (name, labels))[0]


def metrics(text: str, *queries: tuple[str, dict]) -> list[float]:
    """:func:`metric` for several ``(name, labels)`` queries in one pass over ``text``: a replay's settle
    reads four of the scheduler's metrics several times a second, from a text of thousands of lines."""
    names = tuple({name for name, _ in queries})
    totals = [0.0] * len(queries)
    for line in text.splitlines():
        if not line.startswith(names):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        lab = m.group(2) or ""
        for i, (name, labels) in enumerate(queries):
            if m.group(1) == name and all(f'{k}="{v}"' in lab for k, v in labels.items()):
                totals[i] += float(m.group(3))
    return totals
