"""The NCCL barrier simulation: a lost rank stalls everyone, times out, and restarts the whole job."""
from __future__ import annotations

import json
import math

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.cli.main import main
from courselib.errors import InputError
from courselib.model import cost, nccl
from courselib.sim import barrier
from courselib.sim.barrier import BarrierScenario, RankLoss, simulate
from budget import examples

H, M = 3600.0, 60.0


@pytest.fixture(scope="module")
def issue_run():
    """The issue's run: 512 ranks, rank 37 lost at 3 h, checkpoint every 1 h, 10 min timeout, 5 min restart."""
    return simulate(BarrierScenario(ranks=512, losses=(RankLoss(37, 3 * H),), checkpoint_every_s=H,
                                    timeout_s=10 * M, restart_s=5 * M))


def test_issue_run_numbers(issue_run):
    r = issue_run
    assert r.hang_detected_after_s == 600.0
    assert r.restarts == 1
    f = r.failures[0]
    assert f.lost_ranks == (37,) and f.last_checkpoint_at_s == 2 * H and f.resumed_from_step == 120
    # the loss lands on the 3 h step boundary before the 3 h checkpoint could be written
    assert f.since_checkpoint_s == H
    assert r.lost_gpu_hours == pytest.approx(cost.lost_rank_gpu_hours(512, H, 10 * M, 5 * M)) == 640.0
    assert r.finished and r.finished_at_s == 4 * H + H + 15 * M


def test_trace_has_every_phase_in_story_order(issue_run):
    phases = [e.phase for e in issue_run.trace]
    first = {p: phases.index(p) for p in ("joined", "training", "rank lost", "stalled", "timed out",
                                          "restarted", "finished")}
    assert list(first) == sorted(first, key=first.get)
    stalled = next(e for e in issue_run.trace if e.phase == "stalled")
    assert stalled.ranks == 511 and "rank 37 lost" in stalled.detail
    restarted = next(e for e in issue_run.trace if e.phase == "restarted")
    assert restarted.ranks == 512 and "all 512" in restarted.detail
    assert "could not rejoin" in restarted.detail


def test_every_rank_is_drawn_without_gaps_or_overlaps(issue_run):
    for r, rows in issue_run.segments.items():
        rows = sorted(rows)
        assert rows[0][0] == 0.0 and rows[-1][1] == issue_run.finished_at_s
        assert all(a[1] == b[0] for a, b in zip(rows, rows[1:])), r
    states = {st for _s, _e, st in issue_run.segments[0]}
    assert barrier.STALLED in states and barrier.RESTARTING in states
    assert barrier.LOST in {st for _s, _e, st in issue_run.segments[37]}
    assert barrier.STALLED not in {st for _s, _e, st in issue_run.segments[37]}


def test_no_collective_completes_with_a_rank_missing(issue_run):
    assert issue_run.collectives, "the run should record completed collectives"
    assert all(n == 512 for _comm, _op, _t, n in issue_run.collectives)
    lost_at = issue_run.failures[0].lost_at_s
    # communicator 0 (the one rank 37 was lost from) completes nothing at or after the loss
    assert max(t for comm, _op, t, _n in issue_run.collectives if comm == 0) < lost_at
    assert any(comm == 1 for comm, *_ in issue_run.collectives)


def test_communicator_waits_for_every_rank():
    env = simpy.Environment()
    comm = barrier.Communicator(env, 4, 0)
    ev = None
    for r in (0, 1, 2):
        ev = comm.arrive(("all-reduce", 1), r)
        assert not ev.triggered
    assert comm.arrive(("all-reduce", 1), 3) is ev and ev.triggered


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(2, 12), st.data())
def test_a_lost_rank_blocks_every_pending_collective(n, data):
    env = simpy.Environment()
    comm = barrier.Communicator(env, n, 0)
    lost = data.draw(st.integers(0, n - 1))
    before = data.draw(st.booleans())
    key = ("all-reduce", 1)
    if before:   # the rank had already entered the collective when it died
        comm.arrive(key, lost)
    comm.lose(lost)
    order = data.draw(st.permutations(range(n)))
    events = [comm.arrive(key, r) for r in order]     # even the dead rank "arriving" cannot count
    assert not any(e.triggered for e in events)
    assert comm.completed == []


def test_late_ranks_make_the_early_ones_wait_exactly_the_seed_cost():
    # 400 ranks' pods start at 0, 112 at 25 min; no init timeout: the seed's 400 × 25 min
    joins = (0.0,) * 400 + (25 * M,) * 112
    r = simulate(BarrierScenario(ranks=512, join_times_s=joins, init_timeout_s=math.inf))
    assert r.init_wait_gpu_hours == pytest.approx(cost.wasted_gpu_hours(400, 25 * M))
    assert r.restarts == 0 and r.finished_at_s == 25 * M + 4 * H


def test_a_rank_that_never_joins_times_out_init():
    r = simulate(BarrierScenario(ranks=8, losses=(RankLoss(5, 0.0),), join_times_s=(0.0,) * 7 + (60.0,)))
    assert r.restarts == 1 and r.failures[0].stalled_in == barrier.INIT_OP
    assert r.failures[0].detected_by == "first barrier timeout"
    assert r.failures[0].detected_at_s == 600.0 and r.finished


def test_the_first_barrier_times_out_by_torchruns_rendezvous_not_the_collective_timeout():
    # a 5-minute collective timeout does not shorten the rendezvous: its join_timeout is 600 s
    sc = dict(ranks=8, losses=(RankLoss(5, 0.0),), join_times_s=(0.0,) * 7 + (60.0,), timeout_s=300.0)
    assert simulate(BarrierScenario(**sc)).failures[0].detected_at_s == nccl.RENDEZVOUS_JOIN_TIMEOUT_S
    assert simulate(BarrierScenario(init_timeout_s=120.0, **sc)).failures[0].detected_at_s == 120.0


def test_a_reported_loss_is_noticed_in_half_a_minute_a_silent_one_after_the_timeout():
    silent = simulate(BarrierScenario(ranks=64, losses=(RankLoss(7, 3 * H + 30),)))
    error = simulate(BarrierScenario(ranks=64, losses=(RankLoss(7, 3 * H + 30, kind="error"),)))
    fs, fe = silent.failures[0], error.failures[0]
    assert fs.stalled_at_s == fe.stalled_at_s == 3 * H + 60          # the survivors finish their step first
    assert fs.detected_by == "watchdog timeout" and fs.detected_at_s == fs.stalled_at_s + 600
    assert fe.detected_by == "NCCL error"
    assert fe.detected_at_s == pytest.approx(fe.stalled_at_s + nccl.NCCL_ERROR_AFTER_S)
    assert 30 < nccl.NCCL_ERROR_AFTER_S < 35                         # 8 attempts of 4.3 s: "half a minute"
    assert error.lost_gpu_hours < silent.lost_gpu_hours
    assert error.lost_gpu_hours == pytest.approx(cost.lost_rank_gpu_hours(
        64, fe.lost_at_s - fe.last_checkpoint_at_s, fe.hang_detected_after_s, 5 * M))
    assert any(e.phase == "nccl error" for e in error.trace)
    # a collective timeout shorter than the transport's retries still wins
    quick = simulate(BarrierScenario(ranks=8, losses=(RankLoss(3, 100.0, kind="error"),), timeout_s=20.0))
    assert quick.failures[0].detected_by == "watchdog timeout"
    assert quick.failures[0].detected_at_s == quick.failures[0].stalled_at_s + 20.0


def test_a_reported_loss_at_a_step_boundary_fails_the_collective_entered_then():
    # lost exactly when the step-60 all-reduce begins: the error counts from that collective's start
    r = simulate(BarrierScenario(ranks=4, step_s=60.0, losses=(RankLoss(2, 3600.0, kind="error"),)))
    f = r.failures[0]
    assert f.detected_by == "NCCL error" and f.detected_at_s == pytest.approx(3600.0 + nccl.NCCL_ERROR_AFTER_S)


def test_nccl_ib_defaults_and_their_ranges():
    assert nccl.ib_attempt_s() == pytest.approx(4.096e-6 * 2 ** 20)
    assert nccl.ib_error_after_s(20, 0) == pytest.approx(nccl.ib_attempt_s(20))
    for bad in (-1, 32, 1.5, True):
        with pytest.raises(ValueError):
            nccl.ib_attempt_s(bad)
    with pytest.raises(ValueError):
        nccl.ib_error_after_s(20, 8)


def test_replacing_one_rank_is_not_enough():
    sc = dict(ranks=64, losses=(RankLoss(7, 3 * H + 30),), restart_s=5 * M)
    naive = simulate(BarrierScenario(strategy="replace-rank", **sc))
    plain = simulate(BarrierScenario(**sc))
    waiting = [e for e in naive.trace if e.phase == "replacement waiting"]
    assert len(waiting) == 1 and "1/64 ranks joined" in waiting[0].detail
    assert naive.restarts == plain.restarts == 1
    assert naive.lost_gpu_hours == plain.lost_gpu_hours
    assert barrier.REPLACEMENT in {st for _s, _e, st in naive.segments[7]}


def test_replacement_still_starting_when_the_watchdog_fires():
    # restart_s (10 min) > timeout (5 min): torchrun tears the attempt down while the replacement
    # is still being scheduled; the run goes on exactly as without a replacement
    sc = dict(ranks=2, work_s=H, timeout_s=5 * M, restart_s=10 * M, losses=(RankLoss(1, 1000.0),))
    naive = simulate(BarrierScenario(strategy="replace-rank", **sc))
    plain = simulate(BarrierScenario(**sc))
    assert naive.finished and naive.restarts == plain.restarts == 1
    assert naive.finished_at_s == plain.finished_at_s
    assert not [e for e in naive.trace if e.phase == "replacement waiting"]


def test_without_a_timeout_the_job_hangs_forever():
    r = simulate(BarrierScenario(ranks=8, losses=(RankLoss(3, 100.0),), timeout_s=math.inf))
    assert not r.finished and r.restarts == 0 and r.hang_detected_after_s is None
    assert r.trace[-1].phase == "hung"


def test_a_loss_after_the_job_finished_changes_nothing():
    r = simulate(BarrierScenario(ranks=4, work_s=H, losses=(RankLoss(1, 2 * H),)))
    assert r.finished and r.restarts == 0 and r.finished_at_s == H


def test_same_input_same_output():
    sc = BarrierScenario(ranks=32, losses=(RankLoss(3, 5000.0), RankLoss(9, 9000.0)), checkpoint_cost_s=30)
    assert simulate(sc).to_dict() == simulate(sc).to_dict()


def test_scenario_from_gang_start_times():
    sc = barrier.scenario_from_start_times([100.0, 130.0, 100.0], work_s=H)
    assert sc.joins == (0.0, 30.0, 0.0)
    r = simulate(sc)
    assert r.init_wait_gpu_hours == pytest.approx(2 * 30 / 3600)


@settings(max_examples=examples(25), deadline=None)
@given(ranks=st.integers(2, 24), rank=st.data(), at_steps=st.integers(0, 200), offset=st.sampled_from([0, 20]),
       every=st.integers(1, 12), ckpt_cost=st.sampled_from([0.0, 30.0]), timeout=st.sampled_from([120.0, 600.0]),
       restart=st.sampled_from([0.0, 300.0]))
def test_sim_agrees_with_the_cost_formula_and_accounts_for_every_gpu_second(
        ranks, rank, at_steps, offset, every, ckpt_cost, timeout, restart):
    lost = rank.draw(st.integers(0, ranks - 1))
    sc = BarrierScenario(ranks=ranks, work_s=12 * 5 * M, step_s=5 * M, checkpoint_every_s=every * 5 * M,
                         checkpoint_cost_s=ckpt_cost, timeout_s=timeout, restart_s=restart,
                         losses=(RankLoss(lost, at_steps * 60.0 + offset),))
    r = simulate(sc)
    assert r.finished
    for f in r.failures:
        assert f.detected_at_s - f.stalled_at_s == timeout
        assert f.lost_gpu_hours == pytest.approx(cost.lost_rank_gpu_hours(
            ranks, f.since_checkpoint_s, f.hang_detected_after_s, restart))
    assert all(n == ranks for *_x, n in r.collectives)
    # every GPU-second is useful training, a saved checkpoint, waiting in init, or lost
    checkpoints = sum(1 for e in r.trace if e.phase == "checkpoint")
    accounted = ranks * (sc.work_s + checkpoints * ckpt_cost) / H + r.init_wait_gpu_hours + r.lost_gpu_hours
    assert r.held_gpu_hours == pytest.approx(accounted)
    drawn = sum(e - s for rows in r.segments.values() for s, e, _st in rows) / H
    assert drawn == pytest.approx(r.held_gpu_hours)


@pytest.mark.parametrize("kwargs,field", [
    (dict(ranks=0), "ranks"),
    (dict(ranks=8, losses=(RankLoss(8, 60.0),)), "lose-rank"),
    (dict(ranks=8, work_s=90.0), "work"),
    (dict(ranks=8, checkpoint_every_s=90.0), "checkpoint-every"),
    (dict(ranks=8, strategy="replace-node"), "strategy"),
    (dict(ranks=8, join_times_s=(0.0,)), "join_times_s"),
    (dict(ranks=8, timeout_s=-1.0), "timeout"),
    (dict(ranks=8, losses=(RankLoss(1, 60.0, kind="vanished"),)), "loss-kind"),
    (dict(ranks=8, nccl_error_s=0.0), "nccl-error"),
])
def test_bad_scenarios(kwargs, field):
    with pytest.raises(InputError) as err:
        BarrierScenario(**kwargs)
    assert err.value.field == field and "\n" not in str(err.value)


# ---- the CLI --------------------------------------------------------------------------------

ISSUE_ARGS = ["barrier", "simulate", "--ranks", "512", "--lose-rank", "37", "--at", "3h",
              "--checkpoint-every", "1h", "--timeout", "10m", "--restart", "5m"]


def test_cli_json(capsys):
    assert main(ISSUE_ARGS + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hang_detected_after_s"] == 600.0
    assert doc["lost_gpu_hours"] == 640.0
    assert doc["restarts"] == 1
    assert {"joined", "training", "stalled", "timed out", "restarted"} <= {e["phase"] for e in doc["trace"]}


def test_cli_text(capsys):
    assert main(ISSUE_ARGS) == 0
    out = capsys.readouterr().out
    assert out.startswith("ARG ranks 512")
    assert "hang_detected_after_s = 600" in out and "restarts              = 1" in out
    assert "512 ranks × (1h since the checkpoint + 10m detection + 5m restart) = 640.00" in out


@pytest.mark.parametrize("extra,needle", [
    (["--lose-rank", "600", "--at", "1h"], "rank 600 does not exist"),
    (["--lose-rank", "3"], "go together"),
    (["--at", "3 hours", "--lose-rank", "3"], "--at"),
    (["--ranks", "0"], "--ranks"),
    (["--timeout", "ten minutes"], "--timeout"),
])
def test_cli_errors_are_one_line(capsys, extra, needle):
    assert main(["barrier", "simulate", "--work", "1h"] + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_join_times_from_a_gang_history():
    # a job holds 400 GPUs at 0 s and all 512 at 1500 s, then trains (the seed, as a gang sim records it)
    history = [(0.0, 400, False), (1500.0, 512, True), (9000.0, 0, False)]
    joins = barrier.join_times_from_held(history, 512)
    assert joins.count(0.0) == 400 and joins.count(1500.0) == 112
    r = simulate(barrier.scenario_from_start_times(joins, work_s=H, init_timeout_s=math.inf))
    assert r.init_wait_gpu_hours == pytest.approx(400 * 1500 / 3600)
    with pytest.raises(InputError, match="only 400 GPUs"):
        barrier.join_times_from_held(history[:1], 512)
