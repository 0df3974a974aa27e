"""Cost figures: idle-but-held GPU-hours with and without a gang admission check, and the
checkpoint waste curve with Young's and Daly's intervals marked."""
from __future__ import annotations

from courselib import plots
from courselib.model import checkpoint as ckpt
from courselib.model import cost


def gang_wait_bars(waits=None, ax=None):
    """Wasted GPU-hours for each :class:`~courselib.model.cost.GangWait`, without vs with a gang check."""
    import matplotlib.pyplot as plt

    plots.use_style()
    waits = list(waits) if waits is not None else list(cost.PRESETS.values())
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.0, 3.2))
    else:
        fig = ax.figure
    results = [cost.gang_wait_cost(w) for w in waits]
    xs = range(len(waits))
    width = 0.38
    ax.bar([x - width / 2 for x in xs], [r.wasted_gpu_hours for r in results], width,
           color=plots.HELD_IDLE, label="no gang check: placed GPUs held idle")
    ax.bar([x + width / 2 for x in xs], [r.gang_wasted_gpu_hours for r in results], width,
           color=plots.TRAINING, label="gang admission check: none held while pending")
    for x, r in zip(xs, results):
        money = r.cost_usd
        # "\\$": a bare pair of dollar signs would switch matplotlib into mathtext
        text = (f"\\${money[0]:,.2f}–\\${money[1]:,.2f}" if isinstance(money, list)
                else f"\\${money:,.2f}")
        ax.annotate(f"{r.wasted_gpu_hours:,.2f} GPU-h\n{text}", (x - width / 2, r.wasted_gpu_hours),
                    ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
        ax.annotate("0", (x + width / 2, 0), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(list(xs), [w.name or f"{w.gpus_held} GPUs, {w.wait_s / 60:g} min" for w in waits],
                  fontsize=8)
    ax.set_ylabel("wasted GPU-hours")
    top = max([r.wasted_gpu_hours for r in results] + [1.0])
    ax.set_ylim(0, top * 1.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def waste_curve(checkpoint_cost_s: float, mtbf_s: float, restart_s: float = 0.0, ax=None):
    """The first-order waste ``C/T + T/(2M) + R/M`` against the interval T, clamped at 1."""
    import matplotlib.pyplot as plt
    import numpy as np

    plots.use_style()
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.0, 3.2))
    else:
        fig = ax.figure
    plan = ckpt.checkpoint_plan(checkpoint_cost_s, mtbf_s, restart_s)
    lo = max(checkpoint_cost_s / 4, 1.0)
    ts = np.geomspace(lo, max(4 * plan.young_s, mtbf_s), 300)
    ws = [ckpt.waste_fraction(float(t), checkpoint_cost_s, mtbf_s, restart_s) for t in ts]
    ax.plot(ts / 60, ws, color=plots.BLUE, label="waste fraction (first order, clamped to 1)")
    for t, name, colour in ((plan.young_s, "Young", plots.ORANGE), (plan.daly_s, "Daly", plots.TRAINING)):
        ax.axvline(t / 60, color=colour, linestyle="--", linewidth=1,
                   label=f"{name}: {t / 60:.2f} min")
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval T (min, log scale)")
    ax.set_ylabel("fraction of GPU time wasted")
    ax.set_ylim(0, min(1.05, max(ws) * 1.1))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
