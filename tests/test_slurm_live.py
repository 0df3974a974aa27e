"""A real local Slurm: up/down by PID, and replays that must agree with courselib's slurm model.

Runs where permitted (root, Debian's slurm-wlm + munge installed: `.ci/install-slurm.sh`);
elsewhere every test is skipped with the reason. The cluster uses its own ports (17900+) and
state file, so a cluster a developer has up on the default ports is never touched.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.live import slurm
from courselib.live.cleanup import alive
from live_fixtures import SLURM_PORT
from courselib.live import slurm_replay as replay

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "slurm"
PORT = SLURM_PORT

# Differences between the real Slurm and the model, each explained; the test pins the real
# side so that it cannot drift silently. Empty once the model is fixed.
# (workload, job) -> the real reason Slurm gives.
# - resources-priority/second: Slurm's main scheduler gives every job behind the first blocked
#   one reason Priority, and backfill leaves that reason alone; the model's backfill pass
#   rewrites it to Resources when the job does not fit now.
KNOWN_REASON_DIFFERENCES: dict[tuple[str, str], str] = {}

REASON = slurm.unavailable_reason()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"local Slurm not runnable here: {REASON}"))


@pytest.fixture
def lab(live_slurm):
    """The session's local Slurm (tests/live_fixtures.py: restarted only for another shape; at the end
    of the session it proves that `down` left nothing)."""
    return live_slurm


def test_up_is_idempotent_and_status_sees_every_process(lab):
    shape = slurm.ClusterShape(nodes=4, gpus_per_node=8, features=(("nvlink", 2),))
    first = lab.up(shape)
    again = lab.up(shape)
    assert [p.pid for p in again.procs] == [p.pid for p in first.procs]
    info = slurm.status()
    assert info["up"] is True
    roles = sorted(p["role"] for p in info["processes"])
    assert roles == ["munged", "slurmctld"] + [f"slurmd-node{k}" for k in range(1, 5)]
    nodes = {n["node"]: n for n in info["nodes"]}
    assert sorted(nodes) == ["node1", "node2", "node3", "node4"]
    assert all(n["state"] == "idle" and n["gres"] == "gpu:8" for n in nodes.values())
    assert nodes["node1"]["features"] == ["nvlink"] and nodes["node3"]["features"] == []
    # ports are ours, not Slurm's defaults
    conf = first.conf.read_text()
    assert f"SlurmctldPort={PORT}" in conf and "6817" not in conf


def test_up_refuses_a_different_shape_while_one_is_up(lab):
    lab.up(slurm.ClusterShape(nodes=4, gpus_per_node=8, features=(("nvlink", 2),)))
    with pytest.raises(slurm.CourseError, match="already up"):
        slurm.up(slurm.ClusterShape(nodes=3, gpus_per_node=8, base_port=PORT))


def _workloads():
    return sorted(EXAMPLES.glob("*.yaml")) + [REPO / "examples" / "workloads" / "slurm-backfill.yaml"]


_REPLAYS: dict[Path, replay.ReplayResult] = {}


def _replay(path: Path, lab) -> replay.ReplayResult:
    """One real replay per workload per test session (they take seconds each)."""
    from courselib.io.workload import load_workload
    if path not in _REPLAYS:
        plan = replay.plan_replay(load_workload(path))
        _REPLAYS[path] = replay.run_replay(lab.up(plan.shape), plan)
    return _REPLAYS[path]


def _agreement(path: Path, lab) -> replay.Comparison:
    return replay.compare(_replay(path, lab), name=path.stem)


# Group workloads by cluster shape so the cluster is restarted as rarely as possible.
@pytest.mark.parametrize("path", sorted(_workloads(), key=lambda p: (p.stem.startswith("seed")
                                                                     or "workloads" in str(p), p.name)),
                         ids=lambda p: p.stem)
def test_replay_agrees_with_the_model(path, lab):
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    c = _agreement(path, lab)
    report = replay.format_comparison(c)
    assert c.started_agree == c.started_checks, report
    assert c.order_agree == c.order_pairs, report
    for row in c.jobs:
        known = KNOWN_REASON_DIFFERENCES.get((path.stem, row.name))
        if known is not None:
            assert row.real_reason == known, report
        elif row.reason_agrees is not None:
            assert row.reason_agrees, report


def test_scenarios_show_what_the_issue_asks_for(lab):  # after the replays: reuses them
    """The real Slurm itself: whole-job waits, Resources vs Priority, PartitionNodeLimit, backfill."""
    def run(name):
        return _replay(EXAMPLES / f"{name}.yaml", lab)

    rp = run("resources-priority")
    assert (rp.job("first").reason, rp.job("second").reason) == ("Resources", "Priority")
    big = run("too-big")
    assert big.job("huge").start is None and big.job("huge").reason == "PartitionNodeLimit"
    bf = run("backfill")
    assert bf.start_order() == ["running", "short", "big", "long"]
    assert bf.job("short").start < bf.job("big").start  # backfilled past the waiting big job


def test_down_stops_everything_by_pid(lab):
    cluster = lab.up(slurm.ClusterShape(nodes=2, gpus_per_node=4))
    pids = [p.pid for p in cluster.procs]
    assert all(alive(pid) for pid in pids)
    lab.down()
    assert [pid for pid in pids if alive(pid)] == []
    assert slurm.load_cluster() is None
    assert not cluster.state_dir.exists()


def test_ctrl_c_during_up_stops_everything_started(monkeypatch, tmp_path):
    """A Ctrl-C (KeyboardInterrupt) half-way through `up` leaves no process and no state."""
    monkeypatch.setenv(slurm.STATE_ENV, str(tmp_path / "state.json"))
    spawned: list[int] = []
    real_spawn = slurm.Cluster.spawn

    def spawn(cluster, role, argv, *, env):
        proc = real_spawn(cluster, role, argv, env=env)
        spawned.append(proc.pid)
        return proc

    def interrupted(cluster):
        raise KeyboardInterrupt

    monkeypatch.setattr(slurm.Cluster, "spawn", spawn)
    monkeypatch.setattr(slurm.cluster, "_all_nodes_idle", interrupted)
    with pytest.raises(KeyboardInterrupt):
        slurm.up(slurm.ClusterShape(nodes=2, gpus_per_node=2, base_port=PORT + 60))
    assert len(spawned) == 4  # munged, slurmctld, two slurmd
    assert [pid for pid in spawned if alive(pid)] == []
    assert not (tmp_path / "state.json").exists()
