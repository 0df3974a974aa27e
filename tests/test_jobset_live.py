"""The real JobSet controller (v0.12.0) beside the real kube-scheduler (v1.37.2), and Kueue (v0.17.1):
a running gang loses a pod, and courselib's model must agree 100 % with what the real controllers did
(issue 31).

Each workload is replayed once on the session's control plane (tests/live_fixtures.py: JobSet joins it,
Kueue after JobSet when both are needed; its own ports, 18100+, and private state directory) and
read by several tests. Runs where the pinned Kubernetes, etcd and JobSet (and, for the Kueue cases,
Kueue) are built (`make setup-k8s`; .ci/run always builds them) and skips with the reason elsewhere.
The seed's 512-GPU story is not replayed here (minutes at 64 nodes); its labelled recording is held to
the model in tests/test_jobset_plan.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live import kube
from courselib.live.kube import plan as kplan, replay as kreplay, result as kresult
from courselib.live.kube.jobset import manager as jobset
from courselib.live.kube.kueue import manager as kueue
from courselib.live.nodes import port_free
from live_fixtures import marked

pytestmark = [pytest.mark.real, pytest.mark.slow]

SEED = Path(__file__).resolve().parents[1] / "examples" / "workloads"

# Built by `make setup-k8s` (and `make test`, .ci/run) under the heavy lock, never while tests are
# collected: a build started here would race the one those run.
REASON = jobset.unavailable_reason()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"JobSet on a local control plane not runnable here: {REASON}"))
KUEUE_REASON = kueue.unavailable_reason()

_RUNS: dict = {}


def _replay(live_kube, name: str, *, policy: str = "kube-default"):
    """Replay ``name`` once per policy on a plane of its shape (later tests read the same run)."""
    key = (name, policy)
    if key not in _RUNS:
        plan = kplan.plan_replay(load_workload(SEED / name), policy=policy)
        assert "jobset" in plan.shape.with_
        cp = live_kube.up(plan.shape, kueue="kueue" in plan.shape.with_)
        result = kreplay.run_replay(cp, plan)
        _RUNS[key] = result, kresult.compare(result, name=name)
    return _RUNS[key]


def _agrees(c) -> None:
    assert c.agreement == 1.0, kresult.format_comparison(c)
    assert all(j.losses_compared for j in c.jobs if j.name == "big"), kresult.format_comparison(c)


# ----------------------------------------------------------------------------- the default scheduler

@pytest.mark.live_kube(order=1)  # after the plain Kubernetes tests of the group (they count the daemons)
def test_the_scheduler_preempts_one_pod_and_the_jobset_restarts_all_four(live_kube):
    """The seed's story on 4 nodes: one pod of `big` preempted for `urgent`, the real JobSet controller
    recreates every pod (status.restarts 1); the 3 new pods that fit hold their GPUs until `urgent` ends."""
    result, c = _replay(live_kube, "jobset-preempt-one-pod.yaml")
    _agrees(c)
    big = result.job("big")
    assert result.extra["jobsets"]["big"]["restarts"] == 1
    assert result.extra["jobsets"]["big"]["failed"] is None
    (lost, back, held), = big.losses
    assert (lost, back) == (1800.0, 2400.0)       # urgent's 10 minutes, then every pod runs again
    assert [b for _, b in held][0] == 3           # one pod preempted: 3 of 4 new pods bound at once
    assert result.job("urgent").start == 1800.0 and big.state == "COMPLETED"
    row = next(j for j in c.jobs if j.name == "big")
    assert (row.real_restarts, row.model_restarts) == (1, 1)


@pytest.mark.live_kube(order=1)
def test_max_restarts_used_up_fails_the_jobset(live_kube):
    """Two crashes with maxRestarts 1: one restart, then ReachedMaxRestarts and every pod deleted."""
    result, c = _replay(live_kube, "jobset-max-restarts.yaml")
    _agrees(c)
    status = result.extra["jobsets"]["big"]
    assert status["restarts"] == 1 and status["failed"]["reason"] == "ReachedMaxRestarts"
    row = next(j for j in c.jobs if j.name == "big")
    assert (row.real_failed, row.model_failed) == ("ReachedMaxRestarts", "ReachedMaxRestarts")
    assert result.job("big").bound_at_end == 0


# ----------------------------------------------------------------------------- Kueue admits the JobSet

def _kueue(live_kube, name):
    if KUEUE_REASON:
        pytest.skip(f"Kueue on a local control plane not runnable here: {KUEUE_REASON}")
    return _replay(live_kube, name, policy="kueue")


@pytest.mark.live_kube(kueue=True, order=-1)  # first of the Kueue group: Kueue starts after JobSet's CRD
def test_a_pod_preempted_outside_kueue_restarts_the_admitted_jobset(live_kube):
    """`urgent` is in no Kueue queue: the kube-scheduler preempts, Kueue does not; the JobSet restarts
    inside its admitted quota and is ready again before Kueue's recovery timeout."""
    result, c = _kueue(live_kube, "jobset-kueue-preempt.yaml")
    _agrees(c)
    assert result.extra["jobsets"]["big"]["restarts"] == 1
    assert [e for e in result.extra.get("events", []) if e.get("what") == "evicted"] == []


@pytest.mark.live_kube(kueue=True, order=-1)
def test_kueue_preempts_the_whole_workload_not_a_pod(live_kube):
    """`urgent` goes through the same ClusterQueue: Kueue evicts the JobSet's workload as a whole
    (suspended, not a JobSet restart), admits `urgent`, and admits the JobSet again afterwards."""
    result, c = _kueue(live_kube, "jobset-kueue-workload-preemption.yaml")
    _agrees(c)
    assert result.extra["jobsets"]["big"]["restarts"] == 0
    assert result.job("urgent").start == 1800.0 and result.job("big").state == "COMPLETED"


# ----------------------------------------------------------------------------- workload-aware preemption

@pytest.mark.live_kube(gang=True, order=1)
def test_workload_aware_preemption_takes_the_whole_group(live_kube):
    """With GenericWorkload on (v1.37.2) and the PodGroup's disruptionMode All, the scheduler preempts
    all four pods of `big` for a one-node job (KEP-5710), and the JobSet restarts once."""
    result, c = _replay(live_kube, "gang-preempt-whole-group.yaml", policy="kube-gang")
    _agrees(c)
    (lost, back, held), = result.job("big").losses
    assert lost == 1800.0 and [b for _, b in held][0] == 0   # the whole group went: nothing held
    assert result.extra["jobsets"]["big"]["restarts"] == 1


@pytest.mark.live_kube(gang=True, order=9)  # the last test of the session's control plane
def test_kube_down_leaves_nothing_of_jobset_behind(live_kube):
    cp = live_kube.cp
    if cp is None or "jobset" not in cp.shape.with_:
        cp = live_kube.up(kube.KubeShape(nodes=2, gpus_per_node=8, gang=True, with_=("jobset",)))
    pids = [p.pid for p in cp.procs]
    assert jobset.ROLE in [p.role for p in cp.procs]
    state_dir, ports = cp.state_dir, list(cp.shape.ports.values()) + list(jobset.ports(cp.shape).values())
    live_kube.down()
    from courselib.live.cleanup import alive
    assert [p for p in pids if alive(p)] == []
    assert not state_dir.exists() and marked(state_dir, kube.MARKER) == []
    assert all(port_free(p) for p in ports)
