"""Chapter 2's figure: CPU used by a busy loop with and without a CFS limit."""
from __future__ import annotations

from courselib import plots


def throttle(run):
    """Per-interval CPU use of the limited and the unlimited busy loop, with the limit drawn in.

    ``run`` is a :class:`courselib.live.cpu.ThrottleRun`. Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    plots.use_style()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    edges = [run.interval_s * i for i in range(len(run.limited_cpus) + 1)]
    ax.stairs(run.unlimited_cpus, edges, color=plots.BLUE, lw=2, label="no limit (the control)")
    ax.stairs(run.limited_cpus, edges, color=plots.HELD_IDLE, lw=2, label=f"limits.cpu {run.milli_cpu}m")
    t = edges
    cpus = run.limit["cpus"]
    ax.axhline(cpus, color="#333333", ls="--", lw=1)
    ax.annotate(f"quota/period = {run.limit['quota_us']}/{run.limit['period_us']} µs = {cpus:g} CPU",
                (t[0], cpus), xytext=(0, 6), textcoords="offset points", fontsize=9)
    ax.set_ylim(0, max(1.05, max(run.unlimited_cpus + run.limited_cpus) * 1.1))
    ax.set_xlabel("time since the measurement started (s)")
    ax.set_ylabel("CPU used (CPUs)")
    label = "RECORDED RUN" if run.recorded else "live run on this machine"
    ax.set_title(f"A busy loop under a CFS quota, cgroup {run.cgroup_version} ({label})")
    ax.legend(loc="upper right")
    return fig
