"""``courselib labs build``: write each student lab ``labs/NAME.ipynb`` from ``solutions/NAME.ipynb``.

What the build does to a solution notebook (and nothing else):

- every answer region becomes its stub (:func:`courselib.grading.markers.stub_source`);
- cells tagged ``solution`` are dropped;
- outputs and execution counts are cleared, cell metadata is reduced to ``tags`` and ``course``;
- answer and check cells are stamped with a checksum of their source, and the notebook with its
  questions, points and cell count, so that the grader knows the maximum and the build can tell an
  untouched lab from one a student has worked in.

The output is a pure function of the solution file (cell ids are kept, JSON keys sorted), so a
rebuild is byte-identical and ``--check`` can compare bytes. A lab a student has worked in (an
answer cell that is not its stub, or cells added or removed) is never overwritten without ``force``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from courselib.errors import InputError
from courselib.grading import markers

KERNELSPEC = {"display_name": "Python 3 (courselib)", "language": "python", "name": "python3"}

WRITTEN, UNCHANGED, REFUSED, STALE, ORPHAN = "written", "unchanged", "refused", "out of date", "orphan"


def read_notebook(path: Path, what: str = "notebook"):
    """Parse ``path`` as a v4 notebook; anything unreadable is one located ``InputError``."""
    import json

    import nbformat

    from courselib.io.policy import read_text

    try:
        text = read_text(path, "notebook")  # regular files only, size-capped (courselib.io.policy)
    except InputError as err:
        if err.message == "no such file":
            raise InputError(f"no such {what}", file=str(path), hint="check the path") from None
        raise
    try:
        raw = json.loads(text)
    except RecursionError:
        raise InputError("not a notebook (JSON nested too deeply to read)", file=str(path),
                         hint="give the lab's .ipynb file") from None
    except json.JSONDecodeError as err:
        raise InputError(f"not a notebook (invalid JSON: {err.msg}, column {err.colno})", file=str(path),
                         line=err.lineno, hint="open it in Jupyter and save it again, or restore it with git") from None
    if not isinstance(raw, dict) or "cells" not in raw or raw.get("nbformat") != 4:
        raise InputError("not a Jupyter notebook in format 4 (no 'cells', or 'nbformat' is not 4)",
                         file=str(path), hint="give the lab's .ipynb file")
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as err:  # nbformat raises several kinds for a damaged file
        raise InputError(f"not a readable notebook: {err.__class__.__name__}: {str(err).splitlines()[0]}",
                         file=str(path)) from None
    return nb


def render(nb) -> str:
    """The notebook as text: nbformat's sorted, one-space-indented JSON and a final newline."""
    import nbformat

    text = nbformat.writes(nb, version=4)
    return text if text.endswith("\n") else text + "\n"


@dataclass(frozen=True)
class Question:
    name: str
    points: int
    answers: tuple[str, ...]  # the answer variables its answer cells stub


def _where(source: str, index: int) -> str:
    return f"{source} cell {index}"


def build_lab(solution, source: str = "solution"):
    """The student lab for one parsed solution notebook, and its questions (pure; no I/O)."""
    import nbformat

    cells = []
    questions: dict[str, Question] = {}
    pending: list = []           # answer cells waiting for their check cell
    pending_names: list[str] = []
    seen_names: dict[str, str] = {}
    for index, cell in enumerate(solution.cells, start=1):
        where = _where(source, index)
        meta = markers.course_meta(cell)
        if markers.SOLUTION_TAG in markers.tags(cell):
            continue
        src = cell.get("source", "")
        if cell.cell_type != "code":
            if markers.has_markers(src):
                raise InputError("solution markers in a Markdown cell", file=where,
                                 hint="tag the cell 'solution' to keep it out of the lab")
            new = (nbformat.v4.new_markdown_cell(src) if cell.cell_type == "markdown"
                   else nbformat.v4.new_raw_cell(src))
            new.metadata = _kept_metadata(cell)
        elif markers.is_check(cell):
            if markers.has_markers(src):
                raise InputError("solution markers in a check cell", file=where,
                                 hint="a check cell is kept whole in the lab; put the answer in a cell before it")
            q, pts = meta["question"], meta["points"]
            if not isinstance(q, str) or not q:
                raise InputError(f"question {q!r} is not a name such as 'q1'", file=where, field="course.question")
            if isinstance(pts, bool) or not isinstance(pts, int) or pts <= 0:
                raise InputError(f"points {pts!r} is not a whole number > 0", file=where, field="course.points")
            if q in questions:
                raise InputError(f"a second check cell for question {q}", file=where, field="course.question",
                                 hint="one check cell per question: give this one its own name")
            if not pending:
                raise InputError(f"check cell for {q} has no answer cell (with {markers.BEGIN}) before it",
                                 file=where)
            for cell_, _ in pending:
                cell_.metadata["course"]["question"] = q
            questions[q] = Question(q, pts, tuple(pending_names))
            pending, pending_names = [], []
            new = nbformat.v4.new_code_cell(src)
            new.metadata = {"course": {"check": markers.checksum(src), "points": pts, "question": q},
                            "tags": sorted(set(markers.tags(cell)) | {markers.CHECK_TAG})}
        elif markers.has_markers(src):
            stub, names = markers.stub_source(src, where)
            for name in names:
                if name in seen_names:
                    raise InputError(f"answer variable `{name}` is also an answer in {seen_names[name]}",
                                     file=where, hint="each question needs its own answer names, "
                                     "or one wrong answer would cost two questions")
                seen_names[name] = where
            new = nbformat.v4.new_code_cell(stub)
            new.metadata = _kept_metadata(cell)
            new.metadata["course"] = {"answer": True, "question": None, "stub": markers.checksum(stub)}
            pending.append((new, where))
            pending_names.extend(names)
        else:
            new = nbformat.v4.new_code_cell(src)
            new.metadata = _kept_metadata(cell)
        if "id" in cell:
            new["id"] = cell["id"]
        cells.append(new)
    if pending:
        raise InputError("an answer region with no check cell after it", file=pending[0][1],
                         hint="add a check cell with metadata {\"course\": {\"question\": ..., \"points\": ...}}")
    if not questions:
        raise InputError("no check cell: a lab needs at least one graded question", file=source,
                         hint="tag a cell 'check' and give it {\"course\": {\"question\": \"q1\", \"points\": 1}}")
    lab = nbformat.v4.new_notebook()
    lab.nbformat, lab.nbformat_minor = 4, 5
    lab.cells = cells
    lab.metadata = {
        "kernelspec": dict(solution.metadata.get("kernelspec") or KERNELSPEC),
        "language_info": {"name": "python"},
        "course": {"cells": len(cells), "lab": Path(source).stem, "points": sum(q.points for q in questions.values()),
                   "questions": {q.name: q.points for q in questions.values()},
                   "source": f"solutions/{Path(source).name}"},
    }
    nbformat.validate(lab)
    return lab, list(questions.values())


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
    sources = sorted(solutions_dir.glob("*.ipynb"))
    if not sources:
        raise InputError("no solution notebooks (*.ipynb) here", file=str(solutions_dir))
    planned = []
    for src in sources:
        lab, _ = build_lab(read_notebook(src, "solution"), str(src))
        planned.append((labs_dir / src.name, render(lab)))
    out: list[Outcome] = []
    for dest, text in planned:
        current = dest.read_text(encoding="utf-8") if dest.is_file() else None
        if current == text:
            out.append(Outcome(dest, UNCHANGED))
        elif check:
            out.append(Outcome(dest, STALE, "missing" if current is None else "differs from its solution"))
        else:
            why = None if current is None or force else student_work(dest)
            if why:
                out.append(Outcome(dest, REFUSED, why))
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(dest)
            out.append(Outcome(dest, WRITTEN))
    known = {dest.name for dest, _ in planned}
    if labs_dir.is_dir():
        for extra in sorted(labs_dir.glob("*.ipynb")):
            if extra.name not in known:
                out.append(Outcome(extra, ORPHAN, f"no {solutions_dir / extra.name}"))
    return out
