"""Kueue on the local control plane and its model, checked without a control plane (runs everywhere;
the manifest checks need Kueue's manifests, which `make setup-k8s` copies next to its binary)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from courselib.errors import InputError
from courselib.io.workload import load_workload, parse_workload
from courselib.live import kube
from courselib.live.daemons import System
from courselib.live.kube.kueue import manager as kueue
from courselib.live.kube import plan as kplan
from courselib.live.kube.kueue import replay as kueue_replay
from courselib.sim.gang import simulate

REPO = Path(__file__).resolve().parents[1]
KUEUE = REPO / "examples" / "kueue"
SEED = REPO / "examples" / "workloads"


def _wl(text: str):
    from courselib.io.yamlfile import load_all_text
    return parse_workload(load_all_text(text, file="w.yaml")[0], file="w.yaml")


# ----------------------------------------------------------------------------- the model

@pytest.mark.parametrize("reference", [False, True])
def test_a_workload_evicted_by_its_pods_ready_timeout_queues_behind_those_created_before(reference):
    """requeuingStrategy.timestamp Eviction (v1beta2 default): the queue-order timestamp of a
    workload evicted by PodsReadyTimeout is its eviction time (Kueue v0.17.1
    pkg/workload/workload.go GetQueueOrderTimestamp). The real Kueue admits `mid` before `big`
    (tests/test_kueue_live.py); before this the model admitted `big`, submitted first."""
    wl = load_workload(KUEUE / "requeue-order.yaml")
    r = simulate(wl, "kueue", reference=reference)
    assert (r.job("mid").start, r.job("big").start) == (3600, 7200)
    assert r.job("big").evictions == 1
    old = simulate(wl, "kueue", requeuing_timestamp="Creation", reference=reference)
    assert (old.job("big").start, old.job("mid").start) == (3600, 7200)


@pytest.mark.parametrize("reference", [False, True])
def test_workloads_created_together_are_admitted_in_the_order_kueue_drew(reference):
    """Equal priority and timestamp: Kueue breaks the tie by the Workloads' UIDs (random;
    cluster_queue.go baseCompareFunc). queue_order is that order, recorded from a real run."""
    wl = load_workload(SEED / "seed-600-free-deadlock.yaml")
    assert simulate(wl, "kueue", reference=reference).job("llm-a").start == 0
    r = simulate(wl, "kueue", queue_order=("llm-b", "llm-a"), reference=reference)
    assert (r.job("llm-b").start, r.job("llm-a").start) == (0, 7200)


def test_the_requeue_order_option_is_checked():
    with pytest.raises(ValueError, match="Eviction or Creation"):
        simulate(load_workload(KUEUE / "backoff.yaml"), "kueue", requeuing_timestamp="Later")


def test_backoff_doubles_and_a_limit_deactivates():
    wl = load_workload(KUEUE / "backoff.yaml")
    r = simulate(wl, "kueue")
    assert r.job("big").evictions == 2 and r.job("big").start == 70 * 60
    limited = simulate(wl, "kueue", backoff_limit=1)
    assert limited.job("big").start is None
    assert limited.job("big").pending_reason.startswith("Deactivated")


# ----------------------------------------------------------------------------- the manager

def test_pods_ready_settings_are_whole_seconds_and_become_kueue_config():
    with pytest.raises(InputError, match="timeout"):
        kueue.PodsReady(timeout=0)
    with pytest.raises(InputError, match="backoff limit"):
        kueue.PodsReady(backoff_limit=-1)
    cfg = kueue.PodsReady(timeout=30, backoff_base=5, backoff_max=300, backoff_limit=2).to_config()
    assert cfg == {"timeout": "30s", "blockAdmission": False, "requeuingStrategy": {
        "timestamp": "Eviction", "backoffBaseSeconds": 5, "backoffMaxSeconds": 300,
        "backoffLimitCount": 2}}
    assert kueue.PodsReady(enabled=False).to_config() is None


def test_the_manager_listens_on_loopback_only_on_the_extra_ports(tmp_path):
    cp = kube.ControlPlane(kube.KubeShape(nodes=2, base_port=18700), tmp_path, "t")
    cfg = kueue.manager_config(cp, kueue.PodsReady())
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:18706"
    assert cfg["metrics"]["bindAddress"] == "127.0.0.1:18707"
    assert (cfg["webhook"]["host"], cfg["webhook"]["port"]) == ("127.0.0.1", 18705)
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["featureGates"] == {"VisibilityOnDemand": False}  # it would listen everywhere
    assert cfg["waitForPodsReady"]["timeout"] == "20s"  # v1beta2: no default in v0.17
    assert "waitForPodsReady" not in kueue.manager_config(cp, kueue.PodsReady(enabled=False))


def test_the_pinned_kueue_is_the_one_courselib_runs():
    mod = (REPO / "k8s" / "kueue" / "go.mod").read_text()
    assert f"sigs.k8s.io/kueue {kueue.KUEUE_VERSION}" in mod
    assert "tool sigs.k8s.io/kueue/cmd/kueue" in mod


BUILT = kueue.manifests() / "crd" / "kustomization.yaml"
needs_manifests = pytest.mark.skipif(not BUILT.is_file(),
                                     reason=f"Kueue's manifests are not built ({BUILT}; make setup-k8s)")


@needs_manifests
def test_kueues_own_crds_get_its_conversion_webhook_at_our_port():
    crds = {c["metadata"]["name"]: c for c in kueue.crds(18705)}
    assert {"workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
            "localqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io"} <= set(crds)
    # the five the kustomization patches (resourceflavors' patch is commented out upstream)
    converted = sorted(n for n, c in crds.items() if c["spec"].get("conversion", {}).get("strategy") == "Webhook")
    assert converted == ["clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io",
                         "localqueues.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io",
                         "workloads.kueue.x-k8s.io"]
    ref = crds["workloads.kueue.x-k8s.io"]["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
    assert ref == {"name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/convert",
                   "port": 18705}


@needs_manifests
def test_kueues_own_webhooks_are_renamed_pointed_at_our_port_and_patched():
    hooks = {h["metadata"]["name"]: h for h in kueue.webhook_configurations(18705)}
    assert set(hooks) == {"kueue-mutating-webhook-configuration",
                          "kueue-validating-webhook-configuration"}
    mut = {w["name"]: w for w in hooks["kueue-mutating-webhook-configuration"]["webhooks"]}
    job = mut["mjob.kb.io"]
    assert job["clientConfig"]["service"] == {"name": "kueue-webhook-service", "namespace": "kueue-system",
                                              "path": "/mutate-batch-v1-job", "port": 18705}
    assert job["failurePolicy"] == "Fail"
    # the kustomization's patch keeps the pod webhook away from kube-system and kueue-system
    sel = mut["mpod.kb.io"]["namespaceSelector"]["matchExpressions"][0]
    assert sel["operator"] == "NotIn" and set(sel["values"]) == {"kube-system", "kueue-system"}
    svc = kueue.service_manifest()
    assert svc["spec"] == {"type": "ExternalName", "externalName": "localhost"}


# ----------------------------------------------------------------------------- the replay plan

def test_a_kueue_replay_plans_the_manager_and_the_model_together():
    plan = kplan.plan_replay(load_workload(SEED / "kueue-quota-not-placement.yaml"), policy="kueue")
    assert plan.policy == "kueue" and plan.shape.with_ == ("kueue",)
    assert plan.shape.cli_args() == "--nodes 4 --gpus-per-node 8 --with kueue"
    assert any("timeout 20 s" in n and "30m" in n for n in plan.notes)
    model = kueue_replay.model_policy(plan.workload, dict(plan.options))
    real = kueue_replay.real_settings(model)
    # backoff cap in the model's own ratio (3600/60) to the base
    assert (real.timeout, real.backoff_base, real.backoff_max) == (20, 10, 600)
    opts = {"backoff_limit": 1, "block_admission": True}
    real = kueue_replay.real_settings(kueue_replay.model_policy(plan.workload, opts))
    assert (real.backoff_limit, real.block_admission) == (1, True)


def test_the_stand_in_timeout_grows_with_the_largest_job():
    """512 pods take longer than 20 s to exist (the Job controller's 20 requests/s)."""
    assert kueue_replay.real_timeout(load_workload(SEED / "kueue-quota-not-placement.yaml")) == 20
    assert kueue_replay.real_timeout(load_workload(SEED / "seed-600-free-deadlock.yaml")) == 148


def test_unknown_model_options_are_located_errors():
    wl = load_workload(KUEUE / "backoff.yaml")
    with pytest.raises(InputError, match="--set"):
        kplan.plan_replay(wl, policy="kueue", options={"overcommit_factor": 1.2})
    with pytest.raises(InputError, match="Eviction or Creation|a Kueue replay takes"):
        kplan.plan_replay(wl, policy="kueue", options={"requeuing_timestamp": "x"})
    with pytest.raises(InputError, match="only a --policy kueue"):
        kplan.plan_replay(wl, options={"timeout": 60})


def test_queues_become_cluster_queues_in_a_cohort_with_local_queues():
    wl = load_workload(KUEUE / "cohort-borrow.yaml")
    plan = kplan.plan_replay(wl, policy="kueue")
    objs = kueue_replay.queue_objects(wl, plan.shape, "r1")
    kinds = [b["kind"] for _, b in objs]
    assert kinds == ["ResourceFlavor", "ClusterQueue", "LocalQueue", "ClusterQueue", "LocalQueue"]
    cq = objs[1][1]
    assert cq["metadata"]["name"] == "team-a" and cq["spec"]["cohortName"] == "all"
    res = {r["name"]: r for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert res[kube.GPU]["nominalQuota"] == "16"
    # CPU and memory: the whole cluster, so only GPUs ever bind
    assert (res["cpu"]["nominalQuota"], res["memory"]["nominalQuota"]) == ("256", "4096Gi")
    assert objs[2][1]["spec"] == {"clusterQueue": "team-a"}
    assert all(b["metadata"]["labels"][kplan.REPLAY_LABEL] == "r1" for _, b in objs)
    job = kplan.job_manifest(wl.jobs[0], wl, "r1")
    ext = kueue_replay.KueueReplay.__new__(kueue_replay.KueueReplay)
    ext.submitted = []
    body = ext.manifest(wl.jobs[0], job)
    assert body["metadata"]["labels"][kueue.QUEUE_LABEL] == "team-a"
    assert "suspend" not in body["spec"]  # Kueue's webhook suspends it


def test_the_cli_refuses_a_bad_option_in_one_line_before_touching_anything(tmp_path):
    env = {"COURSELIB_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    tmp_path.chmod(0o700)
    res = subprocess.run([sys.executable, "-m", "courselib", "kube", "replay",
                          str(KUEUE / "backoff.yaml"), "--policy", "kueue", "--set", "bogus=1"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "bogus" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_the_cohort_limit_workloads_are_chapter_6as_cases_and_reach_kueue_as_its_limits():
    """examples/kueue/cohort-{borrowing,lending}-limit.yaml are the chapter's two limit cases
    (cohort-borrow.yaml with one limit added; test_book_facts reads the page), replayed against the
    real Kueue in tests/test_kueue_live.py AGREE: each limit must reach the ClusterQueue as Kueue spells it."""
    from dataclasses import replace
    base = load_workload(KUEUE / "cohort-borrow.yaml")
    cases = {"cohort-borrowing-limit.yaml": ("team-a", "borrowingLimit", {"borrowing_limit": 8}),
             "cohort-lending-limit.yaml": ("team-b", "lendingLimit", {"lending_limit": 0})}
    for name, (queue, field, limit) in cases.items():
        wl = load_workload(KUEUE / name)
        assert wl.queues == tuple(replace(q, **limit) if q.name == queue else q for q in base.queues)
        assert (wl.cluster, wl.jobs) == (base.cluster, base.jobs)
        plan = kplan.plan_replay(wl, policy="kueue")
        cqs = {b["metadata"]["name"]: b for _, b in kueue_replay.queue_objects(wl, plan.shape, "r1")
               if b["kind"] == "ClusterQueue"}
        for cq in cqs.values():
            gpu = next(r for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
                       if r["name"] == kube.GPU)
            want = {field: str(next(iter(limit.values())))} if cq["metadata"]["name"] == queue else {}
            assert {k: v for k, v in gpu.items() if k.endswith("Limit")} == want, cq
        # the limit changes the model's run, as the chapter says
        starts = {j.name: j.start for j in simulate(wl, "kueue", horizon=4 * 3600).jobs}
        assert starts != {j.name: j.start for j in simulate(base, "kueue", horizon=4 * 3600).jobs}


# ----------------------------------------------------------------------------- leftovers of a replay

class _Plane(System):
    """What a replay's clean-up uses of a control plane: its state directory and ``wait_for``."""

    def __init__(self, tmp_path):
        self.state_dir, self.procs = tmp_path, []


class _LateTopologyApi:
    """Kueue's queue objects after a replay, one of them stuck as v0.17.1 can leave it: a Topology
    deleting, its finalizer kept because its flavor was still in the TAS cache when its controller
    looked (topology_controller.go L109-119), and nothing left to make it look again. Its controller
    looks on an update (L150-151): a PATCH of the deleting object lets it go."""

    def __init__(self, reconcile_on_update: bool = True):
        self.topo = f"/apis/{kueue.KUEUE_API}/topologies"
        meta = {"name": "default", "deletionTimestamp": "2026-12-06T17:00:00Z",
                "finalizers": ["kueue.x-k8s.io/resource-in-use"]}
        self.items = {self.topo: [{"kind": "Topology", "metadata": meta}]}
        self.reconcile_on_update, self.patches = reconcile_on_update, []

    def delete(self, path, query=None):
        pass

    def raw(self, method, path, body=None, *, query=None, content_type=None):
        if method == "GET":
            return {"items": list(self.items.get(path, []))}
        assert method == "PATCH" and path == f"{self.topo}/default", (method, path)
        assert content_type == "application/merge-patch+json" and list(body) == ["metadata"]
        self.patches.append(body)
        if self.reconcile_on_update:
            self.items[self.topo] = []   # the controller looks again: no flavor names it, the finalizer goes
        return {}


def _replay_hooks(api, tmp_path):
    ext = kueue_replay.KueueReplay.__new__(kueue_replay.KueueReplay)
    ext.api, ext.cp, ext.say, ext.nudges = api, _Plane(tmp_path), (lambda m: None), 0
    return ext


def test_a_deleting_queue_object_kueue_forgot_is_touched_until_it_goes(tmp_path):
    """CI of fd1ffd1: after four topology replays every later one failed in its set-up, for a reason the
    watch's join error hid. One way a set-up fails for good is a deleting object Kueue no longer looks at:
    a deleting object still there after a while is touched."""
    api = _LateTopologyApi()
    ext = _replay_hooks(api, tmp_path)
    ext._until_gone([api.topo], {}, "Kueue's queues of an earlier replay", timeout=5.0, every=0.3)
    assert ext.nudges == 1 and api.patches == [
        {"metadata": {"annotations": {kueue_replay.NUDGE_ANNOTATION: "1"}}}]


def test_an_object_that_stays_is_named_with_what_holds_it(tmp_path):
    api = _LateTopologyApi(reconcile_on_update=False)
    ext = _replay_hooks(api, tmp_path)
    with pytest.raises(kueue_replay.CourseError) as err:
        ext._until_gone([api.topo], {}, "Kueue's queues of an earlier replay", timeout=1.0, every=0.3)
    assert str(err.value).startswith(
        "Kueue's queues of an earlier replay still there after 1 s: Topology default (deleting since "
        "2026-12-06T17:00:00Z, finalizers kueue.x-k8s.io/resource-in-use)")
    assert str(tmp_path) in err.value.hint and len(api.patches) >= 2
