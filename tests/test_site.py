"""The website: built with warnings as errors, every page present, every image with alt text,
launch buttons in place, and every page loaded in a real headless Chromium without console errors."""
from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path

import pytest

from test_book import toc_files

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    jb = Path(sys.executable).with_name("jupyter-book")
    done = subprocess.run([str(jb), "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, "book build failed with warnings as errors:\n" + "\n".join(
        line for line in (done.stdout + done.stderr).splitlines() if "WARNING" in line or "ERROR" in line)[-4000:]
    return out / "_build" / "html"


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images: list[dict] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


def pages() -> list[str]:
    return [f + ".html" for f in toc_files()]


def test_every_toc_page_is_built(site):
    for page in pages():
        assert (site / page).is_file(), page
    assert (site / "index.html").is_file()


def test_images_have_alt_text_and_internal_links_resolve(site):
    for page in pages():
        parser = _Images()
        parser.feed((site / page).read_text())
        for img in parser.images:
            if "logo" in (img.get("class") or ""):
                continue
            alt = (img.get("alt") or "").strip()
            assert alt and not alt.lower().endswith((".png", ".svg", ".jpg")) and "_images/" not in alt, \
                f"{page}: image {img.get('src')} has no alt text (alt={alt!r})"
        for href in parser.links:
            if href.startswith(("http", "mailto:", "#", "javascript:")):
                continue
            target = (site / page).parent / href.split("#")[0]
            if href.split("#")[0]:
                assert target.exists(), f"{page}: broken link {href}"


def test_chapters_have_binder_launch_buttons(site):
    html = (site / "book" / "01-container-is-a-process.html").read_text()
    assert re.search(r"mybinder\.org/v2/gh/[^\"']+\?urlpath=[^\"']*book%2F01-container-is-a-process\.md|"
                     r"mybinder\.org/v2/gh/[^\"']+book/01-container-is-a-process\.md", html), "Binder button opens the chapter"


def test_solutions_are_not_published(site):
    assert not (site / "solutions").exists()


def _serve(directory: Path):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_pages_load_in_headless_chromium_without_console_errors(site, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
    server = _serve(site)
    try:
        for page in pages():
            url = f"http://127.0.0.1:{server.server_port}/{page}"
            done = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                 "--virtual-time-budget=3000", "--dump-dom", url],
                capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-2000:]
            assert "<article" in done.stdout or "bd-article" in done.stdout, f"{page}: no article rendered"
            console_errors = [l for l in done.stderr.splitlines()
                              if "CONSOLE" in l and ("ERROR" in l or "Uncaught" in l)
                              and "127.0.0.1" in l]
            assert not console_errors, f"{page}: console errors:\n" + "\n".join(console_errors)
    finally:
        server.shutdown()


def test_student_edition_hides_every_solution(tmp_path):
    """`make book-student`'s config (hide_solutions: true) builds, keeps the exercises, drops every solution."""
    config = ROOT / ".config_student_test.yml"
    config.write_text((ROOT / "_config.yml").read_text().replace("hide_solutions: false", "hide_solutions: true"))
    try:
        jb = Path(sys.executable).with_name("jupyter-book")
        done = subprocess.run([str(jb), "build", str(ROOT), "--path-output", str(tmp_path), "--config", str(config),
                               "-W", "-n", "--keep-going"], capture_output=True, text=True, timeout=1800)
    finally:
        config.unlink()
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    html = tmp_path / "_build" / "html"
    for page in pages():
        text = (html / page).read_text()
        if "exercise" in text:
            assert 'class="solution' not in text and "solution-content" not in text, f"{page} shows a solution"
    assert "exercise" in (html / "book" / "02-cgroups.html").read_text()
