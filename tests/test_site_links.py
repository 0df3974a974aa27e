"""External links: every URL the bibliography and the pages cite still answers.

Network-dependent by nature, so it never decides a build: it runs only when asked
(``COURSE_LINKCHECK=1``; the publish workflow does, in a job allowed to fail) and skips with the
reason when the outside world is not reachable. Internal references are checked on every build by
``-W -n`` (tests/test_site.py), and internal links and anchors by the browser crawl.
"""
from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
URL = re.compile(r"https?://[^\s{}<>\"'`)\]\\]+")
# Sites that refuse scripted requests (403/429) prove nothing either way: reported, not failed.
INCONCLUSIVE = {401, 403, 405, 429, 999}


def external_urls() -> list[str]:
    """URLs cited in book/references.bib and linked from the book's and playgrounds' prose."""
    found = set(URL.findall((ROOT / "book" / "references.bib").read_text()))
    for path in [*(ROOT / "book").glob("*.md"), *(ROOT / "notebooks").glob("*.ipynb")]:
        for m in re.finditer(r"\]\((https?://[^)\s]+)\)", path.read_text()):
            found.add(m.group(1))
    return sorted(u.rstrip(".,;") for u in found if not u.startswith(("http://127.0.0.1", "http://localhost")))


def test_the_bibliography_cites_urls():
    urls = external_urls()
    assert len(urls) >= 20 and all(u.startswith(("https://", "http://")) for u in urls)


def _status(url: str) -> tuple[str, int | str]:
    headers = {"User-Agent": "all-or-nothing-linkcheck/1 (course website)"}
    for method in ("HEAD", "GET"):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers), timeout=20) as r:
                return url, r.status
        except urllib.error.HTTPError as err:
            if method == "HEAD" and err.code in (403, 404, 405, 501):
                continue  # some servers answer HEAD wrongly; ask again with GET
            return url, err.code
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            return url, f"unreachable ({getattr(err, 'reason', err)})"
    return url, "no answer"


@pytest.mark.slow
def test_external_links_answer():
    if os.environ.get("COURSE_LINKCHECK") != "1":
        pytest.skip("external link check is network-dependent: run with COURSE_LINKCHECK=1 "
                    "(the publish workflow does, in a job that may fail without stopping the site)")
    _, probe = _status("https://www.python.org/")
    if not isinstance(probe, int):
        pytest.skip(f"offline: https://www.python.org/ is {probe}")
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(pool.map(_status, external_urls()))
    dead = {u: s for u, s in results.items() if not (isinstance(s, int) and (s < 400 or s in INCONCLUSIVE))}
    assert not dead, "dead external links:\n" + "\n".join(f"{s}  {u}" for u, s in sorted(dead.items()))
