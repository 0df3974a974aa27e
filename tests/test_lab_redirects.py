"""Old links to the renumbered labs keep working: the website gets a redirect page for each
(``course_redirects`` in _config.yml, written by book/_ext/course_build.py)."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_build  # noqa: E402

OLD = ["labs/01-gang-deadlock", "labs/02-gang-cost", "labs/03-barrier", "labs/04-oom-killer"]
#: chapter 6 split in two (issue 32): its old address opens the first half
OLD_CHAPTERS = {"book/06-kubernetes-gang": "book/06-gang-deadlock"}


def redirects() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]["course_redirects"]


def toc_pages() -> set[str]:
    return set(re.findall(r"- file: (\S+)", (ROOT / "_toc.yml").read_text()))


def test_every_old_lab_page_redirects_to_a_page_of_the_book():
    r = redirects()
    assert sorted(r) == sorted(OLD + list(OLD_CHAPTERS))
    assert set(r.values()) <= toc_pages() and not set(r) & toc_pages()
    assert {k: r[k] for k in OLD_CHAPTERS} == OLD_CHAPTERS
    for old, new in ((o, r[o]) for o in OLD):      # same lab, same topic: the name after the number is kept
        assert old.split("-", 1)[1] == new.split("-", 1)[1], (old, new)


def test_a_redirect_page_sends_readers_and_search_engines_on(tmp_path):
    (written,) = course_build.write_redirects(tmp_path, {"labs/01-gang-deadlock": "labs/06-gang-deadlock"})
    html = written.read_text()
    assert written == tmp_path / "labs" / "01-gang-deadlock.html"
    assert 'http-equiv="refresh" content="0; url=06-gang-deadlock.html"' in html
    assert '<link rel="canonical" href="06-gang-deadlock.html">' in html and 'name="robots" content="noindex"' in html
    assert '<script>location.replace("06-gang-deadlock.html" + location.hash)</script>' in html   # keeps #anchors
    deeper = course_build.redirect_page("a/b/old", "c/new")
    assert "url=../../c/new.html" in deeper


def test_a_redirect_never_replaces_a_real_page(tmp_path):
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "05-slurm.html").write_text("<html>the Slurm lab</html>")
    with pytest.raises(RuntimeError, match="is a page of the book"):
        course_build.write_redirects(tmp_path, {"labs/05-slurm": "labs/06-gang-deadlock"})
    assert (tmp_path / "labs" / "05-slurm.html").read_text() == "<html>the Slurm lab</html>"


def test_a_page_left_by_a_build_from_before_the_move_is_replaced(tmp_path):
    (tmp_path / "labs").mkdir()
    stale = tmp_path / "labs" / "01-gang-deadlock.html"
    stale.write_text("<html>the gang-deadlock lab, built before it was renumbered</html>")
    course_build.write_redirects(tmp_path, {"labs/01-gang-deadlock": "labs/06-gang-deadlock"},
                                 pages={"labs/06-gang-deadlock", "intro"})
    assert "This page moved to" in stale.read_text()
    with pytest.raises(RuntimeError, match="is a page of the book"):
        course_build.write_redirects(tmp_path, {"labs/05-slurm": "labs/06-gang-deadlock"},
                                     pages={"labs/05-slurm", "labs/06-gang-deadlock"})
    assert not (tmp_path / "labs" / "05-slurm.html").exists()


def test_the_built_site_has_the_redirect_pages():
    site = Path(os.environ.get("COURSE_SITE_HTML", ROOT / "_build" / "html"))
    if not (site / "index.html").is_file():
        pytest.skip(f"no built site at {site} (run make book)")
    for old, new in redirects().items():
        page = site / f"{old}.html"
        assert page.is_file() and (site / f"{new}.html").is_file(), old
        assert f"url={Path(new).name}.html" in page.read_text()
