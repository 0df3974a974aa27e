"""Kueue's Topology-Aware Scheduling for real (issue 29): the real Kueue v0.17.1 in front of the real
kube-scheduler v1.37.2, on fake nodes labelled by topology level, must place every topology workload
of examples/topology on the very nodes courselib's `kueue` model names, and say why a job waits in the
model's words.

Each replay: the nodes labelled ``courselib/topology-<level>`` (live/kube/topology), a Kueue
``Topology`` with those labels as its levels, a ResourceFlavor naming it, Jobs with the pod-set
annotations. Checked per job: complete, pods at the end, start order, the verdict, evictions, the
nodes its pods landed on (Kueue assigns them; its TopologyUngater pins each pod to its node, the
real kube-scheduler binds it there) and, for a job that waits, its Workload's QuotaReserved message
beside the model's reason at that moment. Skips with the reason where Kueue is not built.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live.kube import plan as kplan, replay as kreplay, result as kresult
from courselib.live.kube import topology as ktopology
from courselib.live.kube.api import Api
from courselib.live.kube.kueue import manager as kueue
from test_kube_topology import KNOWN_MESSAGE_DIFFERENCES

pytestmark = [pytest.mark.real, pytest.mark.slow, pytest.mark.live_kube(kueue=True)]

REPO = Path(__file__).resolve().parents[1]
TOPOLOGY = REPO / "examples" / "topology"
WORKLOADS = ["fragmentation", "larger-than-domain", "preferred-vs-required", "apart", "blocked-head",
             "mixed", "head-blocked-by-topology"]

REASON = kueue.unavailable_reason()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"Kueue on a local control plane not runnable here: {REASON}"))

@functools.lru_cache(maxsize=None)
def _replay(live_kube, name: str):
    """Replay once per workload (later tests look at the same run): the plane, the run, the comparison."""
    plan = kplan.plan_replay(load_workload(TOPOLOGY / f"{name}.yaml"), policy="kueue")
    cp = live_kube.up(plan.shape, kueue=True)
    result = kreplay.run_replay(cp, plan)
    return cp, result, kresult.compare(result, name=f"{name}.yaml")


@pytest.mark.parametrize("name", WORKLOADS)
def test_real_kueue_places_every_pod_where_the_model_does(live_kube, name):
    _, result, c = _replay(live_kube, name)
    report = kresult.format_comparison(c)
    assert all(r.placement_compared and r.placement_agrees for r in c.jobs), report
    known = {job: text for (rec, job), text in KNOWN_MESSAGE_DIFFERENCES.items() if rec == f"kueue-tas-{name}"}
    for r in c.jobs:
        assert r.real_pending == known[r.name] if r.name in known else r.pending_agrees, report
    assert c.agreed == c.checks - len(known), report
    # Kueue's own topology assignment exists for every job that started (it chose the nodes)
    assert set(result.extra["topology_assignments"]) >= set(result.start_order()), result.extra


def test_the_nodes_carry_their_levels_and_kueue_its_topology(live_kube):
    cp, _, _ = _replay(live_kube, "fragmentation")
    api = Api(cp)
    node = api.raw("GET", "/api/v1/nodes/node9")["metadata"]["labels"]
    assert node["courselib/topology-rack"] == "rack1" and node["courselib/topology-block"] == "block2"
    assert node["kubernetes.io/hostname"] == "node9" and node[ktopology.GPU_NODE_LABEL[0]] == "true"


def test_fragmentation_c_waits_in_kueue_s_words_until_a_rack_frees(live_kube):
    _, result, c = _replay(live_kube, "fragmentation")
    t, message = result.extra["pending"]["c"]
    assert t == 60.0
    assert message == ('couldn\'t assign flavors to pod set main: topology "default" allows to fit only 3 '
                       'out of 6 pod(s). Total nodes: 16; excluded: resource "nvidia.com/gpu": 10')
    row = next(r for r in c.jobs if r.name == "c")
    assert row.pending_compared and row.pending_agrees
    assert result.job("c").start == 3600.0 and row.real_landed.startswith("rack0 |")


def test_a_job_without_a_request_is_placed_by_kueue_too(live_kube):
    """Every flavor of the ClusterQueue is topology-aware: `eval` (no request) is TAS *implied*,
    unconstrained, least free capacity first — on the node the model names."""
    _, result, c = _replay(live_kube, "mixed")
    row = next(r for r in c.jobs if r.name == "eval")
    assert row.placement_agrees and "eval" in result.extra["topology_assignments"]


def test_a_deleting_topology_kueue_holds_is_touched_and_kueue_looks_again(live_kube, tmp_path):
    """The clean-up's touch (KueueReplay._until_gone) on the real Kueue: a Topology deleted while a
    flavor names it keeps Kueue's finalizer; each touch is accepted by the API server and makes Kueue's
    Topology controller look again (its log says so once per look); while the flavor stays, the error names
    the Topology and its finalizer; once the flavor goes, so does the Topology."""
    import time
    from courselib.errors import CourseError
    from courselib.live.kube.kueue import replay as kueue_replay
    from courselib.live.kube.plan import REPLAY_LABEL
    cp, _, _ = _replay(live_kube, "fragmentation")
    api = Api(cp)
    kapi = f"/apis/{kueue.KUEUE_API}"
    topologies, flavors = f"{kapi}/topologies", f"{kapi}/resourceflavors"
    labels = {REPLAY_LABEL: "nudge-test"}
    api.create(topologies, ktopology.kueue_topology("nudge", (("rack", 8),), labels))
    api.create(flavors, {"apiVersion": kueue.KUEUE_API, "kind": "ResourceFlavor",
                         "metadata": {"name": "nudge", "labels": labels},
                         "spec": {"nodeLabels": dict([ktopology.GPU_NODE_LABEL]), "topologyName": "nudge"}})
    try:
        time.sleep(2)   # Kueue's caches take the flavor in
        api.delete(f"{topologies}/nudge")
        log = cp.log_files(kueue.ROLE)[0]

        def looks() -> int:
            return sum(1 for line in log.read_text().splitlines()
                       if '"topology is still in use"' in line and '"name":"nudge"' in line)
        cp.wait_for(looks, 30, "Kueue's Topology controller finding the deleted Topology in use")
        time.sleep(1)
        before = looks()
        ext = kueue_replay.KueueReplay.__new__(kueue_replay.KueueReplay)
        ext.api, ext.cp, ext.say, ext.nudges = api, cp, (lambda m: None), 0
        query = {"fieldSelector": "metadata.name=nudge"}
        with pytest.raises(CourseError) as err:
            ext._until_gone([topologies], query, "the test's Topology", timeout=4.0, every=1.0)
        assert "Topology nudge (deleting since " in str(err.value), str(err.value)
        assert "finalizers kueue.x-k8s.io/resource-in-use)" in str(err.value), str(err.value)
        assert ext.nudges >= 2
        cp.wait_for(lambda: looks() >= before + ext.nudges, 10, "Kueue looking again at each touch")
        touched = api.raw("GET", f"{topologies}/nudge")["metadata"]["annotations"]
        assert touched[kueue_replay.NUDGE_ANNOTATION] == str(ext.nudges)
    finally:
        api.delete(f"{flavors}/nudge")
        api.delete(f"{topologies}/nudge")
    ext._until_gone([topologies, flavors], query, "the test's Topology and flavor", timeout=30.0)
