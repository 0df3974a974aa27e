"""``courselib labs build``: write each student lab ``labs/NAME.ipynb`` from ``solutions/NAME.ipynb``.

What the build does to a solution notebook (and nothing else):

- every answer region becomes its stub (:func:`courselib.grading.markers.stub_source`);
- cells tagged ``solution`` are dropped;
- outputs and execution counts are cleared, cell metadata is reduced to ``tags`` and ``course``;
- answer and check cells are stamped with a checksum of their source, and the notebook with its
  questions, points and cell count, so that the build can tell an untouched lab from one a student
  has worked in (the grader trusts none of it: it reads questions, points and checks from the
  instructor's source);
- cells tagged ``hidden`` (an instructor's extra checks) are dropped; a written answer's text becomes
  ``YOUR ANSWER HERE``, with nbgrader's metadata for a manually graded answer;
- a citation in a Markdown cell (``{cite}`key```, MyST, which Jupyter shows as raw text) becomes what the
  website prints, the author-year label linked to the source (:mod:`courselib.io.bibtex`, from
  ``book/references.bib``); the cell keeps its MyST in ``course.myst``, which the website renders
  (``book/_ext/course_build.py``), so the site's citations stay real ones. Any other MyST role or
  directive in a Markdown cell stops the build: a notebook cannot show it;
- ``labs/manifest.json`` gets every lab's questions, points and check code (the student edition of
  :mod:`courselib.grading.manifest`), so a repository without ``solutions/`` is graded against it.

The output is a pure function of the solution file (cell ids are kept, JSON keys sorted), so a
rebuild is byte-identical and ``--check`` can compare bytes. A lab a student has worked in (an
answer cell that is not its stub, or cells added or removed) is never overwritten without ``force``.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, replace
from pathlib import Path

from courselib.errors import InputError
from courselib.grading import markers, variant
from courselib.io import bibtex
from courselib.grading.files import atomic_write
from courselib.grading.manifest import MANIFEST, Manifest, write_all
from courselib.grading.notebook import KERNELSPEC, read_notebook, render

WRITTEN, UNCHANGED, REFUSED, STALE, ORPHAN = "written", "unchanged", "refused", "out of date", "orphan"


@dataclass(frozen=True)
class Question:
    name: str
    points: int
    answers: tuple[str, ...]  # the answer variables its answer cells stub
    manual: bool = False      # a written answer, graded by hand
    uses: tuple[str, ...] = ()  # earlier questions' answers its check also reads (the capstone's config)


def _where(source: str, index: int) -> str:
    return f"{source} cell {index}"


def _question_name(meta: dict, where: str) -> str:
    q = meta.get("question")
    if not isinstance(q, str) or not q or not q.isidentifier():
        raise InputError(f"question {q!r} is not a name such as 'q1'", file=where, field="course.question")
    return q


def _points(meta: dict, where: str) -> int:
    pts = meta.get("points")
    if isinstance(pts, bool) or not isinstance(pts, int) or pts <= 0:
        raise InputError(f"points {pts!r} is not a whole number > 0", file=where, field="course.points")
    return pts


def _variant_cells(solution, source: str) -> tuple[tuple[str, str] | None, str | None]:
    """The ``parameters`` cell (id, source) and the ``variant`` cell's source, if the lab has them."""
    params, var = [], []
    for index, cell in enumerate(solution.cells, start=1):
        tags = markers.tags(cell)
        if variant.PARAMETERS_TAG in tags:
            params.append((index, cell))
        if variant.VARIANT_TAG in tags:
            var.append((index, cell))
    for found, tag in ((params, variant.PARAMETERS_TAG), (var, variant.VARIANT_TAG)):
        if len(found) > 1:
            raise InputError(f"{len(found)} cells tagged {tag!r}; a lab has at most one",
                             file=_where(source, found[1][0]))
        for index, cell in found:
            if cell.get("cell_type") != "code":
                raise InputError(f"the cell tagged {tag!r} must be a code cell", file=_where(source, index))
    if var and not params:
        raise InputError("a variant cell but no cell tagged 'parameters' for it to fill",
                         file=_where(source, var[0][0]), hint="tag the given cell that assigns the lab's numbers")
    p = (params[0][1].get("id") or f"cell-{params[0][0]}", params[0][1].get("source", "")) if params else None
    return p, (var[0][1].get("source", "") if var else None)


#: a MyST role (``{cite}`key```), not inside inline code; a MyST directive or target at a line's start
ROLE = re.compile(r"(?<!`)\{([A-Za-z][\w:.+-]*)\}`([^`\n]*)`")
DIRECTIVE = re.compile(r"^[ \t]*(?:(?:`{3,}|:{3,})\{[\w:.+-]+\}|\([\w.:-]+\)=[ \t]*$)", re.M)
#: the citation roles a student lab may use, as sphinxcontrib-bibtex's author-year style reads them
CITE_ROLES = ("cite", "cite:p", "cite:t")


def readable(markdown: str, sources: dict[str, bibtex.Source], where: str) -> str:
    """``markdown`` as a notebook should show it: every ``{cite}`a,b``` as "([A, 2020](url); [B, 2021](url))"
    (``{cite:t}``: "[A (2020)](url)"); any other MyST role or directive is an error."""
    directive = DIRECTIVE.search(markdown)
    if directive:
        raise InputError(f"a MyST directive or target in a Markdown cell ({directive.group(0).strip()!r}): "
                         "Jupyter shows it as raw text", file=where, hint="write it as plain Markdown")

    def cite(m: re.Match) -> str:
        role, keys = m.group(1), [k.strip() for k in m.group(2).split(",") if k.strip()]
        if role not in CITE_ROLES:
            raise InputError(f"a MyST role {{{role}}} in a Markdown cell: Jupyter shows it as raw text", file=where,
                             hint=f"write it as plain Markdown (a lab may cite: {', '.join(CITE_ROLES)})")
        missing = [k for k in keys if k not in sources]
        if missing or not keys:
            raise InputError(f"{{{role}}}`{m.group(2)}` cites {', '.join(missing) or 'nothing'}, not in the "
                             "course bibliography (book/references.bib)", file=where)
        if role == "cite:t":
            return "; ".join(sources[k].markdown(textual=True) for k in keys)
        return "(" + "; ".join(sources[k].markdown() for k in keys) + ")"

    return ROLE.sub(cite, markdown)


def bibliography_for(source) -> dict[str, bibtex.Source]:
    """The course bibliography beside a solution notebook (``../book/references.bib``); none there: empty."""
    path = bibtex.beside(source)
    return bibtex.read(path) if path.is_file() else {}


def compile_lab(solution, source: str = "solution", seed: int = 0, *,
                sources: dict[str, bibtex.Source] | None = None):
    """The student lab, its questions, and the grader's manifest for one parsed solution (pure).

    The manifest (:mod:`courselib.grading.manifest`) lists every code cell with its role — ``given``
    (the lab's own code), ``answer`` (its stub), ``check``, ``hidden`` (instructor only), ``demo`` — and
    every written answer, in order, with the instructor's source: it is what the grader trusts.
    ``seed`` (:mod:`courselib.grading.variant`) gives a student's variant of the lab; the manifest is
    always seed 0's (the grader rewrites its parameters cell for the seed it grades). ``sources`` (the
    bibliography, :func:`bibliography_for`) makes its citations readable (:func:`readable`); without it
    the Markdown is kept as it is (the grader reads only the manifest).
    """
    params, variant_src = _variant_cells(solution, source)
    values = (variant.values_for(params[1], variant_src, seed, source) if params else {})
    cells = []
    plan: list[dict] = []            # the manifest's cells
    questions: dict[str, Question] = {}
    pending: list = []               # answer cells waiting for their check cell
    pending_names: list[str] = []
    seen_names: dict[str, str] = {}
    rubrics: dict[str, str] = {}
    for index, cell in enumerate(solution.cells, start=1):
        where = _where(source, index)
        meta = markers.course_meta(cell)
        tags = markers.tags(cell)
        if markers.SOLUTION_TAG in tags or variant.VARIANT_TAG in tags:
            continue
        src = cell.get("source", "")
        cid = cell.get("id") or f"cell-{index}"
        if cell.cell_type != "code" and variant.has_placeholders(src):
            src = variant.fill(src, values, where)
        if markers.HIDDEN_TAG in tags:
            if cell.cell_type != "code":
                raise InputError("a hidden check must be a code cell", file=where)
            q = _question_name(meta, where)
            if q not in questions or questions[q].manual:
                raise InputError(f"hidden check for {q}, which has no check cell before it", file=where,
                                 field="course.question", hint="put it after the question's check cell")
            plan.append({"id": cid, "role": "hidden", "question": q, "source": src})
            continue
        if cell.cell_type != "code":
            if meta.get("manual"):
                q, pts = _question_name(meta, where), _points(meta, where)
                if q in questions:
                    raise InputError(f"a second cell for question {q}", file=where, field="course.question")
                questions[q] = Question(q, pts, (), manual=True)
                rubrics[q] = markers.rubric(src)[1]
                new = _cell("markdown", markers.WRITTEN_STUB)
                new["metadata"] = {"course": {"manual": True, "points": pts, "question": q,
                                           "stub": markers.checksum(markers.WRITTEN_STUB)},
                                "nbgrader": {"grade": True, "grade_id": q, "locked": False, "points": pts,
                                             "schema_version": 3, "solution": True, "task": False}}
                if tags:
                    new["metadata"]["tags"] = tags
                plan.append({"id": cid, "role": "written", "question": q, "source": markers.WRITTEN_STUB})
            else:
                if markers.has_markers(src):
                    raise InputError("solution markers in a Markdown cell", file=where,
                                     hint="tag the cell 'solution' to keep it out of the lab")
                if markers.BEGIN_RUBRIC in src:
                    raise InputError("a mark scheme outside a written answer cell", file=where,
                                     hint="put it in the cell with {\"course\": {\"manual\": true, ...}}")
                shown = readable(src, sources, where) if sources is not None and cell.cell_type == "markdown" else src
                new = _cell("markdown" if cell.cell_type == "markdown" else "raw", shown)
                new["metadata"] = _kept_metadata(cell)
                if shown != src:
                    new["metadata"]["course"] = {**new["metadata"].get("course", {}), "myst": src}
        elif markers.is_check(cell):
            if markers.has_markers(src):
                raise InputError("solution markers in a check cell", file=where,
                                 hint="a check cell is kept whole in the lab; put the answer in a cell before it")
            q, pts = _question_name(meta, where), _points(meta, where)
            if q in questions:
                raise InputError(f"a second check cell for question {q}", file=where, field="course.question",
                                 hint="one check cell per question: give this one its own name")
            if not pending:
                raise InputError(f"check cell for {q} has no answer cell (with {markers.BEGIN}) before it",
                                 file=where)
            for cell_, _, step in pending:
                cell_["metadata"]["course"]["question"] = q
                step["question"] = q
            uses = meta.get("uses", [])
            if not isinstance(uses, list) or not all(isinstance(u, str) for u in uses):
                raise InputError(f"uses {uses!r} is not a list of answer names", file=where, field="course.uses")
            for u in uses:
                if u not in seen_names or u in pending_names:
                    raise InputError(f"the check for {q} uses `{u}`, which is not an answer of an earlier question",
                                     file=where, field="course.uses",
                                     hint="list only answer names of questions before this one")
            questions[q] = Question(q, pts, tuple(pending_names), uses=tuple(uses))
            pending, pending_names = [], []
            new = _cell("code", src)
            new["metadata"] = {"course": {"check": markers.checksum(src), "points": pts, "question": q,
                                          **({"uses": list(uses)} if uses else {})},
                            "tags": sorted(set(tags) | {markers.CHECK_TAG})}
            plan.append({"id": cid, "role": "check", "question": q, "source": src})
        elif markers.has_markers(src):
            stub, names = markers.stub_source(src, where)
            for name in names:
                if name in seen_names:
                    raise InputError(f"answer variable `{name}` is also an answer in {seen_names[name]}",
                                     file=where, hint="each question needs its own answer names, "
                                     "or one wrong answer would cost two questions")
                seen_names[name] = where
            new = _cell("code", stub)
            new["metadata"] = _kept_metadata(cell)
            new["metadata"]["course"] = {"answer": True, "question": None, "stub": markers.checksum(stub)}
            step = {"id": cid, "role": "answer", "question": None, "source": stub}
            plan.append(step)
            pending.append((new, where, step))
            pending_names.extend(names)
        else:
            shown = src
            if variant.PARAMETERS_TAG in tags and seed:
                shown = variant.parameters_for(src, variant_src, seed, where)
            new = _cell("code", shown)
            new["metadata"] = _kept_metadata(cell)
            plan.append({"id": cid, "role": "demo" if markers.DEMO_TAG in tags else "given", "source": src})
        new["id"] = cid
        cells.append(new)
    if pending:
        raise InputError("an answer region with no check cell after it", file=pending[0][1],
                         hint="add a check cell with metadata {\"course\": {\"question\": ..., \"points\": ...}}")
    if not any(not q.manual for q in questions.values()):
        raise InputError("no check cell: a lab needs at least one graded question", file=source,
                         hint="tag a cell 'check' and give it {\"course\": {\"question\": \"q1\", \"points\": 1}}")
    name = Path(source).stem
    auto = {q.name: q.points for q in questions.values() if not q.manual}
    manual = {q.name: q.points for q in questions.values() if q.manual}
    lab = {"cells": cells, "nbformat": 4, "nbformat_minor": 5, "metadata": {
        "kernelspec": dict(solution.metadata.get("kernelspec") or KERNELSPEC),
        "language_info": {"name": "python"},
        "course": {"cells": len(cells), "lab": name, "points": sum(auto.values()),
                   "questions": auto, "source": f"solutions/{Path(source).name}",
                   **({"manual": manual} if manual else {}), **({"seed": seed} if seed else {})},
    }}
    manifest = Manifest.from_plan(name, f"solutions/{Path(source).name}", list(questions.values()), plan, rubrics)
    if params:
        manifest = replace(manifest, parameters=params[0], variant=variant_src or "")
    return lab, list(questions.values()), manifest


def _cell(kind: str, source: str) -> dict:
    cell = {"cell_type": kind, "metadata": {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def build_lab(solution, source: str = "solution"):
    """The student lab for one parsed solution notebook, and its questions (pure; no I/O)."""
    import nbformat

    lab, questions, _ = compile_lab(solution, source, sources=bibliography_for(source))
    lab = nbformat.from_dict(lab)
    nbformat.validate(lab)
    return lab, questions


def _kept_metadata(cell) -> dict:
    out = {}
    if markers.tags(cell):
        out["tags"] = markers.tags(cell)
    if markers.course_meta(cell):
        out["course"] = dict(markers.course_meta(cell))
    return out


def student_work(path: Path) -> str | None:
    """Why the existing lab at ``path`` holds a student's work, or None if it is untouched."""
    try:
        nb = read_notebook(path, "lab")
    except InputError:
        return "it is not a readable notebook"
    meta = nb.metadata.get("course", {})
    if not isinstance(meta, dict) or "cells" not in meta:
        return "it was not written by `courselib labs build`"
    edited = [markers.course_meta(c).get("question") or f"cell {i}"
              for i, c in enumerate(nb.cells, start=1)
              if markers.course_meta(c).get("answer")
              and markers.checksum(c.get("source", "")) != markers.course_meta(c).get("stub")]
    if edited:
        return "answers edited: " + ", ".join(str(e) for e in edited)
    if len(nb.cells) != meta["cells"]:
        return f"it has {len(nb.cells)} cells where the build wrote {meta['cells']}"
    return None


@dataclass(frozen=True)
class Outcome:
    path: Path
    status: str
    detail: str = ""


def build_all(solutions_dir: Path, labs_dir: Path, *, check: bool = False, force: bool = False) -> list[Outcome]:
    """Build (or, with ``check``, only compare) every lab. Errors in a solution stop the build."""
    solutions_dir, labs_dir = Path(solutions_dir), Path(labs_dir)
    if not solutions_dir.is_dir():
        raise InputError("no such directory", file=str(solutions_dir),
                         hint="run from the course repository's root, or pass --solutions DIR")
    notebooks = sorted(solutions_dir.glob("*.ipynb"))
    if not notebooks:
        raise InputError("no solution notebooks (*.ipynb) here", file=str(solutions_dir))
    import nbformat

    planned, manifests = [], []
    sources = bibliography_for(solutions_dir / "any.ipynb")
    for src in notebooks:
        lab, _, manifest = compile_lab(read_notebook(src, "solution"), str(src), sources=sources)
        lab = nbformat.from_dict(lab)
        nbformat.validate(lab)
        planned.append((labs_dir / src.name, render(lab)))
        manifests.append(manifest)
    planned.append((labs_dir / MANIFEST, write_all(manifests)))
    out: list[Outcome] = []
    for dest, text in planned:
        current = dest.read_text(encoding="utf-8") if dest.is_file() else None
        if current == text:
            out.append(Outcome(dest, UNCHANGED))
        elif check:
            out.append(Outcome(dest, STALE, "missing" if current is None else "differs from its solution"))
        else:
            why = None if current is None or force or dest.suffix != ".ipynb" else student_work(dest)
            if why:
                out.append(Outcome(dest, REFUSED, why))
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dest, text)
            out.append(Outcome(dest, WRITTEN))
    known = {dest.name for dest, _ in planned}
    if labs_dir.is_dir():
        for extra in sorted(labs_dir.glob("*.ipynb")):
            if extra.name not in known:
                out.append(Outcome(extra, ORPHAN, f"no {solutions_dir / extra.name}"))
    return out


def variant_text(solution, source: str, seed: int, *, solved: bool = False) -> tuple[str, bool]:
    """Seed ``seed``'s student lab (or, ``solved``, its solution) as notebook text; and whether the lab has variants."""

    import nbformat

    params, variant_src = _variant_cells(solution, source)
    if not solved:
        lab, _, _ = compile_lab(solution, source, seed=seed, sources=bibliography_for(source))
        lab = nbformat.from_dict(lab)
        nbformat.validate(lab)
        return render(lab), variant_src is not None
    nb = copy.deepcopy(solution)
    values = variant.values_for(params[1], variant_src, seed, source) if params else {}
    for index, cell in enumerate(nb.cells, start=1):
        where = _where(source, index)
        if variant.PARAMETERS_TAG in markers.tags(cell) and seed:
            cell["source"] = variant.parameters_for(cell.get("source", ""), variant_src, seed, where)
        elif cell.get("cell_type") != "code" and variant.has_placeholders(cell.get("source", "")):
            cell["source"] = variant.fill(cell.get("source", ""), values, where)
    course = dict(nb.metadata.get("course", {}) or {})
    if seed:
        course["seed"] = seed
    else:
        course.pop("seed", None)
    if course:
        nb.metadata["course"] = course
    return render(nb), variant_src is not None


def write_private(path: Path, text: str) -> None:
    """Write a generated notebook (atomically, never through a symlink)."""
    atomic_write(path, text, field="-o")
