"""The OOM timeline: memory per process against memory.high and memory.max, each kill marked."""
from __future__ import annotations

from courselib import plots
from courselib.units import PAGE_SIZE

MiB = 2 ** 20


def timeline(tl, *, ax=None, title: str | None = None):
    """Stacked memory (MiB) of every process over time, the limits as lines, kills as black crosses.

    ``tl`` is a :class:`courselib.sim.memcg.Timeline`. Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    plots.use_style()
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    sc = tl.scenario
    names = [p.name for p in sc.processes]
    times = tl.times
    if len(times) == 1:  # a static scenario: one instant, drawn as a short bar
        times = [0.0, 1.0]
        series = [[(v[0] or 0) * PAGE_SIZE / MiB] * 2 for v in (tl.rss[n] for n in names)]
    else:
        series = [[(v or 0) * PAGE_SIZE / MiB for v in tl.rss[n]] for n in names]
    colours = [c for c in plots.PALETTE if c not in (plots.KILLED, plots.HELD_IDLE)]
    ax.stackplot(times, series, labels=names, colors=colours[:len(names)], alpha=0.85, step="post")
    limit_label = "memory.max" if sc.scope == "memcg" else "node RAM"
    ax.axhline(sc.limit * PAGE_SIZE / MiB, color=plots.HELD_IDLE, lw=2, label=limit_label)
    if sc.high is not None:
        ax.axhline(sc.high * PAGE_SIZE / MiB, color=plots.HELD_IDLE, lw=1.5, ls="--", label="memory.high")
    for i, k in enumerate(tl.kills):
        if k.oom.victim is None:
            continue
        ax.axvline(k.time, color=plots.KILLED, lw=1, ls=":")
        ax.plot([k.time], [sc.limit * PAGE_SIZE / MiB], marker="X", ms=10, color=plots.KILLED,
                label="OOM kill" if i == 0 else None, zorder=5)
        ax.annotate(", ".join(k.oom.killed), (k.time, sc.limit * PAGE_SIZE / MiB),
                    xytext=(4, 6 + 10 * (i % 2)), textcoords="offset points", fontsize=8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("memory charged (MiB)")
    ax.set_ylim(0, sc.limit * PAGE_SIZE / MiB * 1.2)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4)
    if title:
        ax.set_title(title)
    return fig


def points_bars(summary: dict, *, ax=None, title: str | None = None):
    """One bar per process: its ``oom_badness`` points at the OOM; the victim in the warning colour."""
    import matplotlib.pyplot as plt

    plots.use_style()
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 3.0))
    else:
        fig = ax.figure
    names = list(summary["points"])
    values = [summary["points"][n] if summary["points"][n] is not None else 0 for n in names]
    colours = [plots.HELD_IDLE if n == summary["victim"] else plots.BLUE for n in names]
    ax.barh(names, values, color=colours)
    for i, n in enumerate(names):
        text = "never (-1000)" if summary["points"][n] is None else f"{summary['points'][n]}"
        ax.annotate(text, (max(values[i], 0), i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.axvline(0, color="#333333", lw=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("oom_badness points (pages)")
    if title:
        ax.set_title(title)
    return fig
