"""The topology playground: where each pod of an ``examples/topology`` workload lands under each policy.

``show(name, t)`` draws every policy's placement at time ``t`` (the static figure a reader without a
kernel sees; :func:`courselib.plots.topology.placement_figure`); ``playground()`` returns the ipywidgets
UI: a workload menu, the policies to compare, and a slider over the run's events.
"""
from __future__ import annotations

from courselib.plots.topology import EXAMPLES, POLICIES, example, placement_figure, states

__all__ = ["EXAMPLES", "POLICIES", "playground", "show"]


def show(name: str = "fragmentation", t: float | None = None, policies=POLICIES):
    """Every policy's states for ``examples/topology/<name>.yaml``, and the figure at ``t``."""
    workload = example(name)
    runs = {p: states(workload, p) for p in policies}
    return runs, placement_figure(workload, runs, t)


def playground():
    """A workload menu, policy checkboxes and an event slider, the placement figure below."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    pick = w.Dropdown(options=list(EXAMPLES), value="fragmentation", description="workload")
    chosen = w.SelectMultiple(options=list(POLICIES), value=list(POLICIES), description="policies", rows=5)
    moment = w.SelectionSlider(options=[0.0], description="time (s)", continuous_update=False)
    out = w.Output()
    cache: dict = {}

    def runs():
        key = (pick.value, tuple(chosen.value))
        if key not in cache:
            workload = example(pick.value)
            cache[key] = workload, {p: states(workload, p) for p in chosen.value}
        return cache[key]

    def retime(*_):
        _, by = runs()
        times = sorted({s.t for run in by.values() for s in run})
        moment.options = times
        moment.value = times[min(1, len(times) - 1)]      # the first moment after t = 0: who waits?

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            workload, by = runs()
            if not by:
                print("choose at least one policy")
                return
            for policy, run in by.items():
                state = [s for s in run if s.t <= moment.value][-1]
                waits = "; ".join(f"{n}: {why}" for n, why in state.waiting) or "no job waits"
                print(f"{policy:12} {state.text} | {waits}")
            fig = placement_figure(workload, by, moment.value)
            display(fig)
            plt.close(fig)

    pick.observe(lambda *_: (retime(), redraw()), names="value")
    chosen.observe(lambda *_: (retime(), redraw()), names="value")
    moment.observe(redraw, names="value")
    retime()
    redraw()
    return w.VBox([w.HBox([pick, chosen]), moment, out])
