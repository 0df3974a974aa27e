"""The topology view on the website, without a kernel (issue 29): where each pod of an examples/topology
workload landed under each policy, stepped through the run's events, as courselib computed it.

The page here is the view alone, as book/_ext/course_views.py writes it (its markup, its data script and
static/course-views.js), served at 127.0.0.1 and driven in Debian's headless Chromium.
"""
from __future__ import annotations

import functools
import http.server
import json
import sys
import threading
from pathlib import Path

import pytest

from courselib.plots.topology import example, states
from courselib.static import views
from site_browser import Chromium, chromium_binary

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext"
SEL = ".course-view--topology"


@functools.lru_cache(maxsize=1)
def table():
    return views.topology_table()


def course_views():
    sys.path.insert(0, str(EXT))
    try:
        import course_views as cv
    finally:
        sys.path.remove(str(EXT))
    return cv


def test_every_state_of_the_table_is_courselibs():
    t = table()
    assert t["examples"] and set(t["cases"]) == set(t["examples"]) and t["default"]["workload"] in t["cases"]
    for name, case in t["cases"].items():
        w = example(name)
        assert case["nodes"] == w.cluster.nodes and case["levels"] == [list(lv) for lv in w.cluster.topology]
        for policy in t["policies"]:
            want = states(w, policy)
            got = case["runs"][policy]
            assert [s["t"] for s in got] == [s.t for s in want] and [s["text"] for s in got] == [s.text for s in want]
            for s, ws in zip(got, want):
                assert s["waiting"] == [list(x) for x in ws.waiting]
                # every GPU is counted once: the jobs on the nodes equal the running jobs' GPUs
                assert sum(g for on in s["nodes"] for _, g in on) <= w.cluster.total_gpus
        assert [s["t"] for s in case["steps"]] == sorted({s["t"] for run in case["runs"].values() for s in run})


def test_the_default_moment_shows_kueues_refusal_and_kube_defaults_silent_start():
    lines = course_views().topology_lines(table(), "fragmentation", table()["default"]["step"])
    kueue = next(ln for ln in lines if ln.startswith("kueue:"))
    assert "c waits: " in kueue and "allows to fit only 3 out of 6 pod(s)" in kueue
    assert next(ln for ln in lines if ln.startswith("kube-default:")).endswith("c starts | no job waits")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
    cv = course_views()
    data = table()
    site = tmp_path_factory.mktemp("topology")
    (site / "topology.js").write_text(cv.data_script("topology-placement", data))
    (site / "course-views.js").write_text((EXT / "static" / "course-views.js").read_text())
    (site / "index.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>topology</title>'
        '<script src="course-views.js" defer></script></head><body style="width:800px">'
        f'<script src="topology.js"></script>{cv._topology_html(data)}</body></html>')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"
    try:
        with Chromium(binary, local_prefix=base) as tab:
            tab.base = base
            yield tab
    finally:
        server.shutdown()


def fresh(browser) -> None:
    browser.goto(browser.base + "index.html")
    assert browser.wait_for(f"document.querySelector('{SEL}').dataset.ready === 'true'")


def lines(browser) -> list[str]:
    return browser.js(f"[...document.querySelectorAll('{SEL} [data-out=\"lines\"] li')].map(li => li.textContent)")


def cells(browser, policy_index: int) -> dict:
    """Per node, the jobs drawn on it in one policy's row (a row's cells follow its title)."""
    return json.loads(browser.js(
        f"(() => {{ const svg = document.querySelector('{SEL} svg'); const out = {{}}; let row = -1;"
        " for (const e of svg.children) { if (e.dataset.policy) row += 1;"
        f"   if (row === {policy_index} && e.dataset.node !== undefined && e.dataset.job)"
        "     (out[e.dataset.node] = out[e.dataset.node] || []).push(e.dataset.job); }"
        " return JSON.stringify(out); })()"))


def test_the_view_draws_courselibs_placements_and_steps_through_them(browser):
    t = table()
    cv = course_views()
    fresh(browser)
    k = t["default"]["step"]
    assert lines(browser) == cv.topology_lines(t, "fragmentation", k)
    case = t["cases"]["fragmentation"]
    for i, policy in enumerate(t["policies"]):
        state = [s for s in case["runs"][policy] if s["t"] <= case["steps"][k]["t"]][-1]
        want = {str(n): [job for job, _ in on] for n, on in enumerate(state["nodes"]) if on}
        assert cells(browser, i) == want, policy
    browser.click(f"{SEL} button[data-step=next]")
    assert lines(browser) == cv.topology_lines(t, "fragmentation", k + 1)
    browser.click(f"{SEL} button[data-step=reset]")
    assert lines(browser) == cv.topology_lines(t, "fragmentation", 0)


def test_another_workload_shows_its_own_run(browser):
    t = table()
    fresh(browser)
    browser.js(f"(() => {{ const s = document.querySelector('{SEL} select[name=workload]');"
               " s.value = 'preferred-vs-required'; s.dispatchEvent(new Event('change')); })()")
    assert lines(browser) == course_views().topology_lines(t, "preferred-vs-required", 1)
    assert json.loads(browser.js(f"document.querySelector('{SEL}').dataset.setting")) == {"workload": "preferred-vs-required"}
