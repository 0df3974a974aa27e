"""Honest students first (issue 36): a solved lab saved by another editor grades the same.

The grader finds the lab's cells by id and, when an editor gave them new ids (or none), by the lab's
markers and metadata. Each notebook here is Lab 8 solved, then re-saved the way an editor saves it:
JupyterLab (new uuid cell ids, execution metadata, outputs), VS Code (sources as line lists, its own
cell metadata, 1-space JSON without a final newline), a Jupyter older than nbformat 4.5 (no ids),
nbformat's own normaliser (ids made up again), and a student who added cells of their own.
A regression: the solved notebook with regenerated ids scored 0/12 ("check cell is missing").
"""
from __future__ import annotations

import copy
import json
import random
import uuid
import warnings
from pathlib import Path

import pytest

from courselib.grading import build, markers
from courselib.grading.grade import grade

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
LAB = "08-gang-cost"
SOLUTION = ROOT / "solutions" / f"{LAB}.ipynb"


def solved_lab() -> dict:
    """Lab 8 as a student who solved it would have it: the built lab, each answer cell filled in."""
    solution = nbformat.read(SOLUTION, 4)
    lab, _ = build.build_lab(solution, str(SOLUTION))
    answers = {c.id: markers.solution_source(c.source, "solution") for c in solution.cells
               if c.cell_type == "code" and markers.has_markers(c.source)}
    for cell in lab.cells:
        if cell.id in answers:
            cell.source = answers[cell.id]
        if markers.course_meta(cell).get("manual"):
            cell.source = "Gang admission binds nothing until the whole gang fits, so nothing idles."
    return json.loads(nbformat.writes(lab))


def jupyterlab(nb: dict) -> str:
    nb = copy.deepcopy(nb)
    for n, cell in enumerate(nb["cells"], start=1):
        cell["id"] = str(uuid.UUID(int=random.Random(n).getrandbits(128)))
        cell["metadata"] = dict(reversed(list(cell["metadata"].items())))
        if cell["cell_type"] == "code":
            cell["execution_count"] = n
            cell["metadata"]["execution"] = {"iopub.status.busy": "2026-12-01T10:00:00.000Z"}
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.12.7", "mimetype": "text/x-python"}
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def vscode(nb: dict) -> str:
    nb = copy.deepcopy(nb)
    for n, cell in enumerate(nb["cells"]):
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        cell["source"] = src.splitlines(keepends=True)
        cell["id"] = uuid.UUID(int=random.Random(1000 + n).getrandbits(128)).hex[:8]
        if cell["cell_type"] == "code":
            cell["metadata"]["vscode"] = {"languageId": "python"}
    nb["metadata"]["vscode"] = {"interpreter": {"hash": "0" * 64}}
    return json.dumps(nb, indent=1, ensure_ascii=False)          # VS Code writes no final newline


def jupyter_before_ids(nb: dict) -> str:
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        cell.pop("id", None)
    nb["nbformat_minor"] = 4
    return json.dumps(nb, indent=1)


def normalised(nb: dict) -> str:
    from nbformat.validator import normalize

    raw = json.loads(jupyter_before_ids(nb))
    raw["nbformat_minor"] = 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, fixed = normalize(raw)       # nbformat adds the missing ids (random ones)
    return json.dumps(fixed, indent=1)


def student_added_cells(nb: dict) -> str:
    nb = json.loads(jupyterlab(nb))
    nb["cells"].insert(3, {"cell_type": "markdown", "id": "my-notes", "metadata": {}, "source": "My notes"})
    nb["cells"].insert(6, {"cell_type": "code", "id": "scratch", "metadata": {}, "execution_count": None,
                           "outputs": [], "source": "x = 1 + 1  # trying things"})
    return json.dumps(nb, indent=1)


EDITORS = {"jupyterlab": jupyterlab, "vscode": vscode, "jupyter-before-4.5": jupyter_before_ids,
           "nbformat-normalize": normalised, "student-added-cells": student_added_cells}


@pytest.fixture(scope="module")
def as_built(tmp_path_factory):
    path = tmp_path_factory.mktemp("built") / f"{LAB}.ipynb"
    path.write_text(json.dumps(solved_lab(), indent=1))
    return grade(path, source=SOLUTION)


@pytest.mark.parametrize("editor", sorted(EDITORS))
def test_a_solved_lab_saved_by_another_editor_grades_the_same(editor, tmp_path, as_built):
    path = tmp_path / f"{LAB}.ipynb"
    path.write_text(EDITORS[editor](solved_lab()))
    report = grade(path, source=SOLUTION)
    assert report.total == as_built.total == report.max_points == 12, [(r.question, r.feedback) for r in report.questions]
    assert [r.feedback for r in report.questions if r.kind == "auto" and not r.passed] == []
    written = next(r for r in report.questions if r.kind == "manual")
    assert "Gang admission binds nothing" in written.answer


def test_new_ids_do_not_hide_an_edited_check(tmp_path):
    """Matching by markers is not a way around the check cells: an edited one still earns nothing."""
    nb = json.loads(jupyterlab(solved_lab()))
    check = next(c for c in nb["cells"] if markers.CHECK_TAG in c["metadata"].get("tags", []))
    check["source"] = "pass  # my check now"
    path = tmp_path / f"{LAB}.ipynb"
    path.write_text(json.dumps(nb))
    report = grade(path, source=SOLUTION)
    q1 = report.questions[0]
    assert (q1.points, q1.passed) == (0, False) and "was edited" in q1.feedback
    assert report.total == 11                  # all but question 1's 1 point
