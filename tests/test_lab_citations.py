"""A student lab shows readable citations in Jupyter; the website's lab pages still cite (issue 32).

The labs are written in MyST (``solutions/``) and cite as the chapters do, ``{cite}`young-1974```. Jupyter
shows a MyST role as raw text, so ``courselib labs build`` writes each citation of a student lab as the
website prints it, the author-year label linked to the source ("([NVIDIA, 2025b](https://...))"), or with
where it was published when the entry has no address, from ``book/references.bib``
(:mod:`courselib.io.bibtex`), and keeps the cell's MyST in its ``course.myst``; the website puts that back
when it reads the page (``book/_ext/course_build.py``), so its lab pages cite with sphinxcontrib-bibtex.

Before: five raw ``{cite}`` roles in the student labs (four in Lab 7, one in Lab 6);
:func:`test_no_student_lab_cell_shows_a_myst_role` failed on them.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from courselib.errors import InputError
from courselib.grading import build
from courselib.io import bibtex

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_build  # noqa: E402

nbformat = pytest.importorskip("nbformat")
LABS = sorted((ROOT / "labs").glob("*.ipynb"))
BIB = ROOT / "book" / "references.bib"
#: a MyST role, directive or target as Jupyter would show it: raw
MYST = re.compile(r"(?<!`)\{[A-Za-z][\w:.+-]*\}`|^[ \t]*(?:`{3,}|:{3,})\{|^[ \t]*\([\w.:-]+\)=[ \t]*$", re.M)
CITE = re.compile(r"\{cite(?::[pt])?\}`([^`]+)`")


def myst_left(path: Path) -> list[tuple[int, str]]:
    """(cell, text) of every MyST role, directive or target in a notebook's Markdown cells."""
    return [(i, m.group(0)) for i, cell in enumerate(json.loads(path.read_text())["cells"])
            if cell["cell_type"] == "markdown" for m in MYST.finditer("".join(cell["source"]))]


def cited(cells) -> list[str]:
    return [k.strip() for c in cells if c["cell_type"] == "markdown"
            for group in CITE.findall("".join(c["source"])) for k in group.split(",")]


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.stem)
def test_no_student_lab_cell_shows_a_myst_role(path):
    assert not myst_left(path), f"{path.name}: raw MyST in a Markdown cell: {myst_left(path)}"


def test_every_citation_of_a_solution_reads_in_the_student_lab_and_the_site_cites_it():
    """Each solution's citations are in its student lab as linked author-year text, and the page the
    website reads from the lab (course_build.site_notebook) cites the same keys, in the same places."""
    sources = bibtex.read(BIB)
    total = 0
    for lab in LABS:
        solution = ROOT / "solutions" / lab.name
        if not solution.is_file():
            pytest.skip("no solutions/ here (the student template)")
        keys = cited(json.loads(solution.read_text())["cells"])
        text = lab.read_text()
        site = json.loads(course_build.site_notebook(text))
        assert cited(site["cells"]) == keys, lab.name
        for key in keys:
            assert sources[key].markdown() in text, (lab.name, key)
        shown = [c for c in json.loads(text)["cells"] if "myst" in c["metadata"].get("course", {})]
        assert all(c["metadata"]["course"]["myst"] != "".join(c["source"]) for c in shown)
        total += len(keys)
    assert total >= 5


def test_the_site_reads_a_notebook_without_myst_unchanged():
    text = (ROOT / "labs" / "08-gang-cost.ipynb").read_text()
    assert course_build.site_notebook(text) == text
    assert course_build.site_notebook("# a page\n\nsays \"myst\"") == "# a page\n\nsays \"myst\""


def test_the_bibliography_reads_as_pybtex_reads_it():
    """A second reader: every entry's author-year label is pybtex's (what sphinxcontrib-bibtex prints)."""
    from pybtex.database import parse_file

    db, mine = parse_file(str(BIB)), bibtex.read(BIB)
    assert set(db.entries) == set(mine) and len(mine) > 100

    def label(entry) -> str:
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        last = [" ".join(p.last_names).replace("{", "").replace("}", "").replace("\\_", "_") for p in people]
        who = last[0] + " et al." if len(last) >= 3 else " and ".join(last)
        return f"{who}, {entry.fields['year']}"

    assert {k: label(e) for k, e in db.entries.items()} == {k: s.label for k, s in mine.items()}
    for key, entry in db.entries.items():
        if "url" in entry.fields or "\\url{" in entry.fields.get("howpublished", ""):
            assert mine[key].link and mine[key].link.startswith("http"), key
    young = mine["young-1974"]
    assert (young.label, young.link) == ("Young, 1974", None)
    assert young.markdown() == "Young, 1974, Communications of the ACM 17(9), 530–531"
    assert mine["nccl-env"].markdown() == \
        "[NVIDIA, 2025b](https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html)"


def test_the_build_writes_each_citation_role_and_refuses_what_a_notebook_cannot_show():
    sources = bibtex.parse("@misc{a-1,\n  author = {{ACME}},\n  howpublished = {\\url{https://a.example/x}},\n"
                           "  year = {2020}\n}\n@article{b-2,\n  author = {Bee, Ann and Cee, Bo},\n"
                           "  journal = {J},\n  volume = {3},\n  pages = {1--2},\n  year = 1999\n}\n")
    assert build.readable("As shown {cite}`a-1,b-2`.", sources, "x") == \
        "As shown ([ACME, 2020](https://a.example/x); Bee and Cee, 1999, J 3, 1–2)."
    assert build.readable("{cite:t}`b-2` showed it; {cite:p}`a-1`", sources, "x") == \
        "Bee and Cee (1999), J 3, 1–2 showed it; ([ACME, 2020](https://a.example/x))"
    assert build.readable("code `{cite}` and `{}` stay", sources, "x") == "code `{cite}` and `{}` stay"
    for bad, said in (("see {term}`PodGroup`", "MyST role {term}"), ("{cite}`nope`", "nope, not in"),
                      ("```{note}\nx\n```", "MyST directive"), ("(my-label)=\n# T", "MyST directive")):
        with pytest.raises(InputError, match=re.escape(said)):
            build.readable(bad, sources, "solutions/x.ipynb cell 3")


def test_a_tiny_website_of_the_labs_cites_with_the_bibliography(tmp_path):
    """Jupyter Book with the course's extension renders a student lab's citations as links to the
    bibliography page, with no raw role and no notebook text left."""
    from book_exec import jupyter_book

    book = tmp_path / "book"
    (book / "labs").mkdir(parents=True)
    for name in ("06-gang-deadlock", "07-barrier"):
        (book / "labs" / f"{name}.ipynb").write_text((ROOT / "labs" / f"{name}.ipynb").read_text())
    (book / "references.bib").write_text(BIB.read_text())
    (book / "intro.md").write_text("# Labs\n")
    (book / "bibliography.md").write_text("# Bibliography\n\n```{bibliography}\n:all:\n```\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: labs/06-gang-deadlock\n"
                                   "- file: labs/07-barrier\n- file: bibliography\n")
    (book / "_config.yml").write_text(
        "title: tiny\nexecute:\n  execute_notebooks: 'off'\nbibtex_bibfiles:\n  - references.bib\n"
        f"sphinx:\n  extra_extensions:\n    - sphinx_exercise\n  local_extensions:\n    course_build: {ROOT / 'book' / '_ext'}\n"
        "  config:\n    hide_solutions: false\n    bibtex_reference_style: author_year\n"
        "    bibtex_default_style: plain\n")
    done = subprocess.run([*jupyter_book(), "build", str(book), "--path-output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    html = tmp_path / "out" / "_build" / "html" / "labs"
    for name, keys in (("06-gang-deadlock", ["nccl-tests-performance"]),
                       ("07-barrier", ["nccl-env", "pytorch-nccl-env-vars", "torchrun-rendezvous", "young-1974"])):
        page = (html / f"{name}.html").read_text()
        links = re.findall(r'<a class="reference internal" href="\.\./bibliography\.html#id\d+" title="[^"]*">'
                           r'([^<]*)</a>', page)
        sources = bibtex.read(BIB)
        assert links == [sources[k].label for k in keys], (name, links)
        assert "{cite}" not in page and "cite}" not in page, name
        for key in keys:     # and not the notebook's readable form: no link out, no venue after the label
            shown = sources[key]
            assert (f'href="{shown.link}"' if shown.link else shown.markdown()) not in page, (name, key)
