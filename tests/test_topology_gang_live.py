"""Native topology-aware PodGroups on the real kube-scheduler v1.37.2 (issue 29): the six topology
workloads replayed with GenericWorkload and TopologyAwareWorkloadScheduling on, each PodGroup of a job
that requires a level carrying ``schedulingConstraints.topology``, the fake nodes labelled
``courselib/topology-<level>`` (the topology set-up); each must agree 100 % with kube-gang.

The real scheduler draws among equally scored domains (``rand.Int()``) and nodes (``selectHost``):
the comparison checks that the real choice is one of the model's tied set, then lets the model follow
it. What the model *determines* is checked as it is: a job in one domain of its level, which domain
when only one scores best, which job waits and with which placement message, every start time.

Runs where the pinned Kubernetes is built (`make setup-k8s`); elsewhere skipped with the reason.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live import kube
from courselib.live.kube import plan as kplan, replay as kreplay, result as kresult

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
TOPOLOGY = REPO / "examples" / "topology"
WORKLOADS = ["fragmentation.yaml", "larger-than-domain.yaml", "preferred-vs-required.yaml",
             "apart.yaml", "blocked-head.yaml", "mixed.yaml"]

REASON = kube.unavailable_reason()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"local Kubernetes not runnable here: {REASON}"))

_RUNS: dict = {}
#: First of the gang group (tests/live_fixtures.py): the topology's gate set is started once, from the
#: plane Kueue leaves, before the gang tests without a topology, which then keep their plane to the end
#: of the session (JobSet joins it) instead of starting it again after these.
TOPOLOGY_FIRST = -2


@pytest.fixture
def lab(live_kube):
    """The session's control plane (tests/live_fixtures.py): restarted when its feature gates differ
    (TopologyAwareWorkloadScheduling comes with a topology under --gang), else reshaped."""
    return live_kube


def _replay(lab, name: str):
    if name not in _RUNS:
        plan = kplan.plan_replay(load_workload(TOPOLOGY / name), policy="kube-gang")
        cp = lab.up(plan.shape)
        result = kreplay.run_replay(cp, plan)
        _RUNS[name] = (result, kresult.compare(result, name=name))
    return _RUNS[name]


@pytest.mark.live_kube(gang=True, order=TOPOLOGY_FIRST)
@pytest.mark.parametrize("name", WORKLOADS)
def test_topology_aware_podgroups_agree_with_kube_gang(lab, name):
    result, c = _replay(lab, name)
    report = kresult.format_comparison(c)
    assert c.agreement == 1.0, report
    assert c.topology, report           # the topology checks ran
    wl = result.plan.workload
    for job in wl.jobs:
        rj = result.job(job.name)
        if rj.start is not None and job.topology and job.topology[0] == "required":
            # all pods of a required group in one domain of its level
            assert len(kresult.real_domains(wl, rj, job.topology[1])) == 1, (job.name, rj.nodes)
        assert all(n in (0, rj.pods) for _, n in rj.timeline), (job.name, rj.timeline)  # all or nothing


@pytest.mark.live_kube(gang=True, order=TOPOLOGY_FIRST)
def test_the_gate_is_on_and_the_nodes_carry_the_topology(lab):
    plan = kplan.plan_replay(load_workload(TOPOLOGY / "fragmentation.yaml"), policy="kube-gang")
    cp = lab.up(plan.shape)
    assert "TopologyAwareWorkloadScheduling=true" in " ".join(
        a for p in cp.procs if p.role == "kube-scheduler" for a in p.argv)
    from kubernetes import client
    nodes = {n.metadata.name: n.metadata.labels for n in client.CoreV1Api(cp.api()).list_node().items}
    assert nodes["node8"]["courselib/topology-rack"] == "rack0"
    assert nodes["node9"]["courselib/topology-rack"] == "rack1"
    assert nodes["node12"]["courselib/topology-block"] == "block2"


@pytest.mark.live_kube(gang=True, order=TOPOLOGY_FIRST)
def test_headcount_fits_topology_does_not_on_the_real_scheduler(lab):
    """fragmentation.yaml: 24 GPUs free after a and b, 3 nodes in each rack; c requires a rack and
    waits, in the placement search's own words, until a rack frees at 1h."""
    result, c = _replay(lab, "fragmentation.yaml")
    rc = result.job("c")
    assert rc.start == 3600, kresult.format_comparison(c)
    waited = [t for t in c.topology if t.job == "c" and t.what == "pending message"]
    assert waited and waited[0].real.startswith("0/2 placements are available"), waited


@pytest.mark.live_kube(gang=True, order=TOPOLOGY_FIRST)
def test_the_real_scheduler_packs_domains(lab):
    """blocked-head.yaml: the second 2-node group joins the first one's block (the fuller domain
    scores higher: NodeResourcesFit's MostAllocated placement score), so a whole rack stays free and
    the 8-node head starts at once."""
    result, c = _replay(lab, "blocked-head.yaml")
    wl = result.plan.workload
    assert kresult.real_domains(wl, result.job("long"), "block") == \
        kresult.real_domains(wl, result.job("long2"), "block"), kresult.format_comparison(c)
    assert result.job("head").start == 60
