"""The topology view's states (the playground's figure and the website's view read them): at each event of
a run, the pods on each node are the running jobs' placements, and a waiting job's line is the pending
message the same model gives when the run is stopped at that moment."""
from __future__ import annotations

import pytest

from courselib.plots.topology import EXAMPLES, POLICIES, example, placement_figure, states
from courselib.sim.gang import simulate


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_state_is_the_runs_placements_and_pending_messages(name):
    w = example(name)
    for policy in POLICIES:
        run = simulate(w, policy, horizon=6 * 3600)
        got = states(w, policy)
        assert got[0].t == 0 and [s.t for s in got] == sorted({s.t for s in got})
        for s in got:
            running = {j.name: dict(j.placement) for j in run.jobs
                       if j.start is not None and j.start <= s.t and (j.end is None or j.end > s.t)}
            on = {}
            for node, jobs in enumerate(s.nodes):
                for job, gpus in jobs:
                    on.setdefault(job, {})[node] = gpus
            assert on == running, (name, policy, s.t)
            assert all(sum(g for _, g in jobs) <= w.cluster.gpus_per_node for jobs in s.nodes)
            for job, why in s.waiting:
                assert why == (simulate(w, policy, horizon=s.t).job(job).pending_reason or "waiting")


def test_the_fragmentation_story_one_minute_in():
    w = example("fragmentation")
    at = {p: [s for s in states(w, p) if s.t <= 60][-1] for p in POLICIES}
    assert [j for j, _ in at["kueue"].waiting] == ["c"] and "allows to fit only 3 out of 6" in at["kueue"].waiting[0][1]
    assert not at["kube-default"].waiting and not at["slurm"].waiting


def test_the_figure_has_one_panel_per_policy():
    import matplotlib.pyplot as plt

    w = example("mixed")
    fig = placement_figure(w, {p: states(w, p) for p in ("kueue", "kube-default")}, t=20 * 60)
    assert [ax.get_title(loc="left").split(" at ")[0] for ax in fig.axes] == ["kueue", "kube-default"]
    plt.close(fig)


def test_an_unknown_example_is_one_line():
    with pytest.raises(FileNotFoundError, match="examples/topology/nope.yaml not found"):
        example("nope")
