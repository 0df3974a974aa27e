"""The course's signature figure: a GPU-allocation Gantt chart with idle-but-held GPUs in the warning colour.

:func:`gantt` draws, for a :class:`courselib.sim.gang.Result`, one row per job (GPUs held while
training in ``TRAINING`` green, GPUs held while waiting at the barrier in ``HELD_IDLE``
vermillion) above the cluster's GPUs over time (training / held idle / free, stacked).
"""
from __future__ import annotations

from courselib import plots


def segments(history, end: float):
    """``(t0, t1, held, training)`` pieces of one job's history, clipped to ``end``."""
    out = []
    for (t0, held, training), nxt in zip(history, list(history[1:]) + [(end, 0, False)]):
        t1 = min(nxt[0], end)
        if held and t1 > t0:
            out.append((t0, t1, held, training))
    return out


def usage(result, points: int = 0):
    """Step series (times in s, GPUs training, GPUs held idle, GPUs free) for the whole cluster."""
    end = max(result.end_time, 1e-9)
    times = sorted({0.0, end} | {t for h in result.histories.values() for t, _, _ in h if t <= end})
    train, idle = [], []
    for t in times:
        tr = it = 0
        for h in result.histories.values():
            state = None
            for row in h:
                if row[0] <= t:
                    state = row
                else:
                    break
            if state:
                if state[2]:
                    tr += state[1]
                else:
                    it += state[1]
        train.append(tr)
        idle.append(it)
    free = [result.total_gpus - a - b for a, b in zip(train, idle)]
    return times, train, idle, free


def gantt(result, title: str | None = None, hours: bool = True, at: float | None = None):
    """Per-job Gantt chart plus cluster usage; returns the matplotlib Figure.

    ``at`` (s): a stepper's "now" (:mod:`courselib.sim.steps`): a line there, what comes later veiled."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    plots.use_style()
    scale = 3600.0 if hours else 1.0
    unit = "h" if hours else "s"
    jobs = list(result.jobs)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(7.5, 2.2 + 0.35 * len(jobs) + 2.0), sharex=True,
                                  gridspec_kw={"height_ratios": [max(1.0, 0.35 * len(jobs)), 2.0]})
    end = result.end_time
    biggest = max([j.gpus for j in jobs] + [1])
    for row, job in enumerate(jobs):
        y = len(jobs) - 1 - row
        for t0, t1, held, training in segments(result.histories[job.name], end):
            h = 0.8 * held / biggest
            ax.broken_barh([(t0 / scale, (t1 - t0) / scale)], (y - h / 2, h),
                           color=plots.TRAINING if training else plots.HELD_IDLE)
            if (t1 - t0) / max(end, 1e-9) > 0.08:
                ax.text((t0 + t1) / 2 / scale, y, f"{held}", ha="center", va="center", fontsize=8,
                        color="white")
    ax.set_yticks(range(len(jobs)), [j.name for j in reversed(jobs)])
    ax.set_ylim(-0.6, len(jobs) - 0.4)
    ax.grid(axis="y", visible=False)
    ax.legend(handles=[Patch(color=plots.TRAINING, label="held, training"),
                       Patch(color=plots.HELD_IDLE, label="held, idle at the barrier"),
                       Patch(color=plots.FREE, label="free")],
              loc="upper right", ncols=3, bbox_to_anchor=(1, 1.3))
    ax.set_title(title or result.verdict, fontsize=9, loc="left", pad=24, wrap=True)

    times, train, idle, free = usage(result)
    xs = [t / scale for t in times]
    ax2.stackplot(xs, train, idle, free, step="post", colors=[plots.TRAINING, plots.HELD_IDLE, plots.FREE])
    ax2.set_ylim(0, result.total_gpus)
    ax2.set_xlim(0, max(end / scale, 1e-9))
    ax2.set_xlabel(f"time since the first submission ({unit})")
    ax2.set_ylabel("GPUs in the cluster")
    if at is not None:
        plots.mark_now((ax, ax2), at / scale, max(end / scale, 1e-9))
    fig.tight_layout()
    return fig


def compare(results, metric: str = "wasted_gpu_hours"):
    """A bar per policy of one overall metric (default: wasted GPU-hours); returns the Figure."""
    import matplotlib.pyplot as plt

    plots.use_style()
    fig, ax = plt.subplots(figsize=(6.0, 2.6))
    names = [r.policy for r in results]
    values = [getattr(r, metric) or 0.0 for r in results]
    colors = [plots.HELD_IDLE if r.deadlock else plots.BLUE for r in results]
    ax.bar(names, values, color=colors)
    for i, (v, r) in enumerate(zip(values, results)):
        ax.annotate(f"{v:.1f}" + (" (deadlock)" if r.deadlock else ""), (i, v), ha="center",
                    xytext=(0, 3), textcoords="offset points", fontsize=8)
    ax.set_ylabel(metric.replace("_", " ").replace("gpu", "GPU"))
    return fig
