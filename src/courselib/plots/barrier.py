"""The NCCL barrier made visible: one row per rank, coloured by what its GPU is doing.

:func:`timeline` draws a :class:`courselib.sim.barrier.BarrierResult`: training in ``TRAINING``
green, waiting at the init barrier in orange, **stalled** in a collective a lost rank never joins
in ``HELD_IDLE`` vermillion (GPUs held, not training), the lost rank in black, restarts in sky blue.
"""
from __future__ import annotations

from courselib import plots
from courselib.sim import barrier

COLOURS = {
    barrier.TRAINING: plots.TRAINING,
    barrier.WAITING: plots.ORANGE,
    barrier.CHECKPOINTING: plots.BLUE,
    barrier.STALLED: plots.HELD_IDLE,
    barrier.LOST: plots.KILLED,
    barrier.REPLACEMENT: plots.PINK,
    barrier.RESTARTING: plots.SKY,
}

LABELS = {
    barrier.TRAINING: "training",
    barrier.WAITING: "joined, waiting for the other ranks (init)",
    barrier.CHECKPOINTING: "writing a checkpoint",
    barrier.STALLED: "stalled in a collective (held, idle)",
    barrier.LOST: "lost rank",
    barrier.REPLACEMENT: "lone replacement waiting in init",
    barrier.RESTARTING: "torn down, restarting",
}


def merged(rows):
    """Adjacent segments of the same state joined into one: ``[(start, end, state), ...]``."""
    out: list[list] = []
    for start, end, state in sorted(rows):
        if out and out[-1][2] == state and abs(out[-1][1] - start) < 1e-9:
            out[-1][1] = end
        else:
            out.append([start, end, state])
    return [tuple(x) for x in out]


def timeline(result, title: str | None = None, hours: bool = True, ax=None, at: float | None = None):
    """Rank-by-time chart of one barrier run; returns the matplotlib Figure.

    ``at`` (s): a stepper's "now" (:mod:`courselib.sim.steps`): a line there, what comes later veiled."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    plots.use_style()
    scale, unit = (3600.0, "h") if hours else (1.0, "s")
    n = result.scenario.ranks
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 3.8))
    else:
        fig = ax.figure
    lost_ranks = {r for f in result.failures for r in f.lost_ranks}
    thick = max(1.0, n / 40)      # keep a lost rank visible among hundreds of rows
    by_state: dict[str, tuple[list, list, list, list]] = {}
    for r, rows in result.segments.items():
        for start, end, state in merged(rows):
            ys, lefts, widths, heights = by_state.setdefault(state, ([], [], [], []))
            h = thick if r in lost_ranks else 1.0
            ys.append(r if r not in lost_ranks else min(max(r, h / 2), n - h / 2))
            lefts.append(start / scale)
            widths.append((end - start) / scale)
            heights.append(h)
    order = [s for s in barrier.STATES if s in by_state]
    for state in order:        # lost ranks last so their thick bar is drawn on top
        ys, lefts, widths, heights = by_state[state]
        ax.barh(ys, widths, left=lefts, height=heights, color=COLOURS[state], linewidth=0,
                zorder=3 if state in (barrier.LOST, barrier.REPLACEMENT) else 2)
    for f in result.failures:
        for t, label in ((f.lost_at_s, "rank lost"), (f.detected_at_s, "timeout"),
                         (f.restarted_at_s, "restart")):
            if t is not None:
                ax.axvline(t / scale, color="0.3", linewidth=0.8, linestyle=":", zorder=4)
                ax.text(t / scale, 1.01, label, rotation=90, fontsize=7, va="bottom", ha="center",
                        transform=ax.get_xaxis_transform())
    from matplotlib.ticker import MaxNLocator

    ax.set_ylim(n - 0.5, -0.5)      # rank 0 at the top
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"time since the first pod started ({unit})")
    ax.set_ylabel(f"rank (0–{n - 1})")
    ax.legend(handles=[Patch(color=COLOURS[s], label=LABELS[s]) for s in order],
              loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=7, frameon=False)
    if at is not None:
        plots.mark_now((ax,), at / scale, result.ended_at_s / scale)
    if title:
        ax.set_title(title, pad=34 if result.failures else None)
    fig.tight_layout()
    return fig


def ladder(rungs, title: str | None = None, ax=None):
    """The recovery ladder for one lost rank: work lost per rung (GPU-hours), split into work redone
    and GPUs held while detecting and recovering; returns the matplotlib Figure.
    ``rungs`` are :class:`courselib.model.recovery.Rung` objects (``recovery.ladder(inputs)``)."""
    import matplotlib.pyplot as plt

    plots.use_style()
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 3.2))
    else:
        fig = ax.figure
    names = [r.name for r in rungs]
    redone = [r.redone_gpu_hours for r in rungs]
    rest = [max(0.0, r.lost_gpu_hours - d) for r, d in zip(rungs, redone)]
    y = range(len(rungs))
    ax.barh(y, redone, color=plots.HELD_IDLE, label="work redone (back to the checkpoint, or the step in flight)")
    ax.barh(y, rest, left=redone, color=plots.ORANGE, label="GPUs held while detecting and recovering")
    for i, r in enumerate(rungs):
        ax.text(r.lost_gpu_hours + max(x.lost_gpu_hours for x in rungs) * 0.01, i, f"{r.lost_gpu_hours:,.1f} GPU-h → {r.capacity_after} ranks",
                va="center", fontsize=7)
    ax.set_yticks(list(y), names)
    ax.set_ylim(len(rungs) - 0.5, -0.5)
    ax.set_xlim(0, max(r.lost_gpu_hours for r in rungs) * 1.45)
    ax.set_xlabel("GPU-hours that did no useful work because of one lost rank")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=1, fontsize=7, frameon=False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
