"""The last chapter's figure: the same workloads under four schedulers."""
from __future__ import annotations

from courselib import plots

COLOURS = {"kube-default": plots.HELD_IDLE, "volcano": plots.BLUE, "kueue": plots.ORANGE, "slurm": plots.TRAINING,
           "kube-gang": plots.PINK}


def policies_side_by_side(rows, workloads: list[str]):
    """Left: GPU-hours held idle at the barrier; right: mean and worst wait; one bar group per workload."""
    import matplotlib.pyplot as plt
    import numpy as np

    plots.use_style()
    policies = list(dict.fromkeys(r.policy for r in rows))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    x = np.arange(len(workloads))
    width = 0.8 / len(policies)
    for i, p in enumerate(policies):
        mine = {r.workload: r for r in rows if r.policy == p}
        wasted = [mine[w].wasted_gpu_hours for w in workloads]
        waits = [mine[w].mean_wait_h or 0.0 for w in workloads]
        ax1.bar(x + (i - (len(policies) - 1) / 2) * width, wasted, width, color=COLOURS.get(p), label=p)
        ax2.bar(x + (i - (len(policies) - 1) / 2) * width, waits, width, color=COLOURS.get(p), label=p)
    for ax in (ax1, ax2):
        ax.set_xticks(x, workloads, rotation=0)
        ax.set_xlabel("seeded mixed workload (16 nodes x 8 GPUs, 24 jobs)")
    ax1.set_ylabel("GPU-hours held idle at the barrier")
    ax2.set_ylabel("mean wait to start training (h)")
    ax1.set_title("Waste: GPUs held by jobs that cannot train")
    ax2.set_title("Wait: submit to start of training")
    ax2.legend(loc="upper right", ncols=2)
    fig.tight_layout()
    return fig
