"""The steppers on the website, without a kernel (issue 32): the gang race's, the barrier playground's
512-rank run and its recovery ladder's. The buttons and the slider move over the states
courselib.sim.steps computed when the page was built.

The page here is the views alone, as book/_ext/course_views.py writes it (its markup, its data script and
static/course-views.js), served at 127.0.0.1 and driven in Debian's headless Chromium; the whole site's
crawl (tests/test_site.py) checks the same view inside the built book.
"""
from __future__ import annotations

import functools
import http.server
import sys
import threading
from pathlib import Path

import pytest

from courselib.sim.gang import simulate
from courselib.sim.steps import gang_steps
from courselib.static import views
from courselib.widgets.gang import default_workload
from site_browser import Chromium, chromium_binary

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One Chromium on a page that holds only the stepper views, served from a temporary folder."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
    sys.path.insert(0, str(EXT))
    try:
        import course_views
    finally:
        sys.path.remove(str(EXT))
    site = tmp_path_factory.mktemp("race")
    body = ""
    for view in ("gang-race", "barrier-run", "recovery-ladder"):
        data = course_views._data(view)
        course_views.write_view(site, view, data)     # as a build writes them (the race: one file per setting)
        body += course_views.view_html(view, data, f"{view}.js")
    (site / "course-views.js").write_text((EXT / "static" / "course-views.js").read_text())
    (site / "index.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>steppers</title>'
        f'<script src="course-views.js" defer></script></head><body style="width:800px">{body}</body></html>')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"
    try:
        with Chromium(binary, local_prefix=base) as tab:
            tab.base = base
            yield tab
    finally:
        server.shutdown()


ROOT_SEL = ".course-view--race"


RUN_SEL = ".course-view[data-view=barrier-run]"
LADDER_SEL = ".course-view[data-view=recovery-ladder]"


def fresh(browser) -> None:
    """The page as a reader opens it (each test starts from the default setting, in any order)."""
    browser.goto(browser.base + "index.html")
    for sel in (ROOT_SEL, RUN_SEL, LADDER_SEL):
        assert browser.wait_for(f"document.querySelector('{sel}').dataset.ready === 'true'")
    loaded(browser)


def loaded(browser) -> None:
    """The race's current setting has its steps (each setting's are a file of their own, fetched when picked)."""
    assert browser.wait_for(f"document.querySelector('{ROOT_SEL}').dataset.loading === undefined")


def step_text(browser, sel=ROOT_SEL) -> str:
    return browser.js(f"document.querySelector('{sel} [data-out=\"step\"]').textContent.trim()")


def now_line(browser, sel=ROOT_SEL):
    return browser.js(f"(() => {{ const l = document.querySelector('{sel} svg line[data-now]');"
                      " return l ? +l.getAttribute('data-now') : null; })()")


def step_index(browser, sel=ROOT_SEL) -> int:
    return int(browser.js(f"document.querySelector('{sel}').dataset.step"))


def walk(browser, sel, steps) -> None:
    """From the whole run: reset, then every step forward; each line is courselib's, the ends hold."""
    last = len(steps) - 1
    assert step_index(browser, sel) == last and step_text(browser, sel) == steps[-1].text
    assert now_line(browser, sel) is None
    browser.click(f"{sel} button[data-step=reset]")
    assert step_index(browser, sel) == 0 and step_text(browser, sel) == steps[0].text
    assert now_line(browser, sel) == 0
    browser.click(f"{sel} button[data-step=back]")            # nothing before the first event
    assert step_index(browser, sel) == 0
    for k in range(1, last + 1):
        browser.click(f"{sel} button[data-step=next]")
        assert step_index(browser, sel) == k and step_text(browser, sel) == steps[k].text, k
        assert now_line(browser, sel) == (None if k == last else steps[k].t)
    browser.click(f"{sel} button[data-step=next]")            # nor after the last
    assert step_index(browser, sel) == last
    browser.click(f"{sel} button[data-step=back]")
    browser.click(f"{sel} button[data-step=next]")
    assert step_text(browser, sel) == steps[last].text         # step back then forward: the same state


def test_the_race_steps_through_courselibs_states(browser):
    """The seed's deadlock pod by pod: 600 binds, a's and b's alternating, each line courselib's."""
    steps = gang_steps(simulate(default_workload(), "kube-default", horizon=views.RACE_HORIZON_S, binds=True))
    assert len(steps) == 605 and steps[3].text.startswith("t=0:00 job a: bound 1 pod on node1: 1/512 placed")
    assert steps[4].text.startswith("t=0:00 job b: bound 1 pod on node2: 1/512 placed")
    fresh(browser)
    walk(browser, ROOT_SEL, steps)


def test_a_new_setting_steps_through_its_own_run(browser):
    steps = gang_steps(simulate(default_workload(minutes_b=10), "kube-default", horizon=views.RACE_HORIZON_S,
                                binds=True))
    fresh(browser)
    browser.press(f"{ROOT_SEL} select[name=delay]", "ArrowDown", 40)   # job b 10 min later
    loaded(browser)
    assert step_index(browser) == len(steps) - 1 and step_text(browser) == steps[-1].text
    k = next(i for i, s in enumerate(steps) if s.t > 0)      # the first event after t=0: job b arrives
    browser.click(f"{ROOT_SEL} button[data-step=reset]")
    for _ in range(k):
        browser.click(f"{ROOT_SEL} button[data-step=next]")
    assert step_text(browser) == steps[k].text and now_line(browser) == steps[k].t == 600


def test_play_runs_to_the_end_and_pause_stops(browser):
    fresh(browser)
    browser.click(f"{ROOT_SEL} input[value=volcano]")
    browser.press(f"{ROOT_SEL} select[name=delay]", "ArrowDown", 40)   # job b 10 min later
    loaded(browser)
    steps = gang_steps(simulate(default_workload(minutes_b=10), "volcano", horizon=views.RACE_HORIZON_S,
                                binds=True))
    play = f"{ROOT_SEL} button[data-step=play]"
    browser.click(play)                                       # at the end: play starts again from 0
    assert browser.js(f"document.querySelector('{play}').getAttribute('aria-pressed')") == "true"
    browser.wait_for(f"document.querySelector('{ROOT_SEL}').dataset.step === '{len(steps) - 1}'",
                     timeout=3 + len(steps) * 2)
    browser.wait_for(f"document.querySelector('{play}').getAttribute('aria-pressed') === 'false'")
    browser.click(play)
    browser.wait_for(f"document.querySelector('{ROOT_SEL}').dataset.step === '1'", timeout=5)
    browser.click(play)                                       # pause
    held = step_index(browser)
    browser.wait_for("new Promise(r => setTimeout(() => r(true), 1500))", timeout=5)
    assert step_index(browser) == held < len(steps) - 1


def test_the_barrier_run_steps_through_courselibs_states(browser):
    """The barrier playground's 512-rank run (rank 37 hung at 3 h): its 12 events (13 states), each line courselib's."""
    from courselib.sim import barrier
    from courselib.sim.steps import barrier_steps

    steps = barrier_steps(barrier.simulate(barrier.BarrierScenario(
        ranks=512, losses=(barrier.RankLoss(37, 3 * 3600),), checkpoint_every_s=3600, timeout_s=600,
        restart_s=300)))
    assert len(steps) == 13                                  # 12 events and the state before them
    fresh(browser)
    assert browser.js(f"document.querySelector('{RUN_SEL} [data-out=verdict]').textContent").endswith(
        "1 restart, 640.00 GPU-hours lost.")
    walk(browser, RUN_SEL, steps)
    # the chart at the stall: 511 ranks stalled (vermillion) and 1 lost (black), what comes later veiled
    browser.click(f"{RUN_SEL} button[data-step=reset]")
    stall = next(k for k, s in enumerate(steps) if s.phase == "stalled")
    for _ in range(stall):
        browser.click(f"{RUN_SEL} button[data-step=next]")
    assert "511 stalled, 1 lost" in step_text(browser, RUN_SEL)
    states = browser.js(f"[...new Set([...document.querySelectorAll('{RUN_SEL} svg rect[data-state]')]"
                        ".map(r => r.getAttribute('data-state')))]")
    assert {"training", "stalled", "lost", "restarting"} <= set(states)
    assert browser.js(f"document.querySelectorAll('{RUN_SEL} svg rect[data-veil]').length") == 1


def test_every_rung_of_the_ladder_steps_through_its_own_run(browser):
    """Each rung of the recovery ladder: pick it, and every step's line is courselib's for that rung."""
    from courselib.model import recovery
    from courselib.sim import barrier
    from courselib.sim.steps import barrier_steps

    fresh(browser)
    assert browser.js(f"document.querySelector('{LADDER_SEL} input[name=case]:checked').value") == "restart"
    for rung in recovery.RUNGS:
        steps = barrier_steps(barrier.simulate(barrier.BarrierScenario(
            ranks=512, losses=(barrier.RankLoss(37, 3.5 * 3600, "error"),), recovery=rung,
            ladder={"replacement_wait_s": 600})))
        browser.click(f"{LADDER_SEL} input[value={rung}]")
        assert browser.js(f"document.querySelector('{LADDER_SEL}').dataset.setting") == f'{{"case":"{rung}"}}'
        walk(browser, LADDER_SEL, steps)
    # the views are independent: the race and the run were not moved
    assert step_index(browser) == len(gang_steps(simulate(default_workload(), "kube-default",
                                                          horizon=views.RACE_HORIZON_S, binds=True))) - 1
