"""The OOM figure and playground: they draw what the simulator decided."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from courselib.plots.oom import points_bars, timeline  # noqa: E402
from courselib.sim.memcg import simulate, summary  # noqa: E402
from courselib.widgets.oom import default_scenario, show  # noqa: E402


def test_timeline_marks_every_kill_and_the_limit():
    tl = simulate(default_scenario())
    fig = timeline(tl)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts == [", ".join(k.oom.killed) for k in tl.kills] and texts
    assert any(line.get_label() == "memory.max" for line in ax.get_lines())
    assert ax.get_ylabel() == "memory charged (MiB)" and ax.get_xlabel() == "time (s)"


def test_points_bars_colour_the_victim():
    out = summary(simulate(default_scenario()))
    fig = points_bars(out)
    bars = fig.axes[0].patches
    victim_index = list(out["points"]).index(out["victim"])
    colours = {tuple(b.get_facecolor()) for i, b in enumerate(bars) if i != victim_index}
    assert tuple(bars[victim_index].get_facecolor()) not in colours


def test_default_playground_case():
    out, fig = show()
    # 200 MiB web, 120 MiB cache (+500 adj = 500 * 131 pages), the leaker grows to fill 512 MiB
    assert out["victim"] == "cache" and out["points"]["cache"] == 120 * 256 + 500 * 131
    assert len(fig.axes) == 2
