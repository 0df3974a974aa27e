"""The Gantt chart shows idle-but-held GPUs in the warning colour, and only where they exist."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.colors import to_hex  # noqa: E402

from courselib import plots  # noqa: E402
from courselib.plots.gang import gantt, usage  # noqa: E402
from courselib.sim.gang import simulate  # noqa: E402
from courselib.widgets.gang import default_workload  # noqa: E402


def bar_colours(fig) -> set[str]:
    ax = fig.axes[0]
    return {to_hex(c.get_facecolor()[0]) for c in ax.collections}


def test_deadlock_is_all_warning_colour_and_volcano_has_none():
    dead = simulate(default_workload(), "kube-default", horizon=3600)
    fine = simulate(default_workload(), "volcano", horizon=3 * 3600)
    assert bar_colours(gantt(dead)) == {plots.HELD_IDLE.lower()}
    assert bar_colours(gantt(fine)) == {plots.TRAINING.lower()}


def test_usage_series_add_up_to_the_cluster():
    r = simulate(default_workload(nodes=64, pods_a=112, pods_b=512), "kube-default")
    times, train, idle, free = usage(r)
    assert all(a + b + c == r.total_gpus for a, b, c in zip(train, idle, free))
    assert max(idle) == 400 and train[-1] == 0
