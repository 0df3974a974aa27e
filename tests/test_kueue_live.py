"""The real Kueue (v0.17.1) in front of the real kube-scheduler: replays that must agree with
courselib's `kueue` model, and a control plane that leaves nothing behind.

Runs where the pinned Kubernetes, etcd and Kueue are built (`make setup-k8s`; .ci/run always builds
them) and skips with the reason elsewhere. Kueue joins the session's control plane (its own ports,
18100+, and private state directory: tests/live_fixtures.py).
Kueue's timers run in real time in the manager (stand-ins of 10 s and 5 s here, 20 s and 10 s in
`courselib kube replay`; see courselib.live.kube.kueue.replay), so an eviction costs about 15 s.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live import kube
from courselib.live.kube.kueue import manager as kueue, replay as kueue_replay
from courselib.live.kube import api as kapi, plan as kplan, replay as kreplay, result as kresult
from live_fixtures import KUBE_PORT

pytestmark = [pytest.mark.real, pytest.mark.slow, pytest.mark.live_kube(kueue=True)]

REPO = Path(__file__).resolve().parents[1]
KUEUE = REPO / "examples" / "kueue"
SEED = REPO / "examples" / "workloads"
KUBE = REPO / "examples" / "kube"
PORT = KUBE_PORT


# Built by `make setup-k8s` (and `make test`, .ci/run) under the heavy lock, never while tests are
# collected: a build started here would race the one those run.
REASON = kueue.unavailable_reason()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"Kueue on a local control plane not runnable here: {REASON}"))


#: Kueue's real-time stand-ins for these replays (seconds; courselib.live.kube.kueue.replay.stand_ins):
#: half the defaults (20 s, 10 s), which `courselib kube replay` and the recorded runs keep. A stand-in
#: only has to outlast one settle of a replay, a few seconds for these workloads; the model's timeout
#: and backoff do not change, and every real interval is still checked against the manager's.
TIMEOUT, BACKOFF = 10, 5


@pytest.fixture(scope="module", autouse=True)
def short_timers():
    with kueue_replay.stand_ins(TIMEOUT, BACKOFF):
        yield


class _KueueLab:
    """The session's control plane with Kueue joined (tests/live_fixtures.py: reshaped, not restarted,
    per cluster shape; at the end of the session it proves that `down` left nothing, Kueue's ports
    included)."""

    def __init__(self, plane):
        self.plane = plane

    @property
    def cp(self):
        return self.plane.cp

    def up(self, shape: kube.KubeShape) -> kube.ControlPlane:
        return self.plane.up(shape, kueue=True)


@pytest.fixture
def lab(live_kube):
    return _KueueLab(live_kube)


_RUNS: dict = {}


def _replay(lab, path: Path, **options):
    """Replay once per workload and options (later tests look at the same run)."""
    key = (path, tuple(sorted(options.items())))
    if key not in _RUNS:
        plan = kplan.plan_replay(load_workload(path), policy="kueue", options=options)
        cp = lab.up(plan.shape)
        result = kreplay.run_replay(cp, plan)
        _RUNS[key] = result, kresult.compare(result, name=path.name)
    return _RUNS[key]


def test_up_with_kueue_runs_the_manager_with_its_webhooks(lab):
    cp = lab.up(kube.KubeShape(nodes=4, gpus_per_node=8))
    assert [p.role for p in cp.procs].count(kueue.ROLE) == 1
    assert kube.up(kube.KubeShape(nodes=4, gpus_per_node=8, base_port=PORT, with_=("kueue",))).procs \
        == cp.procs  # idempotent
    api = kapi.Api(cp)
    # Kueue's own mutating webhook suspends a Job that names a queue (served on loopback, through
    # the API server): nothing of courselib's sets suspend
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "probe", "namespace": kube.NAMESPACE,
                         "labels": {kueue.QUEUE_LABEL: "nowhere"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": kplan.IMAGE}]}}}}
    made = api.create(f"/apis/batch/v1/namespaces/{kube.NAMESPACE}/jobs", body, dry_run=True)
    assert made["spec"]["suspend"] is True
    info = kube.status(cp)
    assert info["up"] and kueue.ROLE in {p["role"] for p in info["processes"]}


def test_real_kueue_requeues_by_eviction_time_and_the_old_model_did_not(lab):
    """The real behaviour that forced the model change: `mid` is admitted before `big`."""
    result, c = _replay(lab, KUEUE / "requeue-order.yaml")
    assert result.start_order() == ["filler", "blocker", "mid", "big"]
    old = kresult.model_run(result.plan.workload, "kueue", options=(("requeuing_timestamp", "Creation"),))
    assert old.job("big").start < old.job("mid").start


def test_quota_admits_a_workload_whose_pods_cannot_all_be_placed(lab):
    result, _ = _replay(lab, SEED / "kueue-quota-not-placement.yaml")
    events = result.extra["events"]
    waiting = next(e for e in events if e["job"] == "big" and e["what"] == "waiting")
    assert (waiting["t"], waiting["bound"], waiting["pods"]) == (60.0, 2, 3)
    assert "Insufficient nvidia.com/gpu" in waiting["scheduler"]
    evicted = next(e for e in events if e["what"] == "evicted")
    assert (evicted["t"], evicted["reason"], evicted["count"]) == (31 * 60.0, "PodsReadyTimeout", 1)
    assert [(t["timer"], t["configured"]) for t in result.extra["timers"]][:2] == \
        [("timeout", float(TIMEOUT)), ("backoff", float(BACKOFF))]


# Each must agree 100 % with courselib's kueue model (given the order Kueue drew among Workloads
# created together). Grouped by cluster shape: one control plane per shape.
AGREE = [
    (SEED, "kueue-quota-not-placement.yaml", {}),   # quota is not placement; a PodsReady eviction
    (SEED, "kueue-quota-not-placement.yaml", {"wait_for_pods_ready": False}),  # Kueue v0.17's default: no eviction
    (KUEUE, "requeue-order.yaml", {}),              # an evicted workload requeues behind older ones
    (KUEUE, "backoff.yaml", {}),                    # two evictions, backoff 60 s then 120 s
    (KUEUE, "backoff.yaml", {"backoff_limit": 1}),  # deactivated at the limit
    (KUEUE, "cohort-borrow.yaml", {}),              # borrowing within a cohort
    (KUEUE, "cohort-borrowing-limit.yaml", {}),     # team-a's borrowingLimit 8 keeps a2 waiting (chapter 6a)
    (KUEUE, "cohort-lending-limit.yaml", {}),       # team-b's lendingLimit 0: a1 is never admitted (chapter 6a)
    (KUBE, "apart.yaml", {}),                       # jobs submitted apart, waiting on quota
    (SEED, "seed-400-of-512-25min.yaml", {}),       # the seed's story 2
    (SEED, "seed-600-free-deadlock.yaml", {}),      # the seed's story 1
]


@pytest.mark.parametrize("folder,name,options", AGREE,
                         ids=[n[:-5] + "".join(f"-{k}={v}" for k, v in o.items()) for _, n, o in AGREE])
def test_real_kueue_agrees_with_the_model(lab, folder, name, options):
    result, c = _replay(lab, folder / name, **options)
    assert c.agreement == 1.0, kresult.format_comparison(c)
    timers = result.extra["timers"]
    assert all(t["ok"] for t in timers), timers  # Kueue's own timeout and backoff, measured


def test_real_kueue_bounds_cohort_borrowing_by_both_limits_as_chapter_6a_says(lab):
    """Chapter 6a's two limit cases ("Quota between teams"), each a file of its own (tests/test_kueue_plan.py
    checks they are the page's cases), on the real Kueue: a `borrowingLimit` of 8 keeps `a2` waiting for
    `a1`'s end, and a `lendingLimit` of 0 admits `b1` on arrival while `a1`, above its queue's maximum
    capacity, is never admitted. Each job that waits says why in Kueue's words (its Workload's
    QuotaReserved condition), the words of the model's reason at that moment."""
    starts = {}
    for name in ("cohort-borrow.yaml", "cohort-borrowing-limit.yaml", "cohort-lending-limit.yaml"):
        result, _ = _replay(lab, KUEUE / name)
        starts[name] = {j.name: j.start for j in result.jobs}
        waited = result.extra["pending"]
        for job, (t, said) in waited.items():
            model = kresult.model_at(result, t).job(job)
            assert model.start is None and model.pending_reason.removeprefix("Pending: ") == said, (name, job, t)
        assert set(waited) == {j for j, s in starts[name].items() if s is None or s > result.plan.workload.job(j).submit}
    assert starts["cohort-borrow.yaml"] == {"a1": 0, "b1": 3600, "a2": 1200}
    assert starts["cohort-borrowing-limit.yaml"] == {"a1": 0, "b1": 3600, "a2": 3600}
    assert starts["cohort-lending-limit.yaml"] == {"a1": None, "b1": 600, "a2": 1200}
    result, _ = _replay(lab, KUEUE / "cohort-lending-limit.yaml")
    t, said = result.extra["pending"]["a1"]
    assert t == 0 and "> maximum capacity (16)" in said, said
