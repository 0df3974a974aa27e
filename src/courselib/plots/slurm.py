"""A real Slurm replay beside courselib's model: when each job started and ran, in both.

:func:`replay_vs_model` draws one row per job with two bars: what the real ``slurmctld`` did
(from ``squeue``) and what the ``slurm`` policy predicts for the same submissions. A job that
never started has no bar, and its pending reason is written at the row's end.
"""
from __future__ import annotations

from courselib import plots


def replay_vs_model(result, comparison, model, title: str | None = None):
    """Figure: real (solid) vs model (hatched) run of each job, seconds after release."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    plots.use_style()
    subs = {s.name: s for s in result.plan.submissions}
    rows = comparison.jobs
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.6 * len(rows)))
    horizon = 1.0
    for k, row in enumerate(rows):
        y = len(rows) - 1 - k
        sleep = subs[row.name].sleep
        mj = model.job(row.name)
        if row.real_start is not None:
            rj = result.job(row.name)
            end = rj.end if rj.end is not None else row.real_start + sleep
            ax.broken_barh([(row.real_start, end - row.real_start)], (y + 0.02, 0.36),
                           color=plots.TRAINING)
            horizon = max(horizon, end)
        if mj.start is not None:
            end = mj.end if mj.end is not None else mj.start + sleep
            ax.broken_barh([(mj.start, end - mj.start)], (y - 0.38, 0.36), facecolor="white",
                           edgecolor=plots.BLUE, hatch="///")
            horizon = max(horizon, end)
        rj = result.job(row.name)
        if rj.submitted is not None:
            ax.plot([rj.submitted], [y], marker="v", color=plots.KILLED, markersize=5)
        label = row.real_reason if row.real_start is None else None
        if label:
            ax.text(0.02, y + 0.2, f"never started: {label}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r.name for r in reversed(rows)])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(0, horizon * 1.05)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("seconds after the partition was released (replay time)")
    ax.legend(handles=[Patch(color=plots.TRAINING, label="real slurmctld"),
                       Patch(facecolor="white", edgecolor=plots.BLUE, hatch="///",
                             label="courselib slurm model"),
                       plt.Line2D([], [], marker="v", color=plots.KILLED, linestyle="",
                                  label="submitted")],
              loc="upper right", ncols=3, bbox_to_anchor=(1, 1.25), fontsize=8)
    if title:
        ax.set_title(title, fontsize=9, loc="left", pad=22)
    fig.tight_layout()
    return fig


def agreement_bars(comparisons):
    """Figure: checks agreed / made per workload (started, order, reasons), one bar each."""
    import matplotlib.pyplot as plt

    plots.use_style()
    names = [c.workload for c in comparisons]
    agreed = [c.agreed for c in comparisons]
    total = [c.checks for c in comparisons]
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.4 * len(names)))
    ys = list(range(len(names)))[::-1]
    ax.barh(ys, total, color=plots.FREE, label="checks made")
    ax.barh(ys, agreed, color=plots.TRAINING, label="real Slurm and model agree")
    for y, a, t in zip(ys, agreed, total):
        ax.text(t + 0.2, y, f"{a}/{t}", va="center", fontsize=8,
                color=plots.KILLED if a == t else plots.HELD_IDLE)
    ax.set_yticks(ys, names)
    ax.set_xlabel("checks (jobs started, start-order pairs, pending reasons)")
    ax.set_xlim(0, max(total + [1]) * 1.15)
    ax.grid(axis="y", visible=False)
    ax.legend(loc="upper right", ncols=2, bbox_to_anchor=(1, 1.18), fontsize=8)
    fig.tight_layout()
    return fig
