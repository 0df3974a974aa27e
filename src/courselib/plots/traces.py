"""A real trace under the gang policies: the CDF of queueing delay, and GPU-hours held idle over time."""
from __future__ import annotations

from courselib import plots
from courselib.plots.compare import COLOURS
from courselib.sim.traces import series

STYLES = {"kube-gang": (0, (4, 2)), "slurm": (0, (1, 1))}


def trace_comparison(replays: dict, title: str):
    """Left: CDF of queueing delay (submit → training starts) per policy, log time axis; right:
    GPU-hours held idle at the barrier so far, over the trace's time. ``replays``: policy →
    :class:`courselib.sim.traces.TraceReplay`."""
    return trace_comparison_of({p: series(rep.result) for p, rep in replays.items()}, title)


def trace_comparison_of(data: dict, title: str):
    """:func:`trace_comparison` from :func:`courselib.sim.traces.series` data (a recorded run)."""
    import matplotlib.pyplot as plt

    plots.use_style()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    for policy, d in data.items():
        w, n = d["waits"], d["jobs"]
        if w:  # jobs that never started keep the curve below 1
            ax1.step([max(x, 1.0) / 60 for x in w], [(k + 1) / n for k in range(len(w))], where="post",
                     label=policy, color=COLOURS.get(policy), linestyle=STYLES.get(policy, "-"))
        ax2.step([x / 86400 for x in d["idle_t"]], d["idle"], where="post", label=policy,
                 color=COLOURS.get(policy), linestyle=STYLES.get(policy, "-"))
    ax1.set_xscale("log")
    ax1.set_xlabel("queueing delay (minutes, log scale; under 1 s drawn at 1 s)")
    ax1.set_ylabel("fraction of jobs started")
    ax1.set_ylim(0, 1.02)
    ax1.set_title("Queueing delay, CDF")
    ax2.set_xlabel("time since the trace's first submission (days)")
    ax2.set_ylabel("GPU-hours held idle so far")
    ax2.set_title("Waste at the barrier, accumulated")
    ax1.legend(loc="lower right")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return fig
