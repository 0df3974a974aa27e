"""Step through a finished simulation: play/pause, step, back, reset and a slider over its events.

``gang(result)`` and ``barrier(result)`` return the ipywidgets UI for a gang or a barrier result: the
playground's own figure redrawn at event *k* (a line at "now", the future veiled) under one line
saying what happened at that event. The states come from :mod:`courselib.sim.steps`, computed once
from the result; moving the slider simulates nothing.
"""
from __future__ import annotations

from courselib.plots.barrier import timeline
from courselib.plots.gang import gantt
from courselib.sim.steps import Cursor, barrier_steps, gang_steps

__all__ = ["barrier", "gang", "stepper"]


def stepper(steps, draw, start: int = -1, interval_ms: int = 1200):
    """The controls over ``steps`` (a tuple of states with ``.t`` and ``.text``); ``draw(state)`` returns a Figure.

    ``start``: the step shown first (default -1, the last: the whole run; ``reset`` goes to step 0)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    cursor = Cursor(steps)
    last = len(steps) - 1
    interval_ms = max(40, min(interval_ms, 30_000 // max(1, last)))   # a run of 600 binds plays in 30 s
    first = cursor.seek(start % len(steps)).index
    play = w.Play(value=first, min=0, max=last, step=1, interval=interval_ms, description="play")
    slider = w.IntSlider(value=first, min=0, max=last, description="event", continuous_update=False)
    w.jslink((play, "value"), (slider, "value"))
    back = w.Button(description="◀ back", tooltip="the event before")
    step = w.Button(description="step ▶", tooltip="the next event")
    reset = w.Button(description="reset", tooltip="back to before the first event")
    line = w.HTML()
    out = w.Output()

    def show(*_):
        state = cursor.seek(slider.value)
        line.value = f"<b>event {state.index} of {last}</b> — {state.text}"
        with out:
            out.clear_output(wait=True)
            fig = draw(state)
            display(fig)
            plt.close(fig)

    slider.observe(show, names="value")
    back.on_click(lambda _: setattr(slider, "value", cursor.back().index))
    step.on_click(lambda _: setattr(slider, "value", cursor.step().index))

    def do_reset(_):
        play.playing = False
        slider.value = cursor.reset().index

    reset.on_click(do_reset)
    show()
    return w.VBox([w.HBox([play, back, step, reset, slider]), line, out])


def gang(result, **kwargs):
    """A stepper over a :class:`courselib.sim.gang.Result`: its Gantt chart at each event."""
    steps = gang_steps(result)
    return stepper(steps, lambda s: gantt(result, at=_now(s, steps)), **kwargs)


def barrier(result, title: str | None = None, **kwargs):
    """A stepper over a :class:`courselib.sim.barrier.BarrierResult`: its rank timeline at each event."""
    kwargs.setdefault("interval_ms", 2500)   # hundreds of ranks take a second or two to redraw
    steps = barrier_steps(result)
    return stepper(steps, lambda s: timeline(result, title=title, at=_now(s, steps)), **kwargs)


def _now(state, steps):
    """Where the figure's "now" line goes: at the event's time, none at the last event (its state lasts to the end)."""
    return None if state.index == len(steps) - 1 else state.t
