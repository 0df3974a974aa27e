"""The cost calculator's widget and figures: the seed's and the exercise's numbers come out of them."""
from __future__ import annotations

import pytest

from courselib.model import cost
from courselib.widgets import cost as wcost


def test_default_table_has_the_seed_and_the_exercise():
    rows = wcost.rows()
    seed, exercise = rows
    assert seed["wasted GPU-h (no gang check)"] == "166.67"
    assert seed["cost (no gang check)"] == "$333.33–$666.67"
    assert seed["missing"] == 112
    assert exercise["wasted GPU-h (no gang check)"] == "320.00"
    assert exercise["cost (no gang check)"] == "$960.00"
    assert exercise["cost (gang check)"] == "$0.00"
    html = wcost.table_html()
    assert html.count("<tr>") == 3 and "166.67" in html
    md = wcost.table_markdown()
    assert md.count("\n") == 3 and "| 320.00 |" in md


def _find(box, description):
    stack = [box]
    while stack:
        w = stack.pop()
        if getattr(w, "description", None) == description:
            return w
        stack.extend(getattr(w, "children", ()))
    raise AssertionError(description)


def _html(box):
    return box.children[-1].value


def test_calculator_presets_and_units():
    pytest.importorskip("ipywidgets")
    box = wcost.calculator()
    assert "166.67" in _html(box) and "$333.33–$666.67" in _html(box)
    _find(box, "preset").value = "exercise"
    assert "320.00" in _html(box) and "$960.00" in _html(box)
    _find(box, "wait").value = "0.6667h"
    assert "320.02" in _html(box)          # 40 min rounded to 0.6667 h
    _find(box, "wait").value = "2400s"
    assert "320.00" in _html(box)


@pytest.mark.parametrize("field,value,needle", [("$/GPU-h", "4-2", "backwards"), ("wait", "40 min", "wait"),
                                                ("GPUs held", -5, "gpus")])
def test_calculator_shows_one_line_errors(field, value, needle):
    pytest.importorskip("ipywidgets")
    box = wcost.calculator()
    _find(box, field).value = value
    assert needle in _html(box) and "Traceback" not in _html(box)


def test_checkpoint_calculator_reports_young_and_daly():
    pytest.importorskip("ipywidgets")
    box = wcost.checkpoint_calculator("60s", "2h", "0s")
    text = box.children[1].value
    assert "Young: 15.49 min" in text and "Daly: 14.83 min" in text
    box.children[0].children[1].value = "bad"
    assert "mtbf" in box.children[1].value


def test_figures_draw_the_numbers():
    from courselib.plots import cost as pcost

    fig = pcost.gang_wait_bars()
    ax = fig.axes[0]
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == pytest.approx(sorted([166.6667, 320.0, 0.0, 0.0]), abs=1e-3)
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "166.67 GPU-h" in texts and "$960.00" in texts
    fig2 = pcost.waste_curve(60, 7200)
    ys = fig2.axes[0].lines[0].get_ydata()
    assert min(ys) >= 0 and max(ys) <= 1
    assert min(ys) == pytest.approx(cost.SECONDS_PER_HOUR * 0 + (2 * 60 / 7200) ** 0.5, rel=1e-3)
