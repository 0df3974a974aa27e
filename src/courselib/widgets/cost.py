"""The cost calculator as ipywidgets: GPUs held × wait, priced, against a gang admission check.

Thin view over :mod:`courselib.model.cost` and :mod:`courselib.model.checkpoint`. Durations are
typed with their unit (``25m``, ``0.417h``, ``1500s``) so the minutes-vs-hours slip cannot happen
silently; a bad entry shows the same one-line error the CLI prints.
"""
from __future__ import annotations

from courselib.errors import CourseError
from courselib.model import checkpoint as ckpt, cost
from courselib.plots import cost as plot_cost
from courselib.units import format_duration, format_usd, parse_duration


def rows(waits=None) -> list[dict]:
    """One row per :class:`~courselib.model.cost.GangWait` (default: the seed and the exercise)."""
    out = []
    for w in (waits if waits is not None else cost.PRESETS.values()):
        c = cost.gang_wait_cost(w)
        out.append({
            "case": w.name or f"{w.gpus_held} GPUs",
            "GPUs held": w.gpus_held,
            "missing": "-" if w.missing is None else w.missing,
            "wait": format_duration(w.wait_s),
            "price $/GPU-h": f"{w.price.low:g}–{w.price.high:g}" if w.price.is_range else f"{w.price.low:g}",
            "wasted GPU-h (no gang check)": f"{c.wasted_gpu_hours:,.2f}",
            "cost (no gang check)": format_usd(c.cost_usd),
            "wasted GPU-h (gang check)": f"{c.gang_wasted_gpu_hours:,.2f}",
            "cost (gang check)": format_usd(c.gang_cost_usd),
        })
    return out


def table_html(waits=None) -> str:
    """The default table (HTML), shown on the website before any widget is touched."""
    data = rows(waits)
    head = "".join(f"<th>{k}</th>" for k in data[0])
    body = "".join("<tr>" + "".join(f"<td>{v}</td>" for v in r.values()) + "</tr>" for r in data)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def table_markdown(waits=None) -> str:
    data = rows(waits)
    lines = ["| " + " | ".join(data[0]) + " |", "|" + "---|" * len(data[0])]
    lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in data]
    return "\n".join(lines)


def calculator(preset: str = "seed"):
    """Presets (the seed's 400/112/25 min; the 480/32/40 min exercise) and free inputs."""
    import ipywidgets as w

    start = cost.PRESETS[preset]
    choose = w.Dropdown(options=[("seed: 400 held, 112 missing, 25 min, $2–4", "seed"),
                                 ("exercise: 480 held, 32 missing, 40 min, $3", "exercise"),
                                 ("your own", "custom")], value=preset, description="preset")
    gpus = w.IntText(value=start.gpus_held, description="GPUs held")
    gang = w.IntText(value=start.gang_size or 0, description="gang size")
    wait = w.Text(value=format_duration(start.wait_s), description="wait",
                  placeholder="25m, 0.417h, 1500s")
    price = w.Text(value=f"{start.price.low:g}-{start.price.high:g}" if start.price.is_range
                   else f"{start.price.low:g}", description="$/GPU-h", placeholder="3 or 2-4")
    out = w.HTML()
    busy = {"on": False}

    def show(*_):
        try:
            g = cost.GangWait(gpus_held=gpus.value, wait_s=parse_duration(wait.value, field="wait"),
                              price=cost.Price.parse(price.value), gang_size=gang.value or None,
                              name="this job")
            out.value = table_html([g])
        except CourseError as err:
            out.value = f"<p style='color:#D55E00'>{err}</p>"

    def pick(change):
        if change["new"] == "custom":
            return
        p = cost.PRESETS[change["new"]]
        busy["on"] = True
        gpus.value, gang.value, wait.value = p.gpus_held, p.gang_size or 0, format_duration(p.wait_s)
        price.value = f"{p.price.low:g}-{p.price.high:g}" if p.price.is_range else f"{p.price.low:g}"
        busy["on"] = False
        show()

    def edited(*_):
        if not busy["on"]:
            show()

    choose.observe(pick, names="value")
    for box in (gpus, gang, wait, price):
        box.observe(edited, names="value")
    show()
    return w.VBox([choose, w.HBox([gpus, gang]), w.HBox([wait, price]), out])


def checkpoint_calculator(cost_text: str = "60s", mtbf_text: str = "2h", restart_text: str = "5m"):
    """Young's and Daly's intervals and the waste fraction, with the curve redrawn on each change."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display


    c = w.Text(value=cost_text, description="checkpoint")
    m = w.Text(value=mtbf_text, description="job MTBF")
    r = w.Text(value=restart_text, description="restart")
    text = w.HTML()
    fig_out = w.Output()

    def show(*_):
        try:
            cs, ms, rs = (parse_duration(x.value, field=f) for x, f in
                          ((c, "checkpoint"), (m, "mtbf"), (r, "restart")))
            plan = ckpt.checkpoint_plan(cs, ms, rs)
        except CourseError as err:
            text.value = f"<p style='color:#D55E00'>{err}</p>"
            return
        clamp = " (clamped: the first-order model left its range)" if plan.clamped else ""
        text.value = (f"Young: {plan.young_s / 60:.2f} min · Daly: {plan.daly_s / 60:.2f} min · "
                      f"waste at Daly: {plan.waste_fraction:.4f}{clamp}")
        with fig_out:
            fig_out.clear_output(wait=True)
            fig = plot_cost.waste_curve(cs, ms, rs)
            display(fig)
            plt.close(fig)

    for box in (c, m, r):
        box.observe(show, names="value")
    show()
    return w.VBox([w.HBox([c, m, r]), text, fig_out])
