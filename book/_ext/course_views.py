"""Kernel-free interactive views on the website: ``{course-view} cost-calculator``, ``gang-race``,
``barrier-run``, ``recovery-ladder`` and ``topology-placement``.

At build time the data come from courselib (:mod:`courselib.static.views`, the same model and
simulation a kernel runs) and are written once per build to ``_static/course-views/<view>.js``; the
directive writes the controls with the default setting's numbers already filled in (readable
without JavaScript), and ``static/course-views.js`` looks each new setting up in that table.
Loaded by ``course_build`` (see ``_config.yml``: ``local_extensions``).
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

from courselib.units import format_usd

STATIC = Path(__file__).parent / "static"
VIEWS = ("cost-calculator", "gang-race", "barrier-run", "recovery-ladder", "topology-placement")


def _data(view: str) -> dict:
    from courselib.static import views

    return {"cost-calculator": views.cost_table, "gang-race": views.gang_race_table,
            "barrier-run": views.barrier_run_table, "recovery-ladder": views.recovery_ladder_table,
            "topology-placement": views.topology_table}[view]()


def _compact(obj):
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    if isinstance(obj, list):
        return [_compact(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _compact(v) for k, v in obj.items()}
    return obj


def _cost_html(d: dict) -> str:
    df = d["default"]
    gi, wi = d["gpus"].index(df["gpus"]), d["wait_min"].index(df["wait_min"])
    pi = d["prices"].index(df["price"])
    case = {"gpu_hours": d["gpu_hours"][gi][wi], "cost": d["cost"][gi][wi][pi],
            "gang_gpu_hours": d["gang_gpu_hours"][gi][wi], "gang_cost": d["gang_cost"][gi][wi][pi]}
    prices = "".join(f'<option value="{i}"{" selected" if p == df["price"] else ""}>'
                     f'{"$" + p.replace("-", "–$")}</option>' for i, p in enumerate(d["prices"]))
    return f"""
<div class="course-view course-view--cost" data-view="cost-calculator">
  <div class="course-view__controls">
    <label>GPUs held idle <input type="range" name="gpus" min="0" max="{len(d['gpus']) - 1}" step="1"
      value="{gi}" aria-valuetext="{df['gpus']} GPUs"> <output data-for="gpus">{df['gpus']}</output></label>
    <label>wait for the last rank <input type="range" name="wait" min="0" max="{len(d['wait_min']) - 1}" step="1"
      value="{wi}" aria-valuetext="{df['wait_min']} minutes"> <output data-for="wait">{df['wait_min']} min</output></label>
    <label>price per GPU-hour <select name="price">{prices}</select></label>
  </div>
  <table class="course-view__table">
    <thead><tr><th></th><th>GPU-hours held idle</th><th>cost</th></tr></thead>
    <tbody>
      <tr><th scope="row">pod at a time (no gang check)</th>
        <td data-out="gpu_hours">{case['gpu_hours']:,.2f}</td><td data-out="cost">{format_usd(case['cost'])}</td></tr>
      <tr><th scope="row">gang admission (Volcano <code>minMember</code>, a Slurm allocation)</th>
        <td data-out="gang_gpu_hours">{case['gang_gpu_hours']:,.2f}</td><td data-out="gang_cost">{format_usd(case['gang_cost'])}</td></tr>
    </tbody>
  </table>
  <p class="course-view__note">Runs in your browser, no kernel needed: every number here was computed by
  <code>courselib.model.cost</code> when this page was built, for every position of the controls.</p>
</div>"""


def _race_html(d: dict) -> str:
    df = d["default"]
    case = d["cases"][f"{df['policy']}|{df['nodes']}|{df['delay_min']}"]
    ni = d["nodes"].index(df["nodes"])
    policies = "".join(
        f'<label class="course-view__choice"><input type="radio" name="policy" value="{p}"'
        f'{" checked" if p == df["policy"] else ""}> {p}</label>' for p in d["policies"])
    delays = "".join(f'<option value="{m}"{" selected" if m == df["delay_min"] else ""}>{m} min</option>'
                     for m in d["delay_min"])
    gpn = d["gpus_per_node"]
    return f"""
<div class="course-view course-view--race" data-view="gang-race">
  <div class="course-view__controls">
    <fieldset><legend>scheduler</legend>{policies}</fieldset>
    <label>cluster <input type="range" name="nodes" min="0" max="{len(d['nodes']) - 1}" step="1" value="{ni}"
      aria-valuetext="{df['nodes']} nodes"> <output data-for="nodes">{df['nodes']} nodes × {gpn} = {df['nodes'] * gpn} GPUs</output></label>
    <label>job b arrives after job a by <select name="delay">{delays}</select></label>
  </div>
  <p class="course-view__verdict" data-out="verdict" role="status">{html.escape(case['verdict'])}</p>
{_stepper_html(case['steps'], 'event')}
  <div class="course-view__chart" data-out="chart"></div>
  <p class="course-view__note">Two 512-GPU training jobs (1 GPU per rank, 2 h each) on one cluster. Green: GPUs
  training; vermillion: GPUs held idle at the barrier; grey: free. Step through the run's events with the
  buttons or the slider (later times are veiled). Computed by <code>courselib.sim.gang</code> and
  <code>courselib.sim.steps</code> when this page was built, for every setting of the controls; no kernel needed.</p>
</div>"""


def _stepper_html(steps: list, what: str, at: int | None = None) -> str:
    """The stepper's controls and its line, showing state ``at`` (default: the last, the whole run) until a
    reader moves."""
    last = len(steps) - 1
    k = last if at is None else at
    return f"""
  <div class="course-view__controls course-view__stepper">
    <button type="button" data-step="reset">reset</button>
    <button type="button" data-step="back">◀ back</button>
    <button type="button" data-step="play" aria-pressed="false">play</button>
    <button type="button" data-step="next">step ▶</button>
    <label>{what} <input type="range" name="step" min="0" max="{last}" step="1" value="{k}"
      aria-valuetext="{what} {k} of {last}"> <output data-for="step">{k} of {last}</output></label>
  </div>
  <p class="course-view__step" data-out="step" aria-live="polite">{html.escape(steps[k]['text'])}</p>"""


def _barrier_html(d: dict, view: str) -> str:
    case = d["cases"][d["default"]]
    choices = "" if len(d["choices"]) == 1 else (
        '<div class="course-view__controls"><fieldset><legend>recovery</legend>' + "".join(
            f'<label class="course-view__choice"><input type="radio" name="case" value="{c}"'
            f'{" checked" if c == d["default"] else ""}> {c}</label>' for c in d["choices"]) + "</fieldset></div>")
    return f"""
<div class="course-view course-view--barrier" data-view="{view}">{choices}
  <p class="course-view__verdict" data-out="verdict" role="status">{html.escape(case['summary'])}</p>{_stepper_html(case['steps'], 'event')}
  <div class="course-view__chart" data-out="chart"></div>
  <p class="course-view__note">How many of the {case['ranks']} ranks are in each state over time (green: training;
  vermillion: stalled in a collective, GPUs held idle; black: the lost rank; sky blue: torn down, restarting).
  Step through the run's events with the buttons or the slider (later times are veiled). Computed by
  <code>courselib.sim.barrier</code> and <code>courselib.sim.steps</code> when this page was built; no kernel needed.</p>
</div>"""


def topology_lines(d: dict, name: str, k: int) -> list[str]:
    """Each policy's line at event ``k`` of workload ``name``: what happened last and who waits, and why."""
    case = d["cases"][name]
    t = case["steps"][k]["t"]
    out = []
    for p in d["policies"]:
        state = [s for s in case["runs"][p] if s["t"] <= t][-1]
        waits = "; ".join(f"{job} waits: {why}" for job, why in state["waiting"]) or "no job waits"
        out.append(f"{p}: {state['text']} | {waits}")
    return out


def _topology_html(d: dict) -> str:
    name = d["default"]["workload"]
    case = d["cases"][name]
    k = d["default"]["step"]
    options = "".join(f'<option value="{n}"{" selected" if n == name else ""}>{n}</option>' for n in d["examples"])
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in topology_lines(d, name, k))
    stepper = _stepper_html(case["steps"], "event", at=k)
    return f"""
<div class="course-view course-view--topology" data-view="topology-placement">
  <div class="course-view__controls">
    <label>workload (<code>examples/topology</code>) <select name="workload">{options}</select></label>
  </div>{stepper}
  <ul class="course-view__lines" data-out="lines" aria-live="polite">{lines}</ul>
  <div class="course-view__chart" data-out="chart"></div>
  <p class="course-view__note">One row per scheduler: the outermost level of the topology as solid boxes, the
  next as dashed boxes, each node a cell whose GPUs are coloured by the job on them (grey: free). Step through
  the run's events; a waiting job's line is its scheduler's pending message. Computed by
  <code>courselib.sim.gang</code> and <code>courselib.plots.topology</code> when this page was built, for every
  workload and event; no kernel needed.</p>
</div>"""


def view_html(view: str, data: dict, src: str) -> str:
    """What the directive writes: the data script at ``src`` (``<view>.js``), then the view's markup."""
    body = (_cost_html(data) if view == "cost-calculator" else _race_html(data) if view == "gang-race"
            else _topology_html(data) if view == "topology-placement" else _barrier_html(data, view))
    if view in STEPS_APART:   # where the page finds each setting's steps
        body = body.replace(f'data-view="{view}"', f'data-view="{view}" data-steps="{src.removesuffix(".js")}/"', 1)
    return f'<script src="{src}"></script>{body}'


class CourseView(Directive):
    required_arguments = 1
    has_content = False

    def run(self):
        view = self.arguments[0]
        if view not in VIEWS:
            raise self.error(f"course-view: unknown view {view!r}; choose one of {', '.join(VIEWS)}")
        env = self.state.document.settings.env
        depth = env.docname.count("/")
        src = "../" * depth + f"_static/course-views/{view}.js"
        return [nodes.raw("", view_html(view, _cached(env.app, view), src), format="html")]


_CACHE: dict[str, dict] = {}


def _cached(app, view: str) -> dict:
    if view not in _CACHE:
        _CACHE[view] = _data(view)
    return _CACHE[view]


def _write_data(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir) / "_static" / "course-views"
    for view in VIEWS:
        write_view(out, view, _cached(app, view))


#: views whose steps are too many for one file (the race steps pod by pod: 60,072 states, 13 MB of
#: JSON): each setting's steps go to a file of their own, loaded when a reader picks the setting
STEPS_APART = ("gang-race",)


def steps_file(key: str) -> str:
    """The file (under ``<view>/``) that holds the steps of the setting ``key`` ("kube-default|75|0")."""
    return key.replace("|", "-") + ".js"


def write_view(out: Path, view: str, data: dict) -> list[Path]:
    """Write ``<view>.js`` (the view's table) into ``out``, and for a view in ``STEPS_APART`` one
    ``<view>/<setting>.js`` per setting with that setting's steps; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if view in STEPS_APART:
        folder = out / view
        folder.mkdir(exist_ok=True)
        cases = {}
        for key, case in data["cases"].items():
            path = folder / steps_file(key)
            payload = json.dumps(_compact(case["steps"]), separators=(",", ":"))
            path.write_text("// Generated at build time from courselib (book/_ext/course_views.py); do not edit.\n"
                            f"(window.COURSE_VIEWS_STEPS = window.COURSE_VIEWS_STEPS || {{}})"
                            f"[{json.dumps(view + '/' + steps_file(key))}] = {payload};\n")
            written.append(path)
            cases[key] = {**{k: v for k, v in case.items() if k != "steps"}, "steps_file": steps_file(key)}
        data = {**data, "cases": cases}
    path = out / f"{view}.js"
    path.write_text(data_script(view, data))
    return [path] + written


def data_script(view: str, data: dict) -> str:
    """The ``_static/course-views/<view>.js`` a page loads: the view's table as one JavaScript assignment."""
    payload = json.dumps(_compact(data), separators=(",", ":"))
    return ("// Generated at build time from courselib (book/_ext/course_views.py); do not edit.\n"
            f"(window.COURSE_VIEWS = window.COURSE_VIEWS || {{}})[{json.dumps(view)}] = {payload};\n")


def _static_path(app) -> None:
    app.config.html_static_path.append(str(STATIC))


def setup(app):
    app.add_directive("course-view", CourseView)
    app.connect("builder-inited", _static_path)
    app.add_js_file("course-views.js", defer="defer")
    app.add_css_file("course-views.css")
    app.add_css_file("course-site.css")
    app.connect("build-finished", _write_data)
    # a new env_version makes an incremental `make book` re-read every page (new scripts and styles)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
