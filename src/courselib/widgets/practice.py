"""The practice notebook's front end: pick a topic, a seed and a difficulty; reveal the worked solution.

``show(topic, seed, difficulty, solve=False)`` returns the same text ``courselib problem`` prints
(the static output a reader without a kernel sees); ``practice()`` returns the ipywidgets UI
(ipywidgets is imported only there). Every problem and answer comes from :mod:`courselib.problems`.
"""
from __future__ import annotations

from courselib import problems
from courselib.problems import render


def show(topic: str = "gang", seed: int = 7, difficulty: str = "easy", solve: bool = False) -> str:
    """The problem (and, with ``solve``, its answer and worked trace) as the CLI prints it."""
    p = problems.generate(topic, seed, difficulty)
    return render.text(p, problems.solve(p) if solve else None)


def practice(topic: str = "gang", seed: int = 7, difficulty: str = "easy"):
    """Topic, seed and difficulty pickers, a "new problem" button and a "reveal the solution" toggle."""
    import ipywidgets as w

    topics = list(problems.available())
    pick = w.Dropdown(options=topics, value=topic if topic in topics else topics[0], description="topic")
    seed_box = w.BoundedIntText(value=seed, min=0, max=10 ** 9, description="seed")
    level = w.ToggleButtons(options=list(problems.DIFFICULTIES), value=difficulty, description="difficulty")
    new = w.Button(description="new problem (seed + 1)")
    reveal = w.ToggleButton(value=False, description="reveal the worked solution")
    out = w.Output()

    def redraw(*_):
        out.clear_output()
        with out:
            print(show(pick.value, seed_box.value, level.value, solve=reveal.value))

    def next_seed(_):
        seed_box.value += 1              # `changed` hides the solution and redraws once

    def changed(_):
        if reveal.value:
            reveal.value = False         # its observer redraws
        else:
            redraw()

    for control in (pick, seed_box, level):
        control.observe(changed, names="value")
    reveal.observe(redraw, names="value")
    new.on_click(next_seed)
    redraw()
    return w.VBox([w.HBox([pick, seed_box]), level, w.HBox([new, reveal]), out])
