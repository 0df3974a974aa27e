"""What a Kubernetes replay submits, checked without a control plane (runs everywhere)."""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.errors import InputError
from courselib.io.workload import load_workload, parse_workload
from courselib.live import kube
from courselib.live.kube import plan as kplan, replay as kreplay
from courselib.sim.gang import simulate

REPO = Path(__file__).resolve().parents[1]


def _wl(text: str):
    from courselib.io.yamlfile import load_all_text
    return parse_workload(load_all_text(text, file="w.yaml")[0], file="w.yaml")


def test_a_job_becomes_an_indexed_batch_job_that_the_api_server_accepts():
    wl = load_workload(REPO / "examples" / "kube" / "constraint.yaml")
    m = kplan.job_manifest(wl.jobs[0], wl, "r1")
    spec = m["spec"]
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (6, 6, "Indexed")
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # a Job's pods may not be Always (validation.go)
    res = pod["containers"][0]["resources"]
    assert res["limits"][kube.GPU] == "8" and res["requests"] == res["limits"]
    # CPU and memory in proportion to GPUs: 1 CPU and 16 GiB a GPU, 1/64 of a fake node each
    assert res["requests"]["cpu"] == "8" and res["requests"]["memory"] == "128Gi"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": kube.FEATURE_PREFIX + "nvlink", "operator": "In", "values": ["true"]}]}]
    assert m["metadata"]["labels"][kplan.REPLAY_LABEL] == "r1"
    import kubernetes_validate
    kubernetes_validate.validate(m, "1.33", strict=True)


def test_an_or_constraint_is_two_node_selector_terms():
    wl = _wl("cluster: {nodes: 2, gpus_per_node: 8, features: {a: '1', b: '2'}}\n"
             "jobs: [{name: j, pods: 1, gpus_per_pod: 8, constraint: 'a|b', duration: 1h}]")
    pod = kplan.job_manifest(wl.jobs[0], wl, "r")["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][0]["key"] for t in terms] == [kube.FEATURE_PREFIX + "a", kube.FEATURE_PREFIX + "b"]


def test_priorities_become_priority_classes_that_never_preempt_unless_asked():
    wl = load_workload(REPO / "examples" / "kube" / "priority.yaml")
    urgent = next(j for j in wl.jobs if j.name == "urgent")
    pod = kplan.job_manifest(urgent, wl, "r")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == kplan.priority_class_name(100)
    assert kplan.priority_class_manifest(100, False)["preemptionPolicy"] == "Never"
    assert kplan.priority_class_manifest(100, True)["preemptionPolicy"] == "PreemptLowerPriority"
    assert kplan.priority_class_name(-5) == "courselib-priority-minus-5"


def test_exclusive_pods_smaller_than_a_node_are_refused_with_the_field():
    wl = _wl("cluster: {nodes: 2, gpus_per_node: 8}\n"
             "jobs: [{name: j, pods: 2, gpus_per_pod: 4, exclusive: true, duration: 1h}]")
    with pytest.raises(InputError, match="exclusive"):
        kplan.plan_replay(wl, file="w.yaml")


def test_the_shape_matches_the_workload_cluster():
    plan = kplan.plan_replay(load_workload(REPO / "examples" / "kube" / "apart.yaml"))
    assert plan.shape.describe() == "8 nodes x 8 GPUs (nvlink on 4 nodes)"
    assert plan.shape.cli_args() == "--nodes 8 --gpus-per-node 8 --features nvlink:4"
    assert plan.policy == "kube-default"


@pytest.mark.parametrize("bad,msg", [(dict(nodes=0), "--nodes"), (dict(gpus_per_node=65), "--gpus-per-node"),
                                     (dict(base_port=80), "--port"), (dict(features=(("a b", None),)), "label")])
def test_bad_shapes_are_one_line_errors(bad, msg):
    with pytest.raises(InputError, match=msg):
        kube.KubeShape(**bad)


def test_the_pinned_versions_are_the_ones_courselib_runs():
    mod = (REPO / "k8s" / "kube" / "go.mod").read_text()
    assert f"k8s.io/kubernetes {kube.KUBERNETES_VERSION}" in mod
    assert f"k8s.io/api => k8s.io/api v0.{kube.KUBERNETES_VERSION.split('.', 1)[1]}" in mod
    assert f"go.etcd.io/etcd/server/v3 {kube.ETCD_VERSION}" in (REPO / "k8s" / "etcd" / "go.mod").read_text()


# ----------------------------------------------------------------------------- recorded pod order

SEED = REPO / "examples" / "workloads" / "seed-600-free-deadlock.yaml"


def test_a_recorded_pod_order_decides_the_split_on_both_paths():
    wl = load_workload(SEED)
    order = ["llm-a"] * 255 + ["llm-b"] * 345 + ["llm-a"] * 257 + ["llm-b"] * 167
    for ref in (False, True):
        res = simulate(wl, "kube-default", reference=ref, pod_order=tuple(order))
        assert res.deadlock
        assert (res.job("llm-a").gpus_held, res.job("llm-b").gpus_held) == (255, 345)
    fast = simulate(wl, "kube-default", pod_order=tuple(order))
    ref = simulate(wl, "kube-default", reference=True, pod_order=tuple(order))
    assert fast.trace == ref.trace


def test_round_robin_is_the_model_s_own_assumption():
    res = simulate(load_workload(SEED), "kube-default")
    assert (res.job("llm-a").gpus_held, res.job("llm-b").gpus_held) == (300, 300)


def test_an_order_where_one_job_comes_first_lets_it_train():
    wl = load_workload(SEED)
    res = simulate(wl, "kube-default", pod_order=tuple(["llm-a"] * 512 + ["llm-b"] * 512))
    assert not res.deadlock and res.job("llm-a").start == 0 and res.job("llm-b").start == 7200


def test_an_order_that_does_not_fit_the_workload_is_refused():
    wl = load_workload(SEED)
    with pytest.raises(ValueError, match="pod_order"):
        simulate(wl, "kube-default", pod_order=tuple(["llm-a"] * 1024))
    with pytest.raises(ValueError, match="too few"):
        simulate(wl, "kube-default", pod_order=tuple(["llm-a"] * 10))


# ----------------------------------------------------------------------------- feature gates

GATES_SNIPPET = '''
var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	GenericWorkload: {
		{Version: version.MustParse("1.35"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.Beta},
	},

	Old: {
		{Version: version.MustParse("1.0"), Default: true, PreRelease: featuregate.GA},
		{Version: version.MustParse("1.33"), Default: false, PreRelease: featuregate.Deprecated, LockToDefault: true},
	},
}
'''


def test_the_spec_in_force_is_the_last_one_not_newer_than_the_binary():
    from courselib.live.kube.gates import parse_feature_gates
    g = parse_feature_gates(GATES_SNIPPET, "1.36")
    assert (g["GenericWorkload"].default, g["GenericWorkload"].stage, g["GenericWorkload"].since) == (False, "ALPHA", "1.35")
    g = parse_feature_gates(GATES_SNIPPET, "1.37")
    assert (g["GenericWorkload"].default, g["GenericWorkload"].stage, g["GenericWorkload"].line) == (True, "BETA", 5)
    assert g["Old"].locked and not g["Old"].default


def test_the_recorded_gates_are_what_the_source_says_where_the_source_is_here():
    from courselib.live.kube import gates as kube_source
    recorded, label = kube_source.feature_gates_or_recorded()
    data = __import__("json").loads((REPO / "src/courselib/data/recorded" / kube_source.RECORDING).read_text())
    assert data["version"] == kube.KUBERNETES_VERSION
    by = {g["name"]: g for g in data["gates"]}
    assert by["GenericWorkload"]["default"] is False and by["GenericWorkload"]["stage"] == "BETA"
    assert by["WorkloadWithJob"]["stage"] == "ALPHA"
    if label is None:  # the module cache is here: the recording must still be true
        assert [g.default for g in recorded] == [by[g.name]["default"] for g in recorded]
        assert [g.line for g in recorded] == [by[g.name]["line"] for g in recorded]


@pytest.mark.skipif(bool(kube.missing_binaries()), reason="the pinned kube-apiserver is not built (make setup-k8s)")
def test_the_source_agrees_with_the_built_binary_s_own_help():
    import re
    import subprocess
    from courselib.live.kube import gates as kube_source
    text = subprocess.run([str(kube.binary("kube-apiserver")), "--help"], capture_output=True, text=True).stdout
    for g in kube_source.feature_gates():
        m = re.search(rf"\b{g.name}=true\|false \((\w+) - default=(true|false)\)", text)
        if m is None:  # GA and locked gates are not listed as options
            assert g.locked, g
            continue
        assert (m.group(1), m.group(2) == "true") == (g.stage, g.default), g


def test_a_job_with_no_pod_is_touched_so_its_controller_syncs_it_and_the_replay_says_so(monkeypatch):
    """The nudge (see kreplay._nudge_if_stuck): only a Job that has had no pod for NUDGE_AFTER
    seconds, not one Kueue keeps suspended or one whose pods exist, at most MAX_NUDGES times."""
    clock = [1000.0]
    monkeypatch.setattr(kreplay.time, "monotonic", lambda: clock[0])
    patched = []

    class FakeApi:
        def raw(self, method, path, body, content_type=None):
            patched.append((method, path.rsplit("/", 1)[-1], body["metadata"]["annotations"]))

    real = {n: kreplay.RealJob(n, 4, submitted=0.0, created_real=1000.0) for n in ("a", "b", "c")}
    submitted = {n: 0.0 for n in real}
    kreplay._nudge_if_stuck(FakeApi(), real, submitted, {"b": 4}, idle=frozenset({"c"}))
    assert patched == []                       # nothing waited long enough yet
    for k in range(1, kreplay.MAX_NUDGES + 3):
        clock[0] += kreplay.NUDGE_AFTER + 1
        kreplay._nudge_if_stuck(FakeApi(), real, submitted, {"b": 4}, idle=frozenset({"c"}))
    assert [p[1] for p in patched] == ["a"] * kreplay.MAX_NUDGES
    assert patched[-1] == ("PATCH", "a", {"courselib/nudge": str(kreplay.MAX_NUDGES)})
    assert (real["a"].nudges, real["b"].nudges, real["c"].nudges) == (kreplay.MAX_NUDGES, 0, 0)
