"""The JobSet extension's pieces that need no control plane: the JobSet a job becomes, the webhook
configurations built from the module's manifests, the plan's shape, the pinned version (issue 31)."""
import re
from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live.kube import plan as kplan
from courselib.live.kube.jobset import manager
from courselib.live.kube.jobset.replay import jobset_manifest

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "workloads"


def test_the_pinned_version_is_the_go_mod_one():
    mod = (REPO / "k8s" / "jobset" / "go.mod").read_text() + (REPO / "k8s" / "jobset" / "go.sum").read_text()
    assert re.search(rf"sigs\.k8s\.io/jobset {re.escape(manager.JOBSET_VERSION)} ", mod)


def test_a_jobset_job_becomes_a_jobset_around_the_job_the_core_would_create():
    w = load_workload(SEED / "jobset-preempt-one-pod.yaml")
    big, urgent = w.jobs
    body = kplan.job_manifest(big, w, "r1")
    js = jobset_manifest(big, body)
    assert (js["apiVersion"], js["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 2, "restartStrategy": "Recreate"}
    (rj,) = js["spec"]["replicatedJobs"]
    assert rj["replicas"] == 1 and rj["template"]["spec"] == body["spec"]
    assert rj["template"]["spec"]["backoffLimit"] == 0
    assert rj["template"]["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "big"
    # the preempting job: a plain Job with the class that may preempt, and podFailurePolicy
    u = kplan.job_manifest(urgent, w, "r1")
    assert u["spec"]["template"]["spec"]["priorityClassName"] == "courselib-priority-1000-preempt"
    assert kplan.priority_class_manifest(1000, False, True)["preemptionPolicy"] == "PreemptLowerPriority"
    assert kplan.priority_class_manifest(10, False)["preemptionPolicy"] == "Never"
    # no failure policy: the JobSet fails at the first failed child Job
    assert "failurePolicy" not in jobset_manifest(big.__class__(**{**big.__dict__, "max_restarts": None}), body)["spec"]


def test_plans_start_jobset_first():
    w = load_workload(SEED / "jobset-kueue-preempt.yaml")
    assert kplan.plan_replay(w).shape.with_ == ("jobset",)
    assert kplan.plan_replay(w, policy="kueue").shape.with_ == ("jobset", "kueue")
    assert kplan.plan_replay(load_workload(SEED / "seed-400-of-512-25min.yaml")).shape.with_ == ()


def test_disruption_mode_all_reaches_the_pod_group():
    w = load_workload(SEED / "gang-preempt-whole-group.yaml")
    assert kplan.pod_group_manifest(w.jobs[0], "r1")["spec"]["disruptionMode"] == {"all": {}}
    assert "disruptionMode" not in kplan.pod_group_manifest(w.jobs[1], "r1")["spec"]


@pytest.mark.skipif(not (manager.manifests() / "webhook").is_dir(), reason="JobSet is not built (make setup-k8s)")
def test_webhook_configurations_follow_the_kustomization():
    hooks = manager.webhook_configurations(18403, "Q0E=")
    names = sorted(h["metadata"]["name"] for h in hooks)
    assert names == ["jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration"]
    for h in hooks:
        for w in h["webhooks"]:
            assert w["clientConfig"]["service"] == {"name": "jobset-webhook-service", "namespace": "jobset-system",
                                                    "port": 18403, "path": w["clientConfig"]["service"]["path"]}
            assert w["clientConfig"]["caBundle"] == "Q0E="
    pod_hooks = [w for h in hooks for w in h["webhooks"] if w["rules"][0]["resources"] == ["pods"]]
    # the kustomization's JSON patches: the pod webhooks only see pods of a JobSet
    assert pod_hooks and all(w["objectSelector"]["matchExpressions"][0]["key"] == "jobset.sigs.k8s.io/jobset-name"
                             for w in pod_hooks)
    (crd,) = manager.crds()
    assert crd["metadata"]["name"] == "jobsets.jobset.x-k8s.io"
    assert [v["name"] for v in crd["spec"]["versions"] if v.get("served")] == ["v1alpha2"]


def test_the_recorded_seed_story_agrees_with_the_model():
    """The labelled recording of the seed's 512-GPU story on the real JobSet controller (v0.12.0) and
    kube-scheduler (v1.37.2): one pod preempted, the JobSet restarted once, every pod back after 10 min,
    63 of 64 new pods bound meanwhile — and the model agrees on every check."""
    from courselib.live.kube import result as kresult
    rec = kresult.load_recorded("jobset-seed-512")
    res = rec.result
    assert "JobSet v0.12.0" in rec.recorded_on and "Kubernetes v1.37.2" in rec.recorded_on
    assert res.extra["jobsets"]["big"]["restarts"] == 1
    (lost, back, held), = res.job("big").losses
    assert (lost, back) == (1800.0, 2400.0) and [b for _, b in held] == [63, 64]
    c = kresult.compare(res, name="seed-512-preempt-jobset")
    assert c.agreement == 1.0, kresult.format_comparison(c)
