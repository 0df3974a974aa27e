"""The website as a reader meets it: built with warnings as errors, then every page opened in a real
headless Chromium (Debian's, driven over the DevTools protocol by tests/site_browser.py).

The book is built once per session, and every page is loaded once at desktop width and once at phone
width; the checks below read what that crawl saw. Screenshots of every page (desktop and phone) go to
``_build/screenshots/`` for CI to keep, with ``report.json`` (pages, checks, seconds).

``COURSE_SITE_HTML=_build/html`` tests an already built site (``make site-test`` and the publish
workflow, after ``make book``) instead of building one (``COURSE_STUDENT_HTML`` likewise for the
student edition); ``COURSE_MATHJAX=<dir>`` names a local MathJax 3 (its ``es5/``
folder's parent) to answer the CDN's requests, otherwise one is fetched once with ``npm pack``.
"""
from __future__ import annotations

import functools
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, unquote, urljoin, urlparse

import pytest
import yaml

from book_exec import build_config, jupyter_book
from site_browser import MATHJAX_CDN, Chromium, chromium_binary
from test_book import page_path, toc_files

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "_build" / "screenshots"
DESKTOP = (1280, 900)
PHONE = (375, 812)
SCREENS = 3  # each screenshot shows a page's first three screenfuls
pytestmark = pytest.mark.slow

# Hosts the published pages may load from. Here they are refused at once (this machine has no
# network); a page asking for anything else would make the site depend on a new outside service.
ALLOWED_OUTSIDE = {"cdn.jsdelivr.net", "cdnjs.cloudflare.com"}


def _build(out: Path, **config) -> Path:
    """Build the book into ``out`` with the book's _config.yml (``config`` changes, e.g. hide_solutions),
    executing each page at most once per run: the execution cache is shared with tests/test_book.py's
    page test and the other edition (tests/book_exec.py)."""
    conf = build_config(ROOT / f".config_site_test_{os.getpid()}.yml", **config)
    try:
        done = subprocess.run([*jupyter_book(), "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going",
                               "--config", str(conf)], capture_output=True, text=True, timeout=1800)
    finally:
        conf.unlink()
    out.mkdir(parents=True, exist_ok=True)
    (out / "build.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, "book build failed with warnings as errors:\n" + "\n".join(
        line for line in (done.stdout + done.stderr).splitlines() if "WARNING" in line or "ERROR" in line)[-4000:]
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    given = os.environ.get("COURSE_SITE_HTML")
    if given:
        path = (ROOT / given).resolve()
        assert (path / "index.html").is_file(), f"COURSE_SITE_HTML={given}: no built site there (run make book)"
        return path
    return _build(tmp_path_factory.mktemp("site"))


def pages() -> list[str]:
    return [f + ".html" for f in toc_files()]


def crawled_pages(site: Path) -> list[str]:
    """Every page a reader can reach: the table of contents, plus the index, search and the root redirect."""
    extra = [p for p in ("index.html", "genindex.html", "search.html") if (site / p).is_file()]
    return pages() + extra


# ---- static checks on the built HTML -------------------------------------------------------------

class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images: list[dict] = []
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "img":
            self.images.append(a)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


@functools.lru_cache(maxsize=None)
def _parsed(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text())
    return p


def test_every_toc_page_is_built(site):
    for page in pages():
        assert (site / page).is_file(), page
    assert (site / "index.html").is_file()


def test_images_have_alt_text(site):
    for page in pages():
        for img in _parsed(site / page).images:
            if "logo" in (img.get("class") or ""):
                continue
            alt = (img.get("alt") or "").strip()
            assert alt and not alt.lower().endswith((".png", ".svg", ".jpg")) and "_images/" not in alt, \
                f"{page}: image {img.get('src')} has no alt text (alt={alt!r})"


def test_internal_links_and_anchors_resolve(site):
    """Every same-site link opens a page that exists, at an anchor that exists on it."""
    broken, checked = [], 0
    for page in crawled_pages(site):
        for href in _parsed(site / page).links:
            if href.startswith(("http:", "https:", "mailto:", "javascript:", "data:")):
                continue
            path, _, fragment = href.partition("#")
            target = (site / page).parent / unquote(path) if path else site / page
            checked += 1
            if not target.exists():
                broken.append(f"{page}: {href} (no such file)")
            elif fragment and target.suffix == ".html" and unquote(fragment) not in _parsed(target.resolve()).ids \
                    and html.unescape(unquote(fragment)) not in _parsed(target.resolve()).ids:
                broken.append(f"{page}: {href} (no anchor #{fragment} there)")
    assert checked > 100, f"only {checked} internal links found: is the site built?"
    assert not broken, "broken internal links:\n" + "\n".join(broken)


def test_solutions_are_not_published(site):
    assert not (site / "solutions").exists()


# ---- Binder launch buttons -------------------------------------------------------------------------

def _launch_links(site: Path, page: str) -> list[str]:
    return [h for h in _parsed(site / page).links if "mybinder.org/v2/" in h]


def test_launch_buttons_open_this_page_on_binder(site):
    """Each page with code has a Binder button that opens its own source file (a .md chapter opens as a
    notebook through jupytext), in this repository and branch; every file it names exists."""
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    owner_repo = urlparse(repo["url"]).path.strip("/")
    with_code = [p for p in toc_files() if page_path(p).suffix == ".ipynb" or "kernelspec" in page_path(p).read_text()[:400]]
    assert len(with_code) >= 9
    for entry in with_code:
        links = _launch_links(site, entry + ".html")
        assert links, f"{entry}: no Binder launch button"
        for link in links:
            url = urlparse(html.unescape(link))
            assert url.path == f"/v2/gh/{owner_repo}/{repo.get('branch', 'main')}", f"{entry}: {link}"
            urlpath = parse_qs(url.query)["urlpath"][0]
            assert urlpath.startswith("lab/tree/"), f"{entry}: Binder opens {urlpath}, not JupyterLab on the file"
            opened = urlpath[len("lab/tree/"):]
            assert (ROOT / opened).is_file(), f"{entry}: Binder would open {opened}, which is not in the repository"
            assert opened == page_path(entry).relative_to(ROOT).as_posix(), f"{entry}: Binder opens {opened}"


# ---- the browser crawl (once per session) --------------------------------------------------------

def _serve(directory: Path):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def mathjax() -> Path | None:
    """A local MathJax 3 to stand in for the CDN (``COURSE_MATHJAX``, a cached copy, or ``npm pack``)."""
    given = os.environ.get("COURSE_MATHJAX")
    candidates = [Path(given)] if given else []
    candidates.append(ROOT / "_build" / "mathjax" / "package")
    for c in candidates:
        if (c / "es5" / "tex-mml-chtml.js").is_file():
            return c
    npm = shutil.which("npm")
    if npm is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([npm, "pack", "--silent", "mathjax@3"], cwd=tmp, capture_output=True, text=True,
                              timeout=180)
        tgz = list(Path(tmp).glob("mathjax-*.tgz"))
        if done.returncode != 0 or not tgz:
            return None
        dest = ROOT / "_build" / "mathjax"
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tgz[0]) as tar:
            tar.extractall(dest, filter="data")
    return dest / "package" if (dest / "package" / "es5" / "tex-mml-chtml.js").is_file() else None


PAGE_FACTS = """(() => {
  const visible = (e) => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length);
  return {
    title: document.title,
    article: !!document.querySelector('article, .bd-article'),
    images: [...document.querySelectorAll('article img, .bd-article img')].map(i => ({
      src: i.getAttribute('src'), alt: (i.getAttribute('alt') || '').trim(), complete: i.complete,
      width: i.naturalWidth, shown: visible(i)})),
    math: document.querySelectorAll('.math').length,
    typeset: document.querySelectorAll('.math mjx-container').length,
    scrollWidth: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
    width: window.innerWidth,
    copyButtons: document.querySelectorAll('button.copybtn').length,
    dropdowns: document.querySelectorAll('.solution.dropdown').length,
    views: [...document.querySelectorAll('.course-view')].map(v => v.dataset.ready || 'no'),
  };
})()"""


def _shot_name(page: str) -> str:
    return page.removesuffix(".html").replace("/", "__") + ".png"


class Crawl:
    def __init__(self):
        self.desktop: dict[str, dict] = {}
        self.phone: dict[str, dict] = {}
        self.events: dict[str, list] = {}
        self.blocked: list[str] = []
        self.served_locally = 0
        self.seconds = 0.0
        self.pages: list[str] = []


@pytest.fixture(scope="module")
def browser(site, mathjax):
    """One Chromium and one tab on the site served at 127.0.0.1, for the crawl and the interaction tests."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
    server = _serve(site)
    base = f"http://127.0.0.1:{server.server_port}/"
    try:
        with Chromium(binary, mathjax_dir=mathjax, local_prefix=base) as tab:
            tab.base = base
            yield tab
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def crawl(site, browser) -> Crawl:
    """Open every page at desktop and at phone width; record what a reader would see; save screenshots."""
    result = Crawl()
    result.pages = crawled_pages(site)
    t0 = time.monotonic()
    for width, height, mobile, store, folder in ((*DESKTOP, False, result.desktop, "desktop"),
                                                 (*PHONE, True, result.phone, "phone")):
        browser.viewport(width, height, mobile)
        for page in result.pages:
            browser.goto(browser.base + page)
            facts = browser.js(PAGE_FACTS)
            facts["url"] = browser.js("location.pathname")
            store[page] = facts
            result.events.setdefault(page, []).extend(browser.events)
            browser.screenshot(SHOTS / folder / _shot_name(page), screens=SCREENS)
    result.seconds = time.monotonic() - t0
    result.blocked = sorted(set(browser.blocked))
    result.served_locally = len(browser.served_locally)
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / "report.json").write_text(json.dumps({
        "pages": result.pages, "page_loads": 2 * len(result.pages), "seconds": round(result.seconds, 1),
        "desktop": list(DESKTOP), "phone": list(PHONE), "chromium": subprocess.run(
            [chromium_binary(), "--version"], capture_output=True, text=True).stdout.strip(),
        "outside_requests_refused": result.blocked, "mathjax_from_local_copy": result.served_locally,
    }, indent=2) + "\n")
    return result


def _real_errors(events: list[dict], base: str) -> list[str]:
    out = []
    for e in events:
        if e["kind"] == "log.network" and e["url"] and not e["url"].startswith(base):
            continue  # an outside request refused on purpose (checked against ALLOWED_OUTSIDE)
        if e["kind"] == "log.network" and e["url"].endswith("/favicon.ico"):
            continue  # the browser's own request, not the page's
        out.append(f"{e['kind']}: {e['text']} {e['url']}".strip())
    return out


def test_every_page_loads_without_console_errors(crawl, browser):
    assert len(crawl.pages) >= len(pages())
    bad = {p: _real_errors(ev, browser.base) for p, ev in crawl.events.items()}
    bad = {p: e for p, e in bad.items() if e}
    assert not bad, "console errors:\n" + "\n".join(f"{p}: {e}" for p, es in bad.items() for e in es)
    for page in pages():
        assert crawl.desktop[page]["article"], f"{page}: no article rendered"
    assert crawl.desktop["index.html"]["url"].endswith("/book/intro.html"), "the site root opens the introduction"


def test_pages_ask_no_unexpected_outside_host(crawl):
    hosts = {urlparse(u).hostname for u in crawl.blocked}
    assert hosts <= ALLOWED_OUTSIDE, f"pages load from hosts outside the allowed CDNs: {sorted(hosts - ALLOWED_OUTSIDE)}"


def test_every_image_loads_and_has_alt_text(crawl):
    count = 0
    for page, facts in crawl.desktop.items():
        for img in facts["images"]:
            count += 1
            assert img["complete"] and img["width"] > 0, f"{page}: image {img['src']} did not load"
            if "logo" not in img["src"]:
                assert img["alt"], f"{page}: image {img['src']} has no alt text"
    assert count >= 10, f"only {count} images on the whole site"


def test_math_renders(crawl, mathjax):
    with_math = {p: f for p, f in crawl.desktop.items() if f["math"]}
    assert len(with_math) >= 2, "the chapters' formulas are written as MathJax markup"
    if mathjax is None:
        pytest.skip("no local MathJax 3 to stand in for the CDN (needs npm, or COURSE_MATHJAX=<dir>): "
                    "math markup is present but its typesetting is not checked here")
    assert crawl.served_locally > 0, f"no page asked for MathJax at {MATHJAX_CDN}"
    for page, facts in with_math.items():
        assert facts["typeset"] == facts["math"], f"{page}: {facts['typeset']} of {facts['math']} formulas typeset"


def test_every_page_fits_a_phone_screen(crawl):
    """At 375 px nothing pushes the page sideways (wide tables and code scroll inside their own box)."""
    # A phone widens its layout viewport to fit content wider than the screen, so compare with the screen.
    wide = {p: f["scrollWidth"] for p, f in crawl.phone.items() if f["scrollWidth"] > PHONE[0]}
    assert not wide, f"pages wider than a {PHONE[0]} px phone: {wide}"


def test_screenshots_of_every_page_at_both_widths(crawl):
    for page in crawl.pages:
        for folder in ("desktop", "phone"):
            png = SHOTS / folder / _shot_name(page)
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    report = json.loads((SHOTS / "report.json").read_text())
    assert report["page_loads"] == 2 * len(crawl.pages)


# ---- clicking things ------------------------------------------------------------------------------

def _chapter_with(crawl, key: str) -> str:
    return next(p for p in pages() if p.startswith("book/") and crawl.desktop[p][key])


def test_code_copy_button_copies_the_cell(crawl, browser):
    page = _chapter_with(crawl, "copyButtons")
    browser.viewport(*DESKTOP, False)
    browser.goto(browser.base + page)
    browser.call("Browser.grantPermissions", session=False, origin=browser.base.rstrip("/"),
                 permissions=["clipboardReadWrite", "clipboardSanitizedWrite"])
    before = browser.js("document.querySelector('button.copybtn').getAttribute('data-tooltip')")
    browser.click("button.copybtn")
    after = browser.js("document.querySelector('button.copybtn').getAttribute('data-tooltip')")
    assert (before, after) == ("Copy", "Copied!"), f"{page}: the copy button said {before!r} then {after!r}"
    copied = browser.js("navigator.clipboard.readText()")
    code = browser.js("document.querySelector(document.querySelector('button.copybtn')"
                      ".getAttribute('data-clipboard-target')).innerText")
    assert copied.strip() and copied.strip() == code.strip(), f"{page}: clipboard holds {copied!r}"


def test_solution_dropdown_opens_on_click(crawl, browser):
    page = _chapter_with(crawl, "dropdowns")
    browser.viewport(*DESKTOP, False)
    browser.goto(browser.base + page)
    body = ("(() => { const s = document.querySelector('.solution.dropdown'); const b = [...s.children]"
            ".filter(c => !c.classList.contains('admonition-title')); return b.some(c => c.offsetHeight > 0); })()")
    assert browser.js(body) is False, f"{page}: the solution is visible before it is opened"
    browser.click(".solution.dropdown .admonition-title")
    assert browser.wait_for(body, timeout=5), f"{page}: clicking the solution's title does not open it"
    browser.click(".solution.dropdown .admonition-title")
    assert browser.wait_for(f"!{body}", timeout=5), f"{page}: clicking it again does not close it"


# ---- kernel-free interactive views ---------------------------------------------------------------

def _out(browser, root: str, name: str) -> str:
    return browser.js(f"document.querySelector('{root} [data-out=\"{name}\"]').textContent.trim()")


def _money(v) -> str:
    return f"${v[0]:,.2f}–${v[1]:,.2f}" if isinstance(v, list) else f"${v:,.2f}"


def _priced(gpus: int, wait_min: int, price: str) -> tuple[str, str]:
    from courselib.model import cost

    c = cost.gang_wait_cost(cost.GangWait(gpus_held=gpus, wait_s=wait_min * 60.0, price=cost.Price.parse(price)))
    return f"{c.wasted_gpu_hours:,.2f}", _money(c.cost_usd)


def test_cost_calculator_works_without_a_kernel(crawl, browser):
    """Move the calculator's controls with the keyboard: the page shows what courselib computes."""
    page = "notebooks/cost-calculator.html"
    assert crawl.desktop[page]["views"] == ["true"]
    browser.viewport(*DESKTOP, False)
    browser.goto(browser.base + page)
    root = ".course-view--cost"
    setting = lambda: json.loads(browser.js(f"document.querySelector('{root}').dataset.setting"))
    assert setting() == {"gpus": 400, "wait_min": 25, "price": "2-4"}
    assert (_out(browser, root, "gpu_hours"), _out(browser, root, "cost")) == _priced(400, 25, "2-4")
    browser.screenshot(SHOTS / "views" / "cost-calculator.png", clip_selector=root)

    browser.press(f"{root} input[name=gpus]", "ArrowRight", 39)   # one step: 400 -> 416 GPUs
    browser.press(f"{root} input[name=wait]", "ArrowLeft", 37)    # 25 -> 20 min
    browser.press(f"{root} select[name=price]", "ArrowUp", 38)    # $2-4 -> $8
    now = setting()
    assert now == {"gpus": 416, "wait_min": 20, "price": "8"}, now
    shown = (_out(browser, root, "gpu_hours"), _out(browser, root, "cost"))
    assert shown == _priced(416, 20, "8") != _priced(400, 25, "2-4"), shown
    assert _out(browser, root, "gang_gpu_hours") == "0.00", "with a gang check no GPU is held while pending"


def test_gang_race_works_without_a_kernel(crawl, browser):
    """Pick a scheduler and grow the cluster: the verdict is courselib.sim.gang's for that setting."""
    from courselib.sim.gang import simulate
    from courselib.widgets.gang import default_workload

    def verdict(policy, nodes, delay=0):
        return simulate(default_workload(nodes=nodes, minutes_b=delay), policy, horizon=6 * 3600).verdict

    page = "notebooks/gang-playground.html"
    # two views on the page, the race and the topology view (tests/test_site_topology.py): both ready
    assert crawl.desktop[page]["views"] == ["true", "true"], crawl.desktop[page]["views"]
    browser.viewport(*DESKTOP, False)
    browser.goto(browser.base + page)
    root = ".course-view--race"
    colours = f"[...document.querySelectorAll('{root} svg rect')].map(r => r.getAttribute('fill'))"
    assert _out(browser, root, "verdict") == verdict("kube-default", 75)
    assert _out(browser, root, "verdict").startswith("DEADLOCK")
    assert "#D55E00" in browser.js(colours) and "#009E73" not in browser.js(colours)
    browser.screenshot(SHOTS / "views" / "gang-race-deadlock.png", clip_selector=root)

    def settled():   # the steps of the last setting have loaded (the layout below the chart is final)
        deadline = time.monotonic() + 15
        while browser.js(f"document.querySelector('{root}').dataset.loading === 'true'") and time.monotonic() < deadline:
            time.sleep(0.1)

    settled()
    browser.click(f"{root} input[value=volcano]")
    settled()
    assert _out(browser, root, "verdict") == verdict("volcano", 75)
    assert "#009E73" in browser.js(colours) and "#D55E00" not in browser.js(colours)
    browser.screenshot(SHOTS / "views" / "gang-race-volcano.png", clip_selector=root)

    browser.click(f"{root} input[value=kube-default]")
    settled()
    assert _out(browser, root, "verdict") == verdict("kube-default", 75)
    browser.press(f"{root} input[name=nodes]", "ArrowRight", 39)  # 75 -> 80 nodes: still a deadlock
    settled()
    assert _out(browser, root, "verdict") == verdict("kube-default", 80)
    browser.press(f"{root} select[name=delay]", "ArrowDown", 40)  # job b 10 min later: a trains, no deadlock
    assert _out(browser, root, "verdict") == verdict("kube-default", 80, 10)
    assert not _out(browser, root, "verdict").startswith("DEADLOCK")


def test_self_checks_answer_in_the_page_without_a_kernel(crawl, browser):
    """A chapter's self-checks say right and wrong in the browser, from the answer courselib computed."""
    from courselib.static import selfchecks

    browser.viewport(*DESKTOP, False)
    browser.goto(browser.base + "book/07-nccl-barrier.html")
    said = lambda root: browser.js(f"document.querySelector('{root} .course-check__feedback').textContent")
    choice = selfchecks.get("ch7-rendezvous")
    root = "#check-ch7-rendezvous"
    browser.click(f"{root} .course-check__button")
    assert said(root) == "Pick one first."
    browser.click(f"{root} input[value=\"{(int(choice.answer) + 1) % len(choice.choices)}\"]")
    browser.click(f"{root} .course-check__button")
    assert said(root).startswith("Not quite")
    browser.click(f"{root} input[value=\"{int(choice.answer)}\"]")
    browser.click(f"{root} .course-check__button")
    assert said(root) == "Right."
    number = selfchecks.get("ch7-silent")
    root = "#check-ch7-silent"
    for typed, verdict in ((str(number.answer + 60), "Not quite"), (f"{number.answer:g}", "Right.")):
        browser.js(f"document.querySelector('{root} input').value = {json.dumps(typed)}")
        browser.click(f"{root} .course-check__button")
        assert said(root).startswith(verdict), (typed, said(root))
    browser.screenshot(SHOTS / "views" / "self-check.png", clip_selector=root)


# ---- the student edition -------------------------------------------------------------------------

def test_student_edition_hides_every_solution(site, tmp_path):
    """`make book-student`'s config (hide_solutions: true) builds, keeps the exercises, drops every solution.
    ``COURSE_STUDENT_HTML=_build/student/_build/html`` checks the edition `make book-student` built."""
    given = os.environ.get("COURSE_STUDENT_HTML")
    if given:
        html_dir = (ROOT / given).resolve()
        assert (html_dir / "index.html").is_file(), f"COURSE_STUDENT_HTML={given}: no built site there"
    else:
        html_dir = _build(tmp_path, hide_solutions=True)
    assert "hide_solutions: false" in (ROOT / "_config.yml").read_text(), "the instructor edition shows solutions"
    exercises = solutions = 0
    for page in pages():
        text = (html_dir / page).read_text()
        assert 'class="solution' not in text and "solution-content" not in text, f"{page} shows a solution"
        mine = text.count('class="exercise')
        assert mine == (site / page).read_text().count('class="exercise'), f"{page}: the editions' exercises differ"
        exercises += mine
        solutions += (site / page).read_text().count('class="solution')
    assert exercises >= 20 and solutions >= 20, (exercises, solutions)
    # a gated solution's code cells are cut from the student's page after it is parsed
    # (book/_ext/course_build.py), so its notebook is the instructor's: no page executes a second time
    gated = _gated_code_cells()
    for page in pages():
        cells = [(html_dir / page).read_text().count(CELL), (site / page).read_text().count(CELL)]
        assert cells[0] == cells[1] - gated.get(page, 0), (page, cells, gated.get(page, 0))
    assert sum(gated.values()) >= 20, gated
    if not given and not os.environ.get("COURSE_SITE_HTML"):
        again = [line for line in (tmp_path / "build.log").read_text().splitlines() if "Executing notebook" in line]
        assert again == [], "the student edition executed pages the instructor edition had executed:\n" + "\n".join(again)


CELL = 'class="cell docutils container'


def _gated_code_cells() -> dict[str, int]:
    """page.html -> how many code cells its gated solutions hold (shown in the instructor's edition only)."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import course_build
    finally:
        sys.path.pop(0)
    out = {}
    for page in pages():
        source = page_path(page[:-len(".html")])
        if source.suffix == ".md":
            n = sum(len(re.findall(r"^`{3,}\{code-cell\}", m["body"], re.M))
                    for m in course_build._GATED_SOLUTION.finditer(source.read_text()))
            if n:
                out[page] = n
    return out
