"""JobSet's part in a replay: a job of ``kind: jobset`` is submitted as a real JobSet, and what the
real JobSet controller did with it (restarts, its final condition) is read back.

The JobSet has one replicated Job (``replicas: 1``) whose child Job runs every rank — the Job the
core would have created, its pod template unchanged (so the pods carry the job's name and the
replay's label) — and ``failurePolicy: {maxRestarts: N, restartStrategy: Recreate}`` when the job
says ``max_restarts: N`` (none: no failure policy, the JobSet fails at the first failed child Job).
``network.enableDNSHostnames`` is off: nothing resolves pod names here.
"""
from __future__ import annotations

import contextlib

from courselib.live.kube.api import ApiError
from courselib.live.kube.cluster import NAMESPACE
from courselib.live.kube.extension import ReplayHooks
from courselib.live.kube.jobset.manager import JOBSET_API, JOBSET_VERSION
from courselib.live.kube.plan import REPLAY_LABEL

PATH = f"/apis/{JOBSET_API}/namespaces/{NAMESPACE}/jobsets"
REPLICATED_JOB = "workers"


def jobset_manifest(job, body: dict) -> dict:
    """The JobSet that stands for ``job``, built around the ``batch/v1`` Job ``body``."""
    spec: dict = {"network": {"enableDNSHostnames": False},
                  "replicatedJobs": [{"name": REPLICATED_JOB, "replicas": 1,
                                      "template": {"metadata": {"labels": dict(body["metadata"]["labels"])},
                                                   "spec": body["spec"]}}]}
    if job.max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": job.max_restarts, "restartStrategy": "Recreate"}
    return {"apiVersion": JOBSET_API, "kind": "JobSet",
            "metadata": {"name": job.name, "namespace": NAMESPACE, "labels": dict(body["metadata"]["labels"])},
            "spec": spec}


class JobSetReplay(ReplayHooks):
    def __init__(self, run):
        super().__init__(run)
        self.kinds = {j.name: j.kind for j in run.plan.workload.jobs}
        self.status: dict[str, dict] = {}

    def manifest(self, job, body: dict) -> dict:
        if self.kinds.get(job.name) != "jobset":
            return body
        return jobset_manifest(job, body)

    def _list(self) -> list[dict]:
        with contextlib.suppress(ApiError):
            return self.run.api.raw("GET", PATH, query={"labelSelector": f"{REPLAY_LABEL}={self.run.replay_id}"}
                                    ).get("items", [])
        return []

    def settled(self, pods):
        """A fingerprint of every JobSet's restarts and conditions; a failed JobSet keeps no pods."""
        items = self._list()
        fp = tuple(sorted((js["metadata"]["name"], (js.get("status") or {}).get("restarts", 0),
                           tuple(sorted((c["type"], c["status"]) for c in (js.get("status") or {})
                                        .get("conditions") or [])))
                          for js in items))
        done = frozenset(js["metadata"]["name"] for js in items
                         if any(c["type"] in ("Failed", "Completed") and c["status"] == "True"
                                for c in (js.get("status") or {}).get("conditions") or []))
        return fp, True, done

    def observe(self, t: float) -> None:
        for js in self._list():
            st = js.get("status") or {}
            failed = next((c for c in st.get("conditions") or [] if c["type"] == "Failed" and c["status"] == "True"),
                          None)
            self.status[js["metadata"]["name"]] = {
                "restarts": st.get("restarts", 0),
                "failed": None if failed is None else {"reason": failed.get("reason"), "at": t},
                **({"failed_at": self.status.get(js["metadata"]["name"], {}).get("failed_at", t)} if failed else {})}

    def report(self) -> dict:
        return {"jobset": JOBSET_VERSION, "jobsets": self.status}

    def clear(self) -> None:
        """Delete JobSets (of any replay) before the core deletes their Jobs and pods, so that no
        JobSet controller creates them again."""
        with contextlib.suppress(ApiError):
            self.run.api.delete(PATH, {"labelSelector": REPLAY_LABEL, "propagationPolicy": "Background"})

    def cleanup(self) -> None:
        self.clear()
