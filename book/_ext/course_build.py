"""Build fixes for the course website (a local Sphinx extension, see _config.yml).

Two upstream problems, each found by a test and fixed here rather than patched in the venv.

sphinx-thebe 0.3.1 under Jupyter Book 1.x registers its inline configuration script twice, so
every page declares ``const THEBE_JS_URL`` twice and the browser reports "Uncaught SyntaxError:
Identifier 'THEBE_JS_URL' has already been declared" (found by tests/test_site.py in headless
Chromium). Dropping exact duplicate script entries per page removes the error and changes nothing else.

pydata-sphinx-theme writes ``localStorage.getItem("mode") || "{{ default_mode }}"`` and, with no
``default_mode`` in the context, a first-time reader's browser logs "Got invalid theme mode: .
Resetting to auto." on every page (found the same way). We give it the mode it falls back to:
``auto`` (follow the reader's system), so nothing changes but the error.

It also loads ``course_views`` (the website's kernel-free cost calculator and gang race) and
``course_checks`` (the chapters' self-checks and "at a glance" boxes), and writes a redirect page for
every page that moved (``course_redirects`` in ``_config.yml``: old page -> new page), so that old
links to a lab keep working after the labs were renumbered to follow the chapters.

A student lab (``labs/*.ipynb``) shows each citation as readable Markdown, "([Young, 1974](...))", since
Jupyter shows a MyST role as raw text; ``courselib labs build`` keeps the cell's MyST source in the cell's
``course.myst``. :func:`site_notebook` puts it back when the page is read, so the website's lab pages cite
with sphinxcontrib-bibtex, as the chapters do (linked to the bibliography page).
"""
from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.errors import ExtensionError

# sphinx-exercise 1.2 drops a gated solution's start node under ``hide_solutions`` but keeps its end
# node and everything between them (code cells included), and the HTML writer then fails on the
# orphan end node. For the student edition a gated solution is cut out of the page *after* it is
# parsed: its start and end directives become our own marks (``course-cut-start``/``-end``), its
# code cells stay in the page's notebook, and :func:`_cut_marked` removes everything from one mark to
# the other from the doctree. The notebook is then the instructor edition's (jupyter-cache keys a page
# on its code cells), so the student edition takes every page's outputs from the same execution cache
# and runs no chapter a second time; its pages show the outputs the instructor edition shows.
_GATED_SOLUTION = re.compile(r"^(?P<fence>`{3,})\{solution-start\}[^\n]*\n(?:(?!(?P=fence)[ \t]*\n)[^\n]*\n)*?"
                             r"(?P=fence)[ \t]*\n(?P<body>.*?)^(?P=fence)\{solution-end\}[^\n]*\n(?P=fence)[ \t]*$\n?",
                             re.DOTALL | re.MULTILINE)


def _mark(match: re.Match) -> str:
    fence = match["fence"]
    return f"{fence}{{course-cut-start}}\n{fence}\n{match['body']}{fence}{{course-cut-end}}\n{fence}\n"


def site_notebook(text: str) -> str:
    """A notebook's JSON with each cell's source replaced by its ``course.myst`` (what the website renders),
    where it has one; any other text is returned as it is."""
    if '"myst"' not in text or not text.lstrip().startswith("{"):
        return text
    nb = json.loads(text)
    changed = False
    for cell in nb.get("cells", []):
        myst = (cell.get("metadata", {}).get("course") or {}).get("myst")
        if isinstance(myst, str):
            cell["source"], changed = myst, True
    return json.dumps(nb, ensure_ascii=False, indent=1) if changed else text


def _site_notebook(app, docname, source):
    if str(app.env.doc2path(docname)).endswith(".ipynb"):
        source[0] = site_notebook(source[0])


def _mark_gated_solutions(app, docname, source):
    if app.config.hide_solutions:
        source[0] = _GATED_SOLUTION.sub(_mark, source[0])


class cut_start(nodes.Element):
    """Where a gated solution began (removed with what follows it, up to its :class:`cut_end`)."""


class cut_end(nodes.Element):
    """Where a gated solution ended."""


class _CutStart(Directive):
    def run(self):
        return [cut_start()]


class _CutEnd(Directive):
    def run(self):
        return [cut_end()]


def _cut_marked(app, doctree):
    """Remove each marked solution — its text, its code cells and their outputs — from the page."""
    docname = app.env.docname
    for start in list(doctree.findall(cut_start)):
        parent = start.parent
        at = parent.index(start)
        end = next((k for k in range(at + 1, len(parent)) if isinstance(parent[k], cut_end)), None)
        if end is None:
            raise ExtensionError(f"{docname}: a gated solution's start and end are not in one section")
        del parent.children[at:end + 1]
    left = next(iter(doctree.findall(cut_end)), None)
    if left is not None:
        raise ExtensionError(f"{docname}: a gated solution's end without its start")


def _skip(self, node):
    raise nodes.SkipNode


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        attrs = getattr(js, "attributes", {}) or {}
        key = (str(getattr(js, "filename", js) or ""), tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key in seen:
            continue
        seen.add(key)
        unique.append(js)
    scripts[:] = unique


def _default_mode(app, config):
    config.html_context.setdefault("default_mode", "auto")


def _relative(old: str, new: str) -> str:
    page, _, anchor = new.partition("#")
    url = os.path.relpath(page + ".html", os.path.dirname(old) or ".").replace(os.sep, "/")
    return url + (f"#{anchor}" if anchor else "")


def anchor_targets(old: str, anchors: dict | None) -> dict:
    """Where each moved section of ``old`` is now: anchor -> URL relative to ``old`` ("page.html#anchor")."""
    out = {}
    for anchor, to in (anchors or {}).items():
        out[anchor] = _relative(old, to if "#" in to else f"{to}#{anchor}")
    return out


def redirect_page(old: str, new: str, anchors: dict | None = None) -> str:
    """The HTML written at ``old``.html that sends the reader (and search engines) to ``new``.html.

    ``anchors``: the old page's sections that are now on another page (anchor -> ``page`` or
    ``page#new-anchor``, as in ``course_redirect_anchors``): a link to one of them goes there."""
    target = _relative(old, new)
    t = html.escape(target, quote=True)
    # a link to a section (#anchor) of the old page goes to the page that holds it now, with its anchor;
    # the meta refresh is the fallback without JavaScript
    moved = json.dumps(anchor_targets(old, anchors), sort_keys=True).replace("</", "<\\/")
    keep_anchor = (f"<script>(function () {{ const moved = {moved}, h = decodeURIComponent(location.hash.slice(1)); "
                   f"location.replace(Object.hasOwn(moved, h) ? moved[h] : {json.dumps(target)} + location.hash); }})()</script>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Moved to {t}</title><link rel=\"canonical\" href=\"{t}\">{keep_anchor}"
            f"<meta http-equiv=\"refresh\" content=\"0; url={t}\"><meta name=\"robots\" content=\"noindex\">"
            f"</head><body><p>This page moved to <a href=\"{t}\">{t}</a>.</p></body></html>\n")


def write_redirects(outdir, redirects: dict, pages=None, anchors: dict | None = None) -> list[Path]:
    """Write one redirect page per moved page into the built site; never over a real page.

    ``pages``: the book's documents in this build. A moved page's HTML left in the output folder
    by a build from before the move is not one of them and is replaced (a reader who built the book
    before pulling the rename would otherwise be refused); without ``pages``, any HTML there that is
    not a redirect counts as a page."""
    written = []
    for old, new in sorted(redirects.items()):
        path = Path(outdir) / (old + ".html")
        if pages is not None:
            real = old in pages
        else:
            real = path.exists() and "This page moved to" not in path.read_text(encoding="utf-8",
                                                                                errors="replace")
        if real:
            raise RuntimeError(f"course_redirects: {old} is a page of the book; it cannot also redirect to {new}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(redirect_page(old, new, (anchors or {}).get(old)), encoding="utf-8")
        written.append(path)
    return written


def _redirects(app, exception):
    if exception is None and app.builder.format == "html":
        anchors = app.config.course_redirect_anchors
        missing = [new for new in app.config.course_redirects.values() if new not in app.env.all_docs]
        missing += [to for moved in anchors.values() for to in moved.values()
                    if to.partition("#")[0] not in app.env.all_docs]
        missing += [old for old in anchors if old not in app.config.course_redirects]
        if missing:
            raise RuntimeError(f"course_redirects: no such page {missing}")
        write_redirects(app.outdir, app.config.course_redirects, pages=set(app.env.all_docs), anchors=anchors)


def setup(app):
    app.add_config_value("course_redirects", {}, "html")
    app.add_config_value("course_redirect_anchors", {}, "html")
    app.connect("build-finished", _redirects)
    app.setup_extension("course_views")
    app.setup_extension("course_checks")
    app.connect("config-inited", _default_mode)
    app.connect("source-read", _site_notebook)
    app.connect("source-read", _mark_gated_solutions)
    app.add_node(cut_start, html=(_skip, None), latex=(_skip, None), text=(_skip, None))
    app.add_node(cut_end, html=(_skip, None), latex=(_skip, None), text=(_skip, None))
    app.add_directive("course-cut-start", _CutStart)
    app.add_directive("course-cut-end", _CutEnd)
    app.connect("doctree-read", _cut_marked)
    app.connect("html-page-context", _dedupe_scripts, priority=1000)  # after every other handler
    return {"parallel_read_safe": True, "parallel_write_safe": True}
