"""`courselib classroom k8s-job` on the real control plane with the real Kueue (issue 33): the Indexed Job
and its ConfigMap pass the API server's validation (a strict dry run); Kueue admits the grading Job
within its ClusterQueue's quota; the real kube-scheduler places its pods and the fake kubelet marks them
done (one per submission, by completion index); a second, regrading Job queued meanwhile waits for
quota and is admitted only when the first one has finished. Also the pod KubeSpawner would create for a
student (Zero to JupyterHub), validated by `courselib kube validate` against the same API server.

Runs where the pinned Kubernetes, etcd and Kueue are built (.ci/build.d/10-k8s.sh) on the session's
control plane (tests/live_fixtures.py); skipped with the reason elsewhere."""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from courselib.grading import kubejob
from courselib.live import kube
from courselib.live.kube import api as kapi
from courselib.live.kube import validate as kvalidate
from courselib.live.kube.config import NAMESPACE
from courselib.live.kube.kueue import manager as kueue
from courselib.live.kube.replay import FakeKubelet

pytestmark = [pytest.mark.real, pytest.mark.slow, pytest.mark.live_kube(kueue=True, order=5)]
REASON = kueue.unavailable_reason()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"Kueue on a local control plane not runnable here: {REASON}"))

ROOT = Path(__file__).resolve().parents[1]
LAB = "08-gang-cost"
QUEUE = "grading"
KAPI = "/apis/kueue.x-k8s.io/v1beta2"
LABEL = "courselib-test=classroom"
#: the ClusterQueue's quota: three graders at a time (each pod asks 1 CPU and 2Gi)
QUOTA = {"cpu": "3", "memory": "6Gi"}


def _class(folder: Path, students) -> Path:
    for s in students:
        path = folder / s / "labs" / f"{LAB}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "labs" / f"{LAB}.ipynb", path)
    return folder


def _labelled(doc: dict) -> dict:
    doc["metadata"].setdefault("labels", {})["courselib-test"] = "classroom"
    return doc


def _queue_objects() -> list[tuple[str, dict]]:
    cq = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
        "name": "grading-flavor", "resources": [{"name": k, "nominalQuota": v} for k, v in QUOTA.items()]}]}]}
    return [
        (f"{KAPI}/resourceflavors", {"apiVersion": kueue.KUEUE_API, "kind": "ResourceFlavor",
                                     "metadata": {"name": "grading-flavor"}}),
        (f"{KAPI}/clusterqueues", {"apiVersion": kueue.KUEUE_API, "kind": "ClusterQueue",
                                   "metadata": {"name": QUEUE}, "spec": cq}),
        (f"{KAPI}/namespaces/{NAMESPACE}/localqueues",
         {"apiVersion": kueue.KUEUE_API, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NAMESPACE},
          "spec": {"clusterQueue": QUEUE}}),
        ("/api/v1/persistentvolumes",
         {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "class-submissions"},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "class",
                   "hostPath": {"path": "/srv/class"},
                   "claimRef": {"namespace": NAMESPACE, "name": "class"}}}),
        # The course's control plane runs no PersistentVolume controller: the claim is made bound, as that
        # controller leaves it (kube-scheduler v1.37.2's volume binding reads volumeName and this annotation).
        (f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims",
         {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
          "metadata": {"name": "class", "namespace": NAMESPACE,
                       "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
          "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "class", "volumeName": "class-submissions",
                   "resources": {"requests": {"storage": "1Gi"}}}}),
    ]


def _path(doc: dict) -> str:
    return {"ConfigMap": f"/api/v1/namespaces/{NAMESPACE}/configmaps",
            "Job": f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"}[doc["kind"]]


def _workload(api, job: str) -> dict | None:
    items = api.raw("GET", f"{KAPI}/namespaces/{NAMESPACE}/workloads")["items"]
    return next((w for w in items if any(o.get("name") == job for o in w["metadata"].get("ownerReferences", []))), None)


def _cond(obj: dict | None, kind: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def _pods(api, job: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in api.list_pods(f"job-name={job}")["items"]}


def _job(api, name: str) -> dict:
    return api.raw("GET", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}")


def _wait(what: str, fn, timeout: float = 90.0, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)


def _run_to_the_end(api, kubelet: FakeKubelet, job: str, n: int) -> list[int]:
    """The fake kubelet's part: run each bound pod, then end it with exit 0; the completion indexes done."""
    def step():
        pods = _pods(api, job)
        kubelet.run_bound(pods)
        running = [name for name, p in pods.items() if (p.get("status") or {}).get("phase") == "Running"]
        if running:
            kubelet.succeed(running)
        return _cond(_job(api, job), "Complete").get("status") == "True"
    _wait(f"Job {job} completing", step, timeout=180)
    return sorted(int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
                  for p in _pods(api, job).values())


@pytest.fixture(scope="module")
def plane(live_kube):
    cp = live_kube.up(kube.KubeShape(nodes=2, gpus_per_node=8), kueue=True)
    api = kapi.Api(cp)
    made = []
    try:
        for path, body in _queue_objects():
            api.create(path, _labelled(body))
            made.append((path, body["metadata"]["name"]))
        yield cp, api
    finally:
        for name in ("grade", "regrade"):
            api.delete(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}", {"propagationPolicy": "Background"})
            api.delete(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}-submissions")
        kubelet = FakeKubelet(api)

        def gone():
            pods = {p["metadata"]["name"]: p for p in api.list_pods("app.kubernetes.io/part-of=courselib-grading")["items"]}
            kubelet.terminate(pods)    # a running pod being deleted ends as a kubelet ends it
            return not pods
        _wait("the grading pods gone", gone, timeout=120)
        for path, name in reversed(made):
            api.delete(f"{path}/{name}")
            if "persistentvolume" in path:
                # no PV/PVC protection controller runs on this control plane to lift their finalizers: as it would
                with contextlib.suppress(kapi.ApiError):
                    api.raw("PATCH", f"{path}/{name}", {"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json")


def test_kueue_admits_the_grading_job_within_quota_and_a_regrade_waits(plane, tmp_path):
    cp, api = plane
    folder = _class(tmp_path / "submissions", ["alice", "bob", "carol"])
    first = kubejob.manifests(folder, queue=QUEUE, name="grade", namespace=NAMESPACE, lab=LAB, parallelism=3)
    again = kubejob.manifests(folder, queue=QUEUE, name="regrade", namespace=NAMESPACE, lab=LAB, parallelism=2)
    # the API server's own validation (strict field validation; Kueue's webhooks run too)
    for doc in first + again:
        dry = api.create(_path(doc), doc, dry_run=True)
        assert dry["kind"] == doc["kind"]
    for doc in first:
        api.create(_path(doc), doc)
    wl = _wait("Kueue admitting the grading Job", lambda: _cond(_workload(api, "grade"), "Admitted").get("status") == "True"
               and _workload(api, "grade"))
    assert wl["spec"]["queueName"] == QUEUE
    assert _wait("Kueue unsuspending it", lambda: _job(api, "grade")["spec"].get("suspend") is False)
    assert sum(ps["count"] for ps in wl["spec"]["podSets"]) == 3

    # the regrading Job, queued while the first holds the whole quota, waits
    for doc in again:
        api.create(_path(doc), doc)
    pending = _wait("Kueue deciding on the regrading Job",
                    lambda: (w := _workload(api, "regrade")) and _cond(w, "QuotaReserved").get("status") == "False"
                    and _cond(w, "QuotaReserved").get("message") and w)
    assert _job(api, "regrade")["spec"]["suspend"] is True and not _pods(api, "regrade")
    waiting_message = _cond(pending, "QuotaReserved")["message"]
    assert "insufficient unused quota" in waiting_message, waiting_message

    kubelet = FakeKubelet(api)
    assert _run_to_the_end(api, kubelet, "grade", 3) == [0, 1, 2]      # one pod per submission, by index
    _wait("the first Job's Workload finished", lambda: _cond(_workload(api, "grade"), "Finished").get("status") == "True")
    _wait("Kueue admitting the regrading Job", lambda: _cond(_workload(api, "regrade"), "Admitted").get("status") == "True")
    assert _run_to_the_end(api, kubelet, "regrade", 3) == [0, 1, 2]
    (tmp_path / "waiting.txt").write_text(waiting_message)


def test_the_pod_kubespawner_makes_for_a_student_passes_the_api_server(plane, tmp_path):
    from courselib.live import hub

    if hub.kubespawner_reason():
        pytest.skip(hub.kubespawner_reason())
    out = tmp_path / "pod.yaml"
    r = subprocess.run([sys.executable, "-m", "courselib", "classroom", "hub", "pod", "alice", "--namespace", NAMESPACE,
                        "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    pod = yaml.safe_load(out.read_text())
    assert pod["kind"] == "Pod" and pod["metadata"]["labels"]["hub.jupyter.org/username"] == "alice"
    findings = kvalidate.validate_files(plane[0], [str(out)])
    assert [(f.kind, f.rejected, f.validated) for f in findings] == [("Pod", False, True)], \
        [f.lines() for f in findings]
