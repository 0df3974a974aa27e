"""The gang-scheduling playground: cluster size, two jobs' sizes and a policy, simulated live.

``default_workload()`` is the seed's story 1 (600 free GPUs, two 512-GPU jobs); ``show(...)``
draws its Gantt chart without widgets (the static figure a reader without a kernel sees);
``playground()`` returns the ipywidgets UI (ipywidgets is imported only here), the chart under a
stepper (:mod:`courselib.widgets.stepper`: play/pause, step, back, reset over the run's events).
"""
from __future__ import annotations

from courselib.model.generate import default_workload
from courselib.plots.gang import gantt
from courselib.plots.text import gang_summary, gang_table
from courselib.widgets import stepper

__all__ = ["POLICIES", "default_workload", "playground", "show"]

POLICIES = ["kube-default", "kube-gang", "volcano", "kueue", "slurm"]


def show(policy: str = "kube-default", horizon: float = 6 * 3600, **sizes):
    """Simulate ``default_workload(**sizes)`` under ``policy``; returns (Result, Figure)."""
    from courselib.sim.gang import simulate

    result = simulate(default_workload(**sizes), policy, horizon=horizon, binds=True)
    return result, gantt(result)


def playground():
    """Sliders for the cluster and the two jobs, a policy menu, and the Gantt chart below."""
    import ipywidgets as w
    from IPython.display import display

    nodes = w.IntSlider(75, min=1, max=200, description="nodes")
    gpn = w.Dropdown(options=[1, 2, 4, 8], value=8, description="GPUs/node")
    a = w.IntSlider(512, min=1, max=1600, description="job a ranks")
    b = w.IntSlider(512, min=1, max=1600, description="job b ranks")
    delay = w.FloatSlider(0, min=0, max=120, step=5, description="b after (min)")
    policy = w.ToggleButtons(options=POLICIES, value="kube-default", description="policy")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            from courselib.sim.gang import simulate

            result = simulate(default_workload(nodes=nodes.value, gpus_per_node=gpn.value, pods_a=a.value,
                                               pods_b=b.value, minutes_b=delay.value), policy.value,
                              horizon=6 * 3600, binds=True)
            print(gang_table(result))
            print(gang_summary(result))
            display(stepper.gang(result))

    for control in (nodes, gpn, a, b, delay, policy):
        control.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([nodes, gpn]), w.HBox([a, b, delay]), policy, out])
