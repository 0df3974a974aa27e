"""The OOM playground: a container's limit, three processes' sizes and oom_score_adj, and the kill.

``default_scenario()`` is a leaking worker beside a web server and a cache in a 512 MiB memory
cgroup; ``show(...)`` simulates it and draws the timeline and the points (the static figure a
reader without a kernel sees); ``playground()`` returns the ipywidgets UI (imported only here).
"""
from __future__ import annotations

from courselib.model.badness import Task
from courselib.model.memcg import OomScenario, ProcessSpec
from courselib.plots.oom import points_bars, timeline

MiB = 2 ** 20
PAGES_PER_MIB = MiB // 4096


def default_scenario(limit_mib: int = 512, high_mib: int | None = None, scope: str = "memcg",
                     cgroup: str = "v2", oom_group: bool = False,
                     web=(200, 0), cache=(120, 500), leaky=(50, 0), leak_mib_per_s: int = 20,
                     restart: str = "Never", duration: float = 60.0) -> OomScenario:
    """Three processes: ``(rss MiB, oom_score_adj)`` each; ``leaky`` grows ``leak_mib_per_s``."""
    def spec(name, size_adj, grow=0):
        return ProcessSpec(Task(name, size_adj[0] * PAGES_PER_MIB, oom_score_adj=size_adj[1]),
                           grow=grow * MiB)
    return OomScenario(scope=scope, limit=limit_mib * PAGES_PER_MIB,
                       processes=(spec("web", web), spec("cache", cache),
                                  spec("leaky", leaky, leak_mib_per_s)),
                       oom_group=oom_group and cgroup == "v2", cgroup=cgroup,
                       high=high_mib * PAGES_PER_MIB if high_mib else None,
                       restart=restart, duration=duration, step=0.25)


def show(scenario: OomScenario | None = None):
    """Simulate ``scenario`` (default: :func:`default_scenario`); returns (summary, Figure)."""
    import matplotlib.pyplot as plt

    from courselib.sim.memcg import simulate, summary

    scenario = scenario or default_scenario()
    tl = simulate(scenario)
    out = summary(tl)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [3, 2]})
    timeline(tl, ax=left, title="memory charged to the cgroup")
    if out["points"]:
        points_bars(out, ax=right, title="oom_badness at the first kill")
    else:
        right.axis("off")
        right.text(0.5, 0.5, "no OOM kill", ha="center", va="center")
    fig.tight_layout()
    return out, fig


def playground():
    """Sliders for the limit, each process's size and oom_score_adj; the timeline below."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    limit = w.IntSlider(512, min=64, max=2048, step=32, description="limit MiB")
    high = w.IntSlider(0, min=0, max=2048, step=32, description="high MiB (0=off)")
    version = w.ToggleButtons(options=["v2", "v1"], value="v2", description="cgroup")
    group = w.Checkbox(False, description="memory.oom.group")
    restart = w.Dropdown(options=["Never", "Always"], value="Never", description="restartPolicy")
    rows = {}
    for name, size, adj in (("web", 200, 0), ("cache", 120, 500), ("leaky", 50, 0)):
        rows[name] = (w.IntSlider(size, min=0, max=1024, step=10, description=f"{name} MiB"),
                      w.IntSlider(adj, min=-1000, max=1000, step=1, description="oom_score_adj"))
    leak = w.IntSlider(20, min=0, max=100, description="leak MiB/s")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            sc = default_scenario(limit.value, high.value or None, cgroup=version.value,
                                  oom_group=group.value,
                                  web=(rows["web"][0].value, rows["web"][1].value),
                                  cache=(rows["cache"][0].value, rows["cache"][1].value),
                                  leaky=(rows["leaky"][0].value, rows["leaky"][1].value),
                                  leak_mib_per_s=leak.value, restart=restart.value)
            summary, fig = show(sc)
            print(f"victim: {summary['victim']}   killed: {', '.join(summary['killed']) or 'nobody'}   "
                  f"memory.events oom={summary['events']['oom']} oom_kill={summary['events']['oom_kill']}")
            display(fig)
            plt.close(fig)

    controls = [limit, high, version, group, restart, leak] + [c for pair in rows.values() for c in pair]
    for control in controls:
        control.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([limit, high]), w.HBox([version, group, restart]),
                   *[w.HBox(list(pair)) for pair in rows.values()], leak, out])
