"""The recovery ladder (issue 31): each rung's figures, and the simulator's runs on each rung."""
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from courselib.errors import InputError
from courselib.model import recovery
from courselib.model.nccl import NCCL_ERROR_AFTER_S, PG_NCCL_TIMEOUT_S
from courselib.sim.barrier import BarrierScenario, RankLoss, simulate
from budget import examples

WHOLE = ("restart", "in-place", "requeue")


@st.composite
def ladder_inputs(draw):
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(2, 128))
    read = draw(st.floats(1e8, 2e10))
    return recovery.LadderInputs(
        ranks=gpn * nodes, gpus_per_node=gpn,
        since_checkpoint_s=draw(st.floats(0, 7200)), loss=draw(st.sampled_from(["error", "silent"])),
        step_s=draw(st.floats(0.1, 600)), params=draw(st.floats(1e6, 1e12)),
        read_bytes_per_s_per_node=read,
        # a GPU's own link is at least its share of the storage's bandwidth (see the test below)
        peer_bytes_per_s_per_gpu=draw(st.floats(read / gpn, 1e11)),
        replacement_wait_s=draw(st.floats(0, 7200)), launch_s=draw(st.floats(0, 600)),
        replica_groups=draw(st.sampled_from([0, nodes])))


@settings(max_examples=examples(300), deadline=None)
@given(ladder_inputs())
def test_no_rung_loses_more_work_than_a_whole_job_restart(x):
    restart = recovery.rung("restart", x)
    for r in recovery.ladder(x):
        assert r.lost_gpu_hours <= restart.lost_gpu_hours * (1 + 1e-9) + 1e-12, r.name
        assert r.redone_s <= x.since_checkpoint_s
        assert r.detection_s <= restart.detection_s


@settings(max_examples=examples(300), deadline=None)
@given(ladder_inputs())
def test_shrinking_never_reports_more_capacity_than_n_minus_one(x):
    shrink = recovery.rung("shrink", x)
    assert shrink.capacity_after <= x.ranks - 1 and shrink.capacity_while_recovering <= x.ranks - 1
    assert recovery.rung("grow", x).capacity_while_recovering <= x.ranks - 1
    for r in recovery.ladder(x):
        assert 0 <= r.capacity_after <= x.ranks and r.idle_gpus <= x.ranks


def test_a_slow_peer_network_is_where_healing_can_cost_more_than_a_restart():
    """The bound above needs each GPU's link to carry at least its share of the storage's reads:
    torchft heals from a live replica over the network, not from the (older) checkpoint."""
    x = recovery.LadderInputs(ranks=16, gpus_per_node=8, params=1e12, read_bytes_per_s_per_node=2e10,
                              peer_bytes_per_s_per_gpu=1e8, since_checkpoint_s=0)
    assert recovery.rung("per-step", x).lost_gpu_hours > recovery.rung("restart", x).lost_gpu_hours


def test_the_cited_figures():
    x = recovery.LadderInputs()   # 512 ranks, the defaults
    assert x.state_bytes == 70e9 * 16
    assert recovery.rung("restart", x).parts["recreate every pod"] == 130.0
    assert recovery.rung("in-place", x).parts["restart every container in place"] == pytest.approx(10.4)
    shrink = recovery.rung("shrink", x)
    assert shrink.parts["revoke + shrink (measured at 512 ranks)"] == 2.03
    assert recovery.rung("grow", x).parts["grow with a hot spare (measured at 512 ranks)"] == 2.17
    assert recovery.measured_at(recovery.SHRINK_MEASURED, 600) == (1024, 2.02)
    assert recovery.rung("restart", x).detection_s == pytest.approx(NCCL_ERROR_AFTER_S)
    silent = recovery.LadderInputs(loss="silent")
    assert recovery.rung("restart", silent).detection_s == PG_NCCL_TIMEOUT_S
    assert recovery.rung("per-step", silent).detection_s == recovery.TORCHFT_TIMEOUT_S == 60


def test_bad_inputs_are_located():
    with pytest.raises(InputError) as err:
        recovery.LadderInputs(ranks=12, replica_groups=5)
    assert err.value.field == "replica_groups"
    with pytest.raises(InputError, match="unknown recovery rung"):
        recovery.rung("reboot", recovery.LadderInputs())


def run(rung, kind="error", ranks=64, **ladder):
    sc = BarrierScenario(ranks=ranks, losses=(RankLoss(5, 3 * 3600 + 1800, kind),), recovery=rung,
                         ladder=ladder)
    return sc, simulate(sc)


@pytest.mark.parametrize("kind", ["error", "silent"])
def test_the_simulator_on_each_rung_never_loses_more_than_a_restart(kind):
    _, restart = run("restart", kind)
    for name in recovery.RUNGS:
        sc, r = run(name, kind, replacement_wait_s=600)
        assert r.finished and r.failures[0].recovery == name
        assert r.lost_gpu_hours <= run("restart", kind, replacement_wait_s=600)[1].lost_gpu_hours
        if name in ("shrink",):
            assert r.failures[0].ranks_after == sc.ranks - 1
        f = r.failures[0]
        rung = sc.rung(f.lost_at_s - f.last_checkpoint_at_s if name in WHOLE else None)
        assert f.detected_at_s - f.lost_at_s == pytest.approx(rung.detection_s, abs=1e-6)
        if name != "per-step":
            assert f.restarted_at_s - f.detected_at_s == pytest.approx(rung.recovery_s)


def test_whole_job_rungs_redo_the_work_since_the_checkpoint_others_only_the_step():
    sc, r = run("restart")
    f = r.failures[0]
    assert f.resumed_from_step == 180 and f.since_checkpoint_s == 1800
    sc, s = run("shrink")
    assert s.failures[0].resumed_from_step == 209   # the step in flight (210) is redone
    # a shrunk job trains on with 63 ranks: each step takes 64/63 as long
    assert s.finished_at_s > run("grow")[1].finished_at_s


def test_cli_recovery_json_gives_lost_gpu_hours():
    out = subprocess.run([sys.executable, "-m", "courselib", "barrier", "simulate", "--ranks", "64",
                          "--lose-rank", "5", "--at", "210m", "--loss-kind", "error", "--recovery", "shrink",
                          "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert doc["recovery"] == "shrink" and doc["lost_gpu_hours"] == doc["failures"][0]["lost_gpu_hours"] > 0
    bad = subprocess.run([sys.executable, "-m", "courselib", "barrier", "simulate", "--recovery", "reboot"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_cost_prices_a_rung():
    out = subprocess.run([sys.executable, "-m", "courselib", "cost", "--recovery", "all", "--price", "3",
                          "--replacement-wait", "10m", "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    rows = {r["name"]: r for r in doc["rungs"]}
    assert list(rows) == list(recovery.RUNGS)
    assert rows["restart"]["cost_usd"] == pytest.approx(3 * rows["restart"]["lost_gpu_hours"], abs=0.01)
    bad = subprocess.run([sys.executable, "-m", "courselib", "cost", "--recovery", "shrink", "--gpus", "4"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--recovery" in bad.stderr


@settings(max_examples=examples(60), deadline=None)
@given(ranks=st.integers(2, 96), data=st.data(), at_s=st.floats(60, 3.5 * 3600),
       kind=st.sampled_from(["error", "silent"]), rung=st.sampled_from(recovery.RUNGS),
       wait=st.floats(0, 3600), since=st.sampled_from([0.5, 1.0, 2.0]))
def test_the_simulator_never_loses_more_than_a_restart_nor_grows_a_shrunk_job(ranks, data, at_s, kind, rung,
                                                                               wait, since):
    """The ladder's two properties, on the simulator's runs (any rank lost at any time, any rung): no rung
    loses more GPU-hours than a whole-job restart from the same checkpoint, and a shrunk job never trains
    on more than N−1 ranks (no run on more than N)."""
    rank = data.draw(st.integers(0, ranks - 1))

    def sim(name):
        sc = BarrierScenario(ranks=ranks, losses=(RankLoss(rank, at_s, kind),), recovery=name,
                             checkpoint_every_s=since * 3600, ladder={"replacement_wait_s": wait})
        return simulate(sc)
    r, restart = sim(rung), sim("restart")
    assert r.finished and restart.finished
    assert r.lost_gpu_hours <= restart.lost_gpu_hours * (1 + 1e-9) + 1e-9, (rung, r.lost_gpu_hours,
                                                                            restart.lost_gpu_hours)
    f = r.failures[0]
    assert f.recovery == rung and 1 <= f.ranks_after <= ranks
    if rung == "shrink":
        assert f.ranks_after <= ranks - 1
