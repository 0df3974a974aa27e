"""The steppers (issue 32, "time in the learner's hands"): the state after each event of a finished
simulation, computed by courselib.sim.steps, is the simulator's own: the last step is the final
result, stepping forward then back returns the same state, reset returns to before the first event,
and the same run gives the same steps."""
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.io.workload import load_workload
from courselib.model.generate import default_workload, mixed_workload
from courselib.sim import barrier
from courselib.sim.gang import simulate
from courselib.sim.steps import Cursor, barrier_steps, clock, gang_steps, rank_states
from budget import examples

POLICIES = ["kube-default", "kube-gang", "volcano", "kueue", "slurm"]
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "workloads"


def assert_final(result, steps):
    last = steps[-1]
    assert len(steps) == len(result.trace) + 1 + sum(len(g.binds) - g.lines for g in result.binds)
    for job in result.jobs:
        assert last.held[job.name] == job.gpus_held, (result.policy, job.name)
        history = result.histories[job.name]
        training = bool(history[-1][2]) if history and job.gpus_held else False
        assert last.training[job.name] == training, (result.policy, job.name, last.what)
    assert last.training_gpus + last.idle_gpus + last.free_gpus == result.total_gpus


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", [{}, {"nodes": 128}, {"minutes_b": 10}, {"pods_a": 96, "pods_b": 700}])
def test_the_last_gang_step_is_the_final_result(policy, case):
    result = simulate(default_workload(**case), policy, horizon=6 * 3600)
    assert_final(result, gang_steps(result))


@pytest.mark.parametrize("name", ["gang-preempt-whole-group.yaml", "jobset-max-restarts.yaml",
                                  "jobset-preempt-one-pod.yaml", "slurm-backfill.yaml"])
def test_events_that_stop_training_are_stepped_through(name):
    from courselib.sim.gang import EVENT_POLICIES

    workload = load_workload(EXAMPLES / name)
    for policy in (EVENT_POLICIES if workload.events else POLICIES):
        result = simulate(workload, policy)
        assert_final(result, gang_steps(result))


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(POLICIES))
def test_every_step_adds_up_and_the_last_is_final(seed, policy):
    result = simulate(mixed_workload(seed, jobs=8), policy)
    steps = gang_steps(result)
    assert_final(result, steps)
    for s in steps:
        assert s.free_gpus >= 0 and s.training_gpus + s.idle_gpus + s.free_gpus == result.total_gpus
        assert all(h >= 0 for h in s.held.values())
    assert [s.t for s in steps] == sorted(s.t for s in steps)


def test_the_seeds_deadlock_read_step_by_step():
    steps = gang_steps(simulate(default_workload(), "kube-default", horizon=6 * 3600))
    assert steps[0].held == {"a": 0, "b": 0} and steps[0].free_gpus == 600
    assert "before the first event" in steps[0].text
    bound = steps[3]
    assert bound.job == "a" and bound.what.startswith("bound 300 pods") and bound.held == {"a": 300, "b": 0}
    assert bound.text.startswith("t=0:00 job a: bound 300 pods")
    assert bound.text.endswith("GPUs held: job a 300, job b 0; of 600 GPUs 0 training, 300 held idle, 300 free.")
    assert steps[-1].idle_gpus == 600 and steps[-1].training_gpus == 0


def test_volcano_trains_then_releases():
    steps = gang_steps(simulate(default_workload(), "volcano", horizon=6 * 3600))
    passed = next(s for s in steps if s.what.startswith("barrier passed"))
    assert passed.training == {"a": True, "b": False} and passed.training_gpus == 512
    done = next(s for s in steps if s.what.startswith("completed") and s.job == "a")
    assert done.t == 7200 and done.held["a"] == 0 and not done.training["a"]


SCENARIOS = [
    barrier.BarrierScenario(ranks=64, losses=(barrier.RankLoss(7, 185 * 60),), checkpoint_every_s=3600,
                            timeout_s=600, restart_s=300),
    barrier.BarrierScenario(ranks=16, work_s=2 * 3600, losses=(barrier.RankLoss(5, 3600 + 30),),
                            strategy="replace-rank"),
    barrier.BarrierScenario(ranks=32, losses=(barrier.RankLoss(3, 3.5 * 3600, "error"),), recovery="shrink"),
    barrier.BarrierScenario(ranks=8, losses=(barrier.RankLoss(2, 1800),), timeout_s=float("inf"), work_s=3600),
    barrier.BarrierScenario(ranks=8, join_times_s=(0.0,) * 6 + (1500.0,) * 2, init_timeout_s=float("inf"),
                            work_s=3600),
]


@pytest.mark.parametrize("sc", SCENARIOS, ids=["restart", "replace-rank", "shrink", "hung", "late"])
def test_the_last_barrier_step_is_the_final_result(sc):
    result = barrier.simulate(sc)
    steps = barrier_steps(result)
    last = steps[-1]
    assert len(steps) == len(result.trace) + 1
    assert last.restarts == result.restarts
    assert last.lost_gpu_hours == pytest.approx(result.lost_gpu_hours)
    assert last.finished == result.finished
    assert last.t == result.trace[-1].t_s
    for s in steps:
        assert sum(s.states.values()) <= sc.ranks + sum(1 for f in result.failures for _ in f.lost_ranks)


def test_the_barrier_steps_tell_the_story():
    steps = barrier_steps(barrier.simulate(SCENARIOS[0]))
    lost = next(s for s in steps if s.phase == "stalled")
    assert lost.t == 185 * 60 and lost.states[barrier.STALLED] == 63 and lost.states[barrier.LOST] == 1
    assert lost.restarts == 0 and lost.lost_gpu_hours == 0
    assert sum(steps[0].states.values()) == 0 and "before the first event" in steps[0].text
    timed_out = next(s for s in steps if s.phase == "timed out")
    assert timed_out.states[barrier.RESTARTING] == 64 and timed_out.restarts == 0
    back = next(s for s in steps if s.phase == "restarted")
    assert back.restarts == 1 and back.lost_gpu_hours > 0 and back.states[barrier.TRAINING] == 64
    assert steps[-1].finished and steps[-1].text.startswith("t=4:20 finished (64 ranks): all 240 steps done")


def test_step_back_reset_and_the_ends():
    steps = gang_steps(simulate(default_workload(), "slurm", horizon=6 * 3600))
    c = Cursor(steps)
    assert c.state is steps[0] and c.back() is steps[0]          # no step before the first
    for k in range(1, len(steps)):
        before = c.state
        after = c.step()
        assert after is steps[k] and c.back() == before and c.step() == after
    assert c.at_end and c.step() is steps[-1]                     # nor after the last
    assert c.reset() is steps[0] and c.index == 0
    assert c.seek(10_000) is steps[-1] and c.seek(-3) is steps[0]
    with pytest.raises(ValueError, match="at least one step"):
        Cursor(())


def test_steps_are_deterministic():
    one = gang_steps(simulate(default_workload(minutes_b=10), "kube-default", horizon=6 * 3600))
    two = gang_steps(simulate(default_workload(minutes_b=10), "kube-default", horizon=6 * 3600))
    assert one == two and [s.to_dict() for s in one] == [s.to_dict() for s in two]
    sc = SCENARIOS[0]
    assert barrier_steps(barrier.simulate(sc)) == barrier_steps(barrier.simulate(sc))


def test_clock():
    assert (clock(0), clock(300), clock(7200), clock(11130.4)) == ("0:00", "0:05", "2:00", "3:05:30")


def test_the_figures_mark_now():
    """The playgrounds' own figures, drawn at a step: a line at the step's time (the widgets draw these)."""
    from courselib.plots.barrier import timeline
    from courselib.plots.gang import gantt
    import matplotlib.pyplot as plt

    result = simulate(default_workload(), "volcano", horizon=6 * 3600)
    fig = gantt(result, at=7200)
    lines = [l for ax in fig.axes for l in ax.get_lines() if list(l.get_xdata()) == [2.0, 2.0]]
    assert len(lines) == 2
    plt.close(fig)
    fig = timeline(barrier.simulate(SCENARIOS[0]), at=11100)
    assert any(list(l.get_xdata()) == [11100 / 3600] * 2 for l in fig.axes[0].get_lines())
    plt.close(fig)


def test_the_barrier_stepper_widget():
    pytest.importorskip("ipywidgets")
    from courselib.widgets import stepper

    result = barrier.simulate(SCENARIOS[1])
    controls, line, _ = stepper.barrier(result, start=0).children
    assert controls.children[-1].value == 0 and "before the first event" in line.value
    controls.children[2].click()
    assert barrier_steps(result)[1].phase in line.value


def test_the_stepper_widget_moves_over_the_steps():
    pytest.importorskip("ipywidgets")
    from courselib.widgets import stepper

    result = simulate(default_workload(), "volcano", horizon=6 * 3600)
    ui = stepper.gang(result)
    controls, line, _ = ui.children
    play, back, step, reset, slider = controls.children
    last = len(result.trace)
    assert slider.max == slider.value == last and f"event {last} of {last}" in line.value  # the whole run first
    step.click()
    assert slider.value == last
    reset.click()
    assert slider.value == 0 and "event 0 of" in line.value
    step.click(); step.click()
    assert slider.value == 2 and gang_steps(result)[2].text.split(".")[0] in line.value
    back.click()
    assert slider.value == 1
    reset.click()
    assert slider.value == 0 and not play.playing and "before the first event" in line.value


def test_the_static_race_embeds_the_models_steps():
    """The website's race view steps through states courselib computed (no kernel, no JS simulation)."""
    from courselib.static import views

    for policy, nodes, delay in [("kube-default", 75, 0), ("volcano", 75, 0), ("kube-default", 80, 10),
                                 ("slurm", 64, 30)]:
        case = views.race_case(policy, nodes, delay)
        result = simulate(default_workload(nodes=nodes, minutes_b=delay), policy, horizon=views.RACE_HORIZON_S,
                          binds=True)
        steps = gang_steps(result)
        assert case["steps"] == [views.step_row(s) for s in steps]
        assert [row["text"] for row in case["steps"]] == [s.text for s in steps]
        names = [j["name"] for j in case["jobs"]]
        last = case["steps"][-1]
        assert dict(zip(names, last["held"])) == {j.name: j.gpus_held for j in result.jobs}
    assert views.race_case("kube-default", 75, 10)["steps"] == views.race_case("kube-default", 75, 10)["steps"]


def test_the_static_barrier_views_embed_the_models_steps():
    """The website's barrier views step through courselib's states: the 512-rank run's 12 events and each rung's."""
    from courselib.model import recovery
    from courselib.static import views

    run = views.barrier_run_table()
    result = barrier.simulate(views.BARRIER_RUN)
    steps = barrier_steps(result)
    assert len(steps) == 13 and run["cases"]["run"]["steps"] == [views.barrier_step_row(s) for s in steps]
    ladder = views.recovery_ladder_table()
    assert ladder["choices"] == list(recovery.RUNGS)
    for rung in recovery.RUNGS:
        r = barrier.simulate(views.ladder_scenario(rung))
        case = ladder["cases"][rung]
        assert [row["text"] for row in case["steps"]] == [s.text for s in barrier_steps(r)]
        assert case["summary"].endswith(f"{r.lost_gpu_hours:.2f} GPU-hours lost.")
        # the chart's counts are the segments' at each change, and every rank is somewhere until the end
        for t, row in zip(case["usage"]["t"], case["usage"]["counts"]):
            assert row == [rank_states(r, t)[s] for s in barrier.STATES]
        assert case["usage"]["t"][-1] == r.ended_at_s and sum(case["usage"]["counts"][-1]) == 0
    assert views.barrier_run_table() == run


def test_the_notebook_steps_the_run_the_site_shows():
    """The playground's kernel cell and the site's view are the same run (the notebook's scenario, as written)."""
    import json

    from courselib.static import views

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "barrier-playground.ipynb").read_text())
    src = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert ("BarrierScenario(ranks=512, losses=(RankLoss(37, 3 * 3600),), checkpoint_every_s=3600,\n"
            "                                  timeout_s=600, restart_s=300)") in src
    assert views.BARRIER_RUN == barrier.BarrierScenario(ranks=512, losses=(barrier.RankLoss(37, 3 * 3600),),
                                                        checkpoint_every_s=3600, timeout_s=600, restart_s=300)
    assert ('BarrierScenario(ranks=512, losses=(RankLoss(37, 3.5 * 3600, "error"),), recovery=name,\n'
            '                                 ladder={"replacement_wait_s": 600})') in src
    mds = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "```{course-view} barrier-run" in mds and "```{course-view} recovery-ladder" in mds


def assert_binds_sum_to_lines(result):
    """Each cycle's recorded binds add up to its 'bound k pods' lines: pods per job, and the GPUs held after."""
    for g in result.binds:
        lines = result.trace[g.first:g.first + g.lines]
        assert all(e.what.startswith("bound ") for e in lines)
        for e in lines:
            mine = [b for b in g.binds if b.job == e.job]
            assert sum(b.pods for b in mine) == int(e.what.split()[1]), (result.policy, e)
            assert mine[-1].held == e.held and mine[-1].placed == int(e.what.split(": ")[1].split("/")[0])
        assert {b.job for b in g.binds} == {e.job for e in lines}
    bound_lines = sum(1 for e in result.trace if e.what.startswith("bound "))
    assert sum(g.lines for g in result.binds) == bound_lines


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", [{}, {"nodes": 128}, {"minutes_b": 10}, {"pods_a": 96, "pods_b": 700}])
def test_steps_per_bind_are_the_simulators_binds(policy, case):
    """With the binds recorded, the steps go bind by bind; the run itself is the same, its last step final."""
    plain = simulate(default_workload(**case), policy, horizon=6 * 3600)
    result = simulate(default_workload(**case), policy, horizon=6 * 3600, binds=True)
    assert result.trace == plain.trace and result.jobs == plain.jobs and not plain.binds
    assert_binds_sum_to_lines(result)
    steps = gang_steps(result)
    assert_final(result, steps)
    # one step per bind instead of each cycle's lines
    extra = sum(len(g.binds) - g.lines for g in result.binds)
    assert len(steps) == len(result.trace) + 1 + extra
    for s in steps:
        assert s.free_gpus >= 0 and s.training_gpus + s.idle_gpus + s.free_gpus == result.total_gpus


def test_the_seeds_deadlock_pod_by_pod():
    """kube-default binds the seed's pods one at a time, a's and b's alternating, until 600 GPUs are held."""
    steps = gang_steps(simulate(default_workload(), "kube-default", horizon=6 * 3600, binds=True))
    binds = [s for s in steps if s.what.startswith("bound ")]
    assert len(binds) == 600 and len(steps) == 605
    assert [s.job for s in binds] == ["a", "b"] * 300
    assert [s.held[s.job] for s in binds] == [k // 2 + 1 for k in range(600)]
    assert binds[0].text.startswith("t=0:00 job a: bound 1 pod on node1: 1/512 placed (min_member 512).")
    assert binds[-1].idle_gpus == 600 and binds[-1].free_gpus == 0
    # a gang policy places the whole gang in one go: its step is the trace's own line
    volcano = simulate(default_workload(), "volcano", horizon=6 * 3600, binds=True)
    assert gang_steps(volcano) == gang_steps(simulate(default_workload(), "volcano", horizon=6 * 3600))


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(POLICIES))
def test_the_fast_and_reference_engines_record_the_same_binds(seed, policy):
    w = mixed_workload(seed, jobs=8)
    fast = simulate(w, policy, binds=True)
    ref = simulate(w, policy, binds=True, reference=True)
    assert fast.binds == ref.binds
    assert_binds_sum_to_lines(fast)
    assert_final(fast, gang_steps(fast))


def test_events_that_stop_training_are_stepped_through_bind_by_bind():
    from courselib.sim.gang import EVENT_POLICIES

    for name in ("gang-preempt-whole-group.yaml", "jobset-preempt-one-pod.yaml"):
        workload = load_workload(EXAMPLES / name)
        for policy in EVENT_POLICIES:
            result = simulate(workload, policy, binds=True)
            assert_binds_sum_to_lines(result)
            assert_final(result, gang_steps(result))
