"""The gang race's stepper on the website, without a kernel (issue 32): the buttons and the slider move over
the states courselib.sim.steps computed when the page was built.

The page here is the view alone, as book/_ext/course_views.py writes it (its markup, its data script and
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
    """One Chromium on a page that holds only the race view, served from a temporary folder."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
    sys.path.insert(0, str(EXT))
    try:
        import course_views
    finally:
        sys.path.remove(str(EXT))
    data = views.gang_race_table()
    site = tmp_path_factory.mktemp("race")
    (site / "gang-race.js").write_text(course_views.data_script("gang-race", data))
    (site / "course-views.js").write_text((EXT / "static" / "course-views.js").read_text())
    (site / "index.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>race</title>'
        '<script src="course-views.js" defer></script></head><body style="width:800px">'
        f'<script src="gang-race.js"></script>{course_views._race_html(data)}</body></html>')

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


def fresh(browser) -> None:
    """The page as a reader opens it (each test starts from the default setting, in any order)."""
    browser.goto(browser.base + "index.html")
    assert browser.wait_for(f"document.querySelector('{ROOT_SEL}').dataset.ready === 'true'")


def step_text(browser) -> str:
    return browser.js(f"document.querySelector('{ROOT_SEL} [data-out=\"step\"]').textContent.trim()")


def now_line(browser):
    return browser.js(f"(() => {{ const l = document.querySelector('{ROOT_SEL} svg line[data-now]');"
                      " return l ? +l.getAttribute('data-now') : null; })()")


def step_index(browser) -> int:
    return int(browser.js(f"document.querySelector('{ROOT_SEL}').dataset.step"))


def test_the_race_steps_through_courselibs_states(browser):
    steps = gang_steps(simulate(default_workload(), "kube-default", horizon=views.RACE_HORIZON_S))
    last = len(steps) - 1
    fresh(browser)
    # the whole run first: the last state, no "now" line
    assert step_index(browser) == last and step_text(browser) == steps[-1].text and now_line(browser) is None
    browser.click(f"{ROOT_SEL} button[data-step=reset]")
    assert step_index(browser) == 0 and step_text(browser) == steps[0].text
    assert now_line(browser) == 0
    browser.click(f"{ROOT_SEL} button[data-step=back]")        # nothing before the first event
    assert step_index(browser) == 0
    for k in range(1, last + 1):
        browser.click(f"{ROOT_SEL} button[data-step=next]")
        assert step_index(browser) == k and step_text(browser) == steps[k].text
    browser.click(f"{ROOT_SEL} button[data-step=next]")        # nor after the last
    assert step_index(browser) == last
    browser.click(f"{ROOT_SEL} button[data-step=back]")
    browser.click(f"{ROOT_SEL} button[data-step=next]")
    assert step_text(browser) == steps[last].text               # step back then forward: the same state


def test_a_new_setting_steps_through_its_own_run(browser):
    steps = gang_steps(simulate(default_workload(minutes_b=10), "kube-default", horizon=views.RACE_HORIZON_S))
    fresh(browser)
    browser.press(f"{ROOT_SEL} select[name=delay]", "ArrowDown", 40)   # job b 10 min later
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
    steps = gang_steps(simulate(default_workload(minutes_b=10), "volcano", horizon=views.RACE_HORIZON_S))
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
