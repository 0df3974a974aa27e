"""Chapter 1's figure: one process, two views, one kernel."""
from __future__ import annotations

from courselib import plots


def two_views(run: dict, *, host_hostname: str = "host"):
    """Draw the namespace's PID 1 as the host sees it and as it sees itself, on one shared kernel.

    ``run`` is a result of ``courselib.live.recorded.live_or_recorded(unshare.source())``.
    Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    plots.use_style()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 6)
    ax.axis("off")

    def box(x, y, w, h, color, title, lines):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.08", fc=color, ec="#333333",
                                    lw=1.0, alpha=0.9))
        ax.text(x + w / 2, y + h - 0.35, title, ha="center", va="top", fontsize=10, weight="bold")
        for i, line in enumerate(lines):
            ax.text(x + 0.25, y + h - 1.0 - 0.48 * i, line, ha="left", va="top", fontsize=9,
                    family="DejaVu Sans Mono")

    outside = run.get("nspid_outside") or ["?", 1]
    box(0.3, 2.0, 4.3, 3.6, "#D6EAF8", "seen from the host",
        [f"PID      {outside[0]}", f"NSpid    {' '.join(map(str, outside))}",
         f"hostname {host_hostname}", f"PID ns   {run.get('host_pid_ns') or '?'}"])
    box(5.4, 2.0, 4.3, 3.6, "#D5F5E3", "seen from inside",
        [f"PID      {run['pid']}", f"NSpid    {' '.join(map(str, run['nspid_inside']))}",
         f"hostname {run['hostname']}", f"PID ns   {run['pid_ns']}",
         f"/proc    {len(run['visible_processes'])} process(es)"])
    ax.add_patch(FancyArrowPatch((4.65, 3.8), (5.35, 3.8), arrowstyle="<->", mutation_scale=14, color="#333333"))
    ax.text(5.0, 4.1, "same\nprocess", ha="center", va="bottom", fontsize=8)
    ax.add_patch(FancyBboxPatch((0.3, 0.3), 9.4, 1.0, boxstyle="round,pad=0.05", fc=plots.FREE, ec="#333333"))
    ax.text(5.0, 0.8, f"one Linux kernel, release {run.get('host_kernel') or run.get('kernel')}"
            f"  (inside reports {run.get('kernel')})", ha="center", va="center", fontsize=10)
    label = "RECORDED RUN" if run.get("recorded") else "live run on this machine"
    ax.set_title(f"unshare --pid --fork --mount-proc --uts   ({label})", fontsize=10)
    return fig
