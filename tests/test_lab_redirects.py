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
from docutils.nodes import make_id  # noqa: E402

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
    assert follow(html, "#q2") == "06-gang-deadlock.html#q2"              # keeps #anchors
    assert follow(html, "") == "06-gang-deadlock.html"
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


# ---- chapter 6's old sections (issue 32): each old anchor opens the page that now holds it -----------

#: every anchor of the old book/06-kubernetes-gang page (its headings' ids, its labels, figure names,
#: exercise labels and self-check ids), as ``anchors()`` reads them from its last version (4c4a6d0^)
OLD_CH6 = "book/06-kubernetes-gang"
OLD_CH6_COMMIT = "4c4a6d0"
OLD_CH6_ANCHORS = [
    "ch-kubernetes-gang", "all-or-nothing-gang-scheduling-on-kubernetes-and-slurm",
    "the-barrier-that-makes-a-job-all-or-nothing", "the-model-one-workload-four-schedulers", "fig-ch6-deadlock",
    "check-ch6-deadlock", "the-same-story-on-a-real-control-plane", "native-gang-real",
    "native-gang-scheduling-for-real", "what-the-api-server-says-about-the-seed-s-manifest",
    "volcano-nothing-is-bound-unless-minmember-fits", "check-ch6-annotation", "check-ch6-overcommit",
    "worked-example-400-gpus-at-the-barrier-for-25-minutes", "fig-ch6-story2",
    "kueue-all-or-nothing-quota-not-placement", "kueue-for-real", "slurm-a-job-is-one-allocation",
    "k8s-native-gang", "kubernetes-own-gang-scheduling-v1-35-to-v1-37", "gang-failures",
    "when-a-running-gang-loses-a-pod", "stuck-pending-k8s", "a-gang-stuck-pending-what-to-check", "ch6-popular",
    "where-the-popular-account-is-imprecise", "exercises", "ex-ch6-smallest", "ex-ch6-price", "ex-ch6-easy",
    "ex-ch6-kueue-v1", "practice", "further-reading", "references",
]


def anchors(text: str) -> list[str]:
    """The ids a page's HTML gets from its MyST source: headings (docutils' ids), ``(label)=`` targets,
    ``:name:``/``:label:`` of figures and exercises, and ``check-<id>`` of each self-check."""
    out, fence = [], None
    for line in text.splitlines():
        m = re.match(r"^(`{3,}|~{3,})(\{self-check\} ([\w-]+))?", line)
        if m and fence is None:
            fence = m.group(1)
            if m.group(3):
                out.append(f"check-{m.group(3)}")
        elif m and fence is not None and line.strip() == fence:
            fence = None
        h = re.match(r"^#{1,6} (.+)$", line)
        if h and fence is None:
            out.append(make_id(re.sub(r"[`*]", "", h.group(1))))
        label = re.match(r"^\(([\w-]+)\)=$", line)
        if label:
            out.append(label.group(1))
        named = re.match(r"^:(?:name|label): ([\w-]+)", line.strip())
        if named:
            out.append(named.group(1))
    return out


def page_anchors(page: str) -> set[str]:
    return set(anchors((ROOT / f"{page}.md").read_text()))


def follow(html: str, hash_: str) -> str:
    """Where a redirect page's script sends a browser that opened it with ``hash_`` (node.js runs it)."""
    import json
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node.js is not installed")
    script = re.search(r"<script>(.*?)</script>", html, re.DOTALL).group(1)
    js = (f"let went = null; const location = {{hash: {json.dumps(hash_)}, replace: (u) => {{ went = u; }}}};\n"
          f"{script}\nprocess.stdout.write(String(went));")
    return subprocess.run([node, "-e", js], capture_output=True, text=True, check=True, timeout=30).stdout


def resolve(anchor: str) -> tuple[str, str]:
    """(page, anchor) where the redirect sends ``#anchor`` of the old chapter 6 (by the configuration)."""
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    to = cfg["course_redirect_anchors"][OLD_CH6].get(anchor)
    if to is None:
        return cfg["course_redirects"][OLD_CH6], anchor
    page, _, renamed = to.partition("#")
    return page, renamed or anchor


def test_the_old_chapter_6_anchor_list_is_the_old_pages():
    """OLD_CH6_ANCHORS is what the old page had (read from git history where the clone has it)."""
    import subprocess

    done = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD_CH6_COMMIT}^:{OLD_CH6}.md"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this clone lacks {OLD_CH6_COMMIT} (a shallow clone)")
    assert anchors(done.stdout) == OLD_CH6_ANCHORS


@pytest.mark.parametrize("anchor", OLD_CH6_ANCHORS)
def test_every_old_chapter_6_anchor_opens_the_page_that_holds_it(anchor):
    page, new_anchor = resolve(anchor)
    assert new_anchor in page_anchors(page), (anchor, page)
    holders = [p for p in ("book/06-gang-deadlock", "book/06-native-gang-and-failures") if anchor in page_anchors(p)]
    if len(holders) == 1:        # a section on one half only: that half, not the other
        assert page == holders[0], (anchor, holders)
    # the page the browser is sent to, as the written redirect page's script computes it
    old = OLD_CH6
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    html = course_build.redirect_page(old, cfg["course_redirects"][old], cfg["course_redirect_anchors"][old])
    assert follow(html, f"#{anchor}") == f"{Path(page).name}.html#{new_anchor}"


def test_the_moved_sections_are_the_native_and_failure_ones():
    """What moved to 6b (and the EASY exercise to chapter 5); a section on both halves stays on 6a."""
    moved = {a: resolve(a)[0] for a in OLD_CH6_ANCHORS if resolve(a)[0] != "book/06-gang-deadlock"}
    assert moved == {a: "book/06-native-gang-and-failures" for a in (
        "native-gang-real", "native-gang-scheduling-for-real", "k8s-native-gang",
        "kubernetes-own-gang-scheduling-v1-35-to-v1-37", "gang-failures", "when-a-running-gang-loses-a-pod",
        "stuck-pending-k8s", "a-gang-stuck-pending-what-to-check")} | {"ex-ch6-easy": "book/05-slurm"}
    assert resolve("exercises") == ("book/06-gang-deadlock", "exercises")
    html = course_build.redirect_page(OLD_CH6, "book/06-gang-deadlock", {"constructor": "book/05-slurm"})
    assert follow(html, "#toString") == "06-gang-deadlock.html#toString"   # no inherited property is a target


def test_the_built_site_sends_old_chapter_6_anchors_to_their_pages():
    site = Path(os.environ.get("COURSE_SITE_HTML", ROOT / "_build" / "html"))
    if not (site / "index.html").is_file():
        pytest.skip(f"no built site at {site} (run make book)")
    html = (site / f"{OLD_CH6}.html").read_text()
    for anchor in OLD_CH6_ANCHORS:
        page, new_anchor = resolve(anchor)
        assert follow(html, f"#{anchor}") == f"{Path(page).name}.html#{new_anchor}"
        assert f'id="{new_anchor}"' in (site / f"{page}.html").read_text(), (anchor, page)
