"""The chapters' self-checks and "at a glance" boxes (loaded by ``course_build``).

``{self-check} ID`` writes a question that courselib answered when the page was built
(:mod:`courselib.static.selfchecks`): its choices or a number box, a Check button that
``static/course-checks.js`` answers in the browser (no kernel), and the answer with its reason in a
``<details>`` that opens without JavaScript. ``{chapter-glance}`` writes the chapter's time and what to
read first, from :mod:`courselib.course`, the table the intro page's learning path is drawn from.
"""
from __future__ import annotations

import html
import re

from docutils import nodes
from docutils.parsers.rst import Directive


def _inline(text: str) -> str:
    """Escape ``text`` and turn `code` spans into <code>."""
    parts = re.split(r"(`[^`]+`)", text)
    return "".join(f"<code>{html.escape(p[1:-1])}</code>" if p.startswith("`") and p.endswith("`")
                   else html.escape(p) for p in parts)


def _blocks(text: str) -> str:
    """Paragraphs separated by blank lines; a paragraph of several lines is shown as code (a Dockerfile)."""
    out = []
    for chunk in text.split("\n\n"):
        if "\n" in chunk.strip():
            out.append(f"<pre class=\"course-check__code\">{html.escape(chunk.strip())}</pre>")
        else:
            out.append(f"<p>{_inline(chunk.strip())}</p>")
    return "".join(out)


def self_check_html(check) -> str:
    """The HTML of one self-check (also used by tests/test_book.py)."""
    cid = html.escape(check.id)
    if check.kind == "choice":
        body = "".join(
            f'<label class="course-check__choice"><input type="radio" name="{cid}" value="{i}"> {_inline(c)}</label>'
            for i, c in enumerate(check.choices))
        answer_attr = f'data-answer="{int(check.answer)}"'
    else:
        unit = f' <span class="course-check__unit">{html.escape(check.unit)}</span>' if check.unit else ""
        body = (f'<label class="course-check__number">your answer <input type="text" inputmode="decimal" '
                f'name="{cid}" autocomplete="off" aria-label="your answer">{unit}</label>')
        answer_attr = f'data-answer="{check.answer!r}" data-tolerance="{check.tolerance!r}"'
    return (f'<div class="course-check" id="check-{cid}" data-check="{cid}" data-kind="{check.kind}" {answer_attr}>'
            f'<div class="course-check__question"><strong>Self-check.</strong> {_blocks(check.question)}</div>'
            f'<fieldset class="course-check__answers"><legend class="course-check__legend">Your answer</legend>'
            f'{body}</fieldset>'
            f'<button type="button" class="course-check__button">Check</button> '
            f'<span class="course-check__feedback" role="status" aria-live="polite"></span>'
            f'<details class="course-check__reveal"><summary>Show the answer</summary>'
            f'<p><strong>{_inline(check.answer_text)}.</strong> {_inline(check.why)}</p>'
            f'<p class="course-check__note">Computed by courselib when this page was built.</p></details></div>')


class SelfCheckDirective(Directive):
    required_arguments = 1
    has_content = False

    def run(self):
        from courselib.static import selfchecks

        try:
            check = selfchecks.get(self.arguments[0])
        except KeyError as err:
            raise self.error(str(err))
        env = self.state.document.settings.env
        chapter = env.docname.split("/")[-1][:2]
        if check.chapter != chapter:
            raise self.error(f"self-check {check.id!r} belongs to chapter {check.chapter}, not to {env.docname}")
        return [nodes.raw("", self_check_html(check), format="html")]


def glance_html(doc: str) -> str:
    from courselib import course

    c = course.chapter(doc)
    titles = {ch.doc: ch for ch in course.CHAPTERS}
    depth = "../" * doc.count("/")
    needs = ", ".join(f'<a href="{depth}{n}.html">chapter {int(titles[n].number)}</a>' for n in c.needs) \
        or "nothing before it but the <a href=\"" + depth + "book/intro.html#before-you-start\">prerequisites</a>"
    labs = "; ".join(f'<a href="{depth}{lab.doc}.html">lab {lab.doc.split("/")[-1][:2]}</a> '
                     f'({lab.minutes} min)' for lab in course.labs_for(c.doc))
    practice = ", ".join(f"<code>courselib problem {t}</code>" for t in c.practice)
    return (f'<div class="course-glance admonition note"><p class="admonition-title">At a glance</p>'
            f'<p><strong>Time:</strong> about {c.read_min} min to read and run, {c.exercises_min} min for the '
            f'exercises and the practice problem. <strong>Read first:</strong> {needs}.'
            + (f" <strong>Lab:</strong> {labs}." if labs else "")
            + f' <strong>Endless practice:</strong> {practice}.</p></div>')


class ChapterGlanceDirective(Directive):
    required_arguments = 0
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        try:
            return [nodes.raw("", glance_html(env.docname), format="html")]
        except KeyError as err:
            raise self.error(str(err))


def setup(app):
    app.add_directive("self-check", SelfCheckDirective)
    app.add_directive("chapter-glance", ChapterGlanceDirective)
    app.add_js_file("course-checks.js", defer="defer")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
