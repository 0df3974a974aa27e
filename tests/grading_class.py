"""A class of 30 submissions of Lab 8 for `courselib grade --many` (tests/test_grading_many.py and
benchmarks/bench_grade_many.py): solved, untouched, half-done, re-saved by another editor, one whose
answer hangs, one whose answer ends the process, one whose file is not a notebook, one that tries the
grading attacks, and one submitted as a symbolic link. ``EXPECTED`` is what an honest grader pays each.
"""
from __future__ import annotations

import copy
import json
import os
import textwrap
from pathlib import Path

import nbformat

import grading_attacks as A
from courselib.grading import build, markers

LAB = "08-gang-cost"
HANG = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
"""


def _answers(root: Path) -> tuple[object, dict[str, str], dict[str, str]]:
    """The built lab, each answer cell's solution by cell id, and each cell id's question."""
    solution = nbformat.read(root / "solutions" / f"{LAB}.ipynb", 4)
    lab, _ = build.build_lab(solution, f"solutions/{LAB}.ipynb")
    answers = {c.id: markers.solution_source(c.source, "solution") for c in solution.cells
               if c.cell_type == "code" and markers.has_markers(c.source)}
    questions = {c.id: markers.course_meta(c).get("question") for c in lab.cells if markers.course_meta(c).get("answer")}
    return lab, answers, questions


def _filled(lab, answers, questions, only=None, replace=None):
    nb = copy.deepcopy(lab)
    for cell in nb.cells:
        q = questions.get(cell.get("id"))
        if q is None:
            continue
        if replace and q in replace:
            cell.source = textwrap.dedent(replace[q]).strip() + "\n"
        elif only is None or q in only:
            cell.source = answers[cell.id]
    return nb


def make_class(root: Path, folder: Path) -> dict[str, int | None]:
    """Write the 30 submissions into ``folder``; return each student's expected auto-graded total
    (None: not graded at all)."""
    lab, answers, questions = _answers(root)
    expected: dict[str, int | None] = {}

    def put(student: str, nb, *, flat: bool = False) -> None:
        path = folder / f"{student}.ipynb" if flat else folder / student / "labs" / f"{LAB}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))

    for i in range(10):
        put(f"solved{i:02d}", _filled(lab, answers, questions), flat=i % 2 == 1)
        expected[f"solved{i:02d}"] = 12
    for i in range(8):
        put(f"untouched{i}", copy.deepcopy(lab))
        expected[f"untouched{i}"] = 0
    for i in range(6):
        put(f"half{i}", _filled(lab, answers, questions, only={"q2", "q4"}))
        expected[f"half{i}"] = 4
    put("hangs", _filled(lab, answers, questions, replace={"q1": HANG}))
    expected["hangs"] = 11                      # all but question 1's 1 point
    put("exits", _filled(lab, answers, questions, replace={"q3": "import os\nos._exit(3)"}))
    expected["exits"] = 10                      # all but question 3's 2 points
    bad = folder / "notjson" / "labs" / f"{LAB}.ipynb"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"cells": [')
    expected["notjson"] = None
    put("attacker", A.steals_the_solution(lab))
    expected["attacker"] = 0
    resaved = json.loads(nbformat.writes(_filled(lab, answers, questions)))
    for n, cell in enumerate(resaved["cells"]):
        cell["id"] = f"vscode-{n:04d}"
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        cell["source"] = src.splitlines(keepends=True)
    (folder / "resaved" / "labs").mkdir(parents=True)
    (folder / "resaved" / "labs" / f"{LAB}.ipynb").write_text(json.dumps(resaved, indent=1))
    expected["resaved"] = 12
    os.symlink(root / "solutions", folder / "linker")           # a 'submission' that is the solutions folder
    expected["linker"] = None
    assert len(expected) == 30
    return expected
