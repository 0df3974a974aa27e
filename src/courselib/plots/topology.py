"""Where each pod landed on a topology: the levels drawn as nested boxes, a node's GPUs by job.

:func:`states` reads a run of :func:`courselib.sim.gang.simulate` on a topology workload
(``examples/topology``) at each of its events: which job's pods sit on which node, and which jobs
wait and why (the pending message of the policy's real scheduler, read from the same model run up to
that moment). :func:`placement_figure` draws one such moment for several policies side by side: the
outermost level as large boxes, the next as boxes inside them, each node a cell whose GPUs are
coloured by the job on them (free GPUs grey). The website's kernel-free view
(:mod:`courselib.static.views`) draws the same states in the browser.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from courselib import plots
from courselib.io.workload import load_workload

#: a job's colour by its place in the workload (free GPUs are plots.FREE)
JOB_COLOURS = [plots.BLUE, plots.ORANGE, plots.TRAINING, plots.PINK, plots.SKY, plots.YELLOW,
               plots.HELD_IDLE, "#999933"]


@dataclass(frozen=True)
class TopologyState:
    """The cluster at time ``t``: ``nodes[i]`` = ``[(job, GPUs), ...]`` on node ``i``; ``waiting`` =
    ``[(job, why), ...]`` for the jobs submitted and not started; ``text`` one line of what changed."""

    t: float
    nodes: tuple
    waiting: tuple
    text: str


def event_times(result, horizon: float) -> list[float]:
    """Every submission, start and end of the run up to ``horizon``, in order."""
    times = {0.0}
    for j in result.jobs:
        for t in (j.submit, j.start, j.end):
            if t is not None and t <= horizon:
                times.add(float(t))
    return sorted(times)


def _when(t: float) -> str:
    return f"{t / 60:g} min" if t < 3600 else f"{t / 3600:g} h"


def states(workload, policy: str, horizon: float = 6 * 3600.0) -> list[TopologyState]:
    """The run of ``workload`` under ``policy`` at each event: placements and waiting jobs with why."""
    from courselib.sim.gang import simulate

    result = simulate(workload, policy, horizon=horizon)
    out = []
    for t in event_times(result, horizon):
        nodes = [[] for _ in range(workload.cluster.nodes)]
        started, ended, waiting = [], [], []
        for j in result.jobs:
            if j.start is not None and j.start <= t and (j.end is None or j.end > t):
                for node, gpus in j.placement or ():     # a placement is (node, GPUs) pairs
                    nodes[node].append((j.name, gpus))
            if j.start == t:
                started.append(j.name)
            if j.end == t:
                ended.append(j.name)
            if j.submit <= t and (j.start is None or j.start > t):
                waiting.append(j.name)
        why = {}
        if waiting:      # the pending messages as they stood at t (the same model, run up to t)
            now = simulate(workload, policy, horizon=t)
            why = {n: now.job(n).pending_reason or "waiting" for n in waiting}
        parts = [f"{n} ends" for n in ended] + [f"{n} starts" for n in started]
        parts += [f"{n} waits" for n in waiting if result.job(n).submit == t]
        text = f"t = {_when(t)}: " + (", ".join(parts) if parts else "nothing changes")
        out.append(TopologyState(t, tuple(tuple(n) for n in nodes), tuple((n, why[n]) for n in waiting), text))
    return out


def placement_figure(workload, by_policy: dict, t: float | None = None):
    """One panel per policy: the topology as nested boxes and each node's GPUs by job at time ``t``
    (default: each run's last event). ``by_policy`` maps a policy to its :func:`states`."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    plots.use_style()
    spec = workload.cluster
    levels = list(spec.topology)
    names = [j.name for j in workload.jobs]
    colour = {n: JOB_COLOURS[i % len(JOB_COLOURS)] for i, n in enumerate(names)}
    fig, axes = plt.subplots(len(by_policy), 1, figsize=(7.5, 1.15 * len(by_policy) + 0.9), squeeze=False)
    gpn = spec.gpus_per_node
    for ax, (policy, run) in zip(axes[:, 0], by_policy.items()):
        state = run[-1] if t is None else [s for s in run if s.t <= t][-1]
        gap = 0.25
        x = lambda i: i + gap * sum(i // size for _, size in levels)   # noqa: E731  (a gap at every domain edge)
        for depth, (level, size) in enumerate(levels):
            for d, start in enumerate(range(0, spec.nodes, size)):
                pad = 0.12 * (len(levels) - depth)
                x0, x1 = x(start) - pad, x(start + size - 1) + 1 + pad
                ax.add_patch(Rectangle((x0, -pad), x1 - x0, 1 + 2 * pad, fill=False, linewidth=1.2 - 0.3 * depth,
                                       edgecolor="0.2" if depth == 0 else "0.55", linestyle="-" if depth == 0 else "--"))
                if depth == 0:
                    ax.text((x0 + x1) / 2, 1 + pad + 0.08, f"{level}{d}", ha="center", va="bottom", fontsize=8)
        for i, on in enumerate(state.nodes):
            y = 0.0
            for job, gpus in on:
                h = gpus / gpn
                ax.add_patch(Rectangle((x(i) + 0.05, y), 0.9, h, color=colour[job], linewidth=0))
                if h >= 0.5:
                    ax.text(x(i) + 0.5, y + h / 2, job, ha="center", va="center", fontsize=6.5, color="white")
                y += h
            if y < 1:
                ax.add_patch(Rectangle((x(i) + 0.05, y), 0.9, 1 - y, color=plots.FREE, linewidth=0))
        waiting = "; ".join(f"{n} waits" for n, _ in state.waiting) or "no job waits"
        ax.set_title(f"{policy} at {_when(state.t)}: {waiting}", fontsize=9, loc="left")
        ax.set_xlim(-0.8, x(spec.nodes - 1) + 1.8)
        ax.set_ylim(-0.7, 1.9)
        ax.axis("off")
    handles = [Patch(color=colour[n], label=n) for n in names] + [Patch(color=plots.FREE, label="free GPUs")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 7), frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


EXAMPLES = ("fragmentation", "preferred-vs-required", "larger-than-domain", "apart", "blocked-head", "mixed")
POLICIES = ("kube-default", "kube-gang", "volcano", "kueue", "slurm")


def example(name: str):
    """``examples/topology/<name>.yaml`` of the repository, read into a Workload."""
    here = Path(__file__).resolve().parents[3] / "examples" / "topology"
    for base in (here, Path("examples/topology"), Path("../examples/topology")):
        if (base / f"{name}.yaml").is_file():
            return load_workload(base / f"{name}.yaml")
    raise FileNotFoundError(f"examples/topology/{name}.yaml not found (run from the course's repository)")
