"""The barrier timeline figure shows the states the trace reports."""
from __future__ import annotations

from courselib.plots import barrier as pbar
from courselib.sim.barrier import LOST, STALLED, TRAINING, BarrierScenario, RankLoss, simulate


def test_merged_joins_adjacent_segments_of_one_state():
    rows = [(0, 10, "training"), (10, 20, "training"), (20, 30, "stalled"), (35, 40, "stalled")]
    assert pbar.merged(rows) == [(0, 20, "training"), (20, 30, "stalled"), (35, 40, "stalled")]


def test_timeline_draws_stalled_and_lost_ranks():
    r = simulate(BarrierScenario(ranks=32, work_s=2 * 3600, losses=(RankLoss(5, 3600 + 30),)))
    fig = pbar.timeline(r, title="t")
    ax = fig.axes[0]
    colours = {tuple(round(c, 3) for c in p.get_facecolor()[:3]) for p in ax.patches}
    from matplotlib.colors import to_rgb
    for state in (TRAINING, STALLED, LOST):
        assert tuple(round(c, 3) for c in to_rgb(pbar.COLOURS[state])) in colours
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["rank lost", "timeout", "restart"]
    # one bar per merged segment of every rank
    assert len(ax.patches) == sum(len(pbar.merged(rows)) for rows in r.segments.values())
