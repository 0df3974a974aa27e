"""The real Kueue (v0.17.1) in front of the real kube-scheduler: replays that must agree with
courselib's `kueue` model, and a control plane that leaves nothing behind.

Runs where the pinned Kubernetes, etcd and Kueue are built (`make setup-k8s`; .ci/run always builds
them) and skips with the reason elsewhere. Its own ports (18200+) and private state directory.
Kueue's timers run in real time in the manager (stand-ins of 20 s and 10 s, see
courselib.live.kueue_replay), so an eviction costs about half a minute.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live import kube, kueue
from courselib.live import kube_replay as replay
from courselib.live.cleanup import alive

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
KUEUE = REPO / "examples" / "kueue"
SEED = REPO / "examples" / "workloads"
KUBE = REPO / "examples" / "kube"
PORT = 18200


def _ensure_built() -> str | None:
    if (kube.missing_binaries() or kueue.unavailable_reason()) and shutil.which("go"):
        res = subprocess.run([str(REPO / "k8s" / "build.sh")], capture_output=True, text=True)
        if res.returncode != 0:
            return f"k8s/build.sh failed: {(res.stderr or res.stdout).strip().splitlines()[-1:]}"
    return kueue.unavailable_reason()


REASON = _ensure_built()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"Kueue on a local control plane not runnable here: {REASON}"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One control plane with Kueue at a time (by shape); proves `down` left nothing."""
    state = tmp_path_factory.mktemp("kueue-state")
    state.chmod(0o700)
    old = os.environ.get("COURSELIB_STATE_DIR")
    os.environ["COURSELIB_STATE_DIR"] = str(state)
    seen: list[tuple[list[int], Path]] = []

    class Lab:
        cp: kube.ControlPlane | None = None

        def up(self, shape: kube.KubeShape) -> kube.ControlPlane:
            shape = kube.KubeShape(shape.nodes, shape.gpus_per_node, shape.features,
                                   base_port=PORT, with_=("kueue",))
            if self.cp is not None and not self.cp.shape.same_nodes(shape):
                self.down()
            self.cp = kube.up(shape)
            return self.cp

        def down(self) -> None:
            pids = [p.pid for p in self.cp.procs]
            seen.append((pids, self.cp.state_dir))
            out = kube.down(self.cp)
            assert out["left"] == []
            self.cp = None

    lab = Lab()
    try:
        yield lab
    finally:
        if lab.cp is not None:
            lab.down()
        if old is None:
            os.environ.pop("COURSELIB_STATE_DIR", None)
        else:
            os.environ["COURSELIB_STATE_DIR"] = old
    for pids, state_dir in seen:
        assert [p for p in pids if alive(p)] == [], "processes of ours still running after down"
        assert not state_dir.exists()
    from courselib.live.slurm import _port_free
    assert all(_port_free(PORT + k) for k in range(8))


_RUNS: dict = {}


def _replay(lab, path: Path, **options):
    """Replay once per workload and options (later tests look at the same run)."""
    key = (path, tuple(sorted(options.items())))
    if key not in _RUNS:
        plan = replay.plan_replay(load_workload(path), policy="kueue", options=options)
        cp = lab.up(plan.shape)
        result = replay.run_replay(cp, plan)
        _RUNS[key] = result, replay.compare(result, name=path.name)
    return _RUNS[key]


def test_up_with_kueue_runs_the_manager_with_its_webhooks(lab):
    cp = lab.up(kube.KubeShape(nodes=4, gpus_per_node=8))
    assert [p.role for p in cp.procs].count(kueue.ROLE) == 1
    assert kube.up(kube.KubeShape(nodes=4, gpus_per_node=8, base_port=PORT, with_=("kueue",))).procs \
        == cp.procs  # idempotent
    api = replay.Api(cp)
    # Kueue's own mutating webhook suspends a Job that names a queue (served on loopback, through
    # the API server): nothing of courselib's sets suspend
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "probe", "namespace": kube.NAMESPACE,
                         "labels": {kueue.QUEUE_LABEL: "nowhere"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": replay.IMAGE}]}}}}
    made = api.create(f"/apis/batch/v1/namespaces/{kube.NAMESPACE}/jobs", body, dry_run=True)
    assert made["spec"]["suspend"] is True
    info = kube.status(cp)
    assert info["up"] and kueue.ROLE in {p["role"] for p in info["processes"]}


def test_real_kueue_requeues_by_eviction_time_and_the_old_model_did_not(lab):
    """The real behaviour that forced the model change: `mid` is admitted before `big`."""
    result, c = _replay(lab, KUEUE / "requeue-order.yaml")
    assert result.start_order() == ["filler", "blocker", "mid", "big"]
    old = replay.model_run(result.plan.workload, "kueue", options=(("requeuing_timestamp", "Creation"),))
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
        [("timeout", 20.0), ("backoff", 10.0)]


# Each must agree 100 % with courselib's kueue model (given the order Kueue drew among Workloads
# created together). Grouped by cluster shape: one control plane per shape.
AGREE = [
    (SEED, "kueue-quota-not-placement.yaml", {}),   # quota is not placement; a PodsReady eviction
    (KUEUE, "requeue-order.yaml", {}),              # an evicted workload requeues behind older ones
    (KUEUE, "backoff.yaml", {}),                    # two evictions, backoff 60 s then 120 s
    (KUEUE, "backoff.yaml", {"backoff_limit": 1}),  # deactivated at the limit
    (KUEUE, "cohort-borrow.yaml", {}),              # borrowing within a cohort
    (KUBE, "apart.yaml", {}),                       # jobs submitted apart, waiting on quota
    (SEED, "seed-400-of-512-25min.yaml", {}),       # the seed's story 2
    (SEED, "seed-600-free-deadlock.yaml", {}),      # the seed's story 1
]


@pytest.mark.parametrize("folder,name,options", AGREE,
                         ids=[n[:-5] + "".join(f"-{k}={v}" for k, v in o.items()) for _, n, o in AGREE])
def test_real_kueue_agrees_with_the_model(lab, folder, name, options):
    result, c = _replay(lab, folder / name, **options)
    assert c.agreement == 1.0, replay.format_comparison(c)
    timers = result.extra["timers"]
    assert all(t["ok"] for t in timers), timers  # Kueue's own timeout and backoff, measured
