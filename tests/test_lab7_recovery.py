"""Lab 7's questions on the recovery ladder (q6, auto-graded) and the communicator's state (q7, written,
graded by rubric): both fail on the untouched lab and pass on the solution (issue 31)."""
import json
import re
from pathlib import Path

import nbformat
import pytest

from courselib.cli.main import main
from courselib.grading import build, markers

ROOT = Path(__file__).resolve().parents[1]
LAB, SOLUTION = ROOT / "labs" / "07-barrier.ipynb", ROOT / "solutions" / "07-barrier.ipynb"


def grade(path, capsys) -> dict:
    assert main(["grade", str(path), "--source", str(SOLUTION), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    return {q["question"]: q for q in report["questions"]}


def with_answer(tmp_path, source: str) -> Path:
    """The solution with question 6's answer cell replaced by ``source``."""
    nb = nbformat.read(SOLUTION, 4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "best_full_rung, best_full_gpu_hours =" in c.source)
    cell.source = source
    out = tmp_path / "07-barrier.ipynb"
    nbformat.write(nb, out)
    return out


def test_untouched_lab_fails_both(capsys):
    q = grade(LAB, capsys)
    assert (q["q6"]["status"], q["q6"]["points"]) == ("failed", 0)
    assert q["q7"]["kind"] == "manual" and "not answered yet" in q["q7"]["feedback"]


def test_solution_passes_both(capsys):
    q = grade(SOLUTION, capsys)
    assert (q["q6"]["status"], q["q6"]["points"], q["q6"]["max_points"]) == ("passed", 3, 3)
    assert q["q7"]["kind"] == "manual" and q["q7"]["max_points"] == 4
    assert "not answered yet" not in q["q7"]["feedback"]


@pytest.mark.parametrize("answer, feedback", [
    ("restart_gpu_hours = recovery.rung('restart', recovery.LadderInputs(ranks=384, since_checkpoint_s=1200, "
     "step_s=60, params=34e9)).lost_gpu_hours\nbest_full_rung, best_full_gpu_hours = 'grow', 0", "8 minutes"),
    ("restart_gpu_hours = recovery.rung('restart', LADDER).lost_gpu_hours\n"
     "best_full_rung, best_full_gpu_hours = 'shrink', recovery.rung('shrink', LADDER).lost_gpu_hours",
     "ends with 383 ranks"),
])
def test_usual_mistakes_get_specific_feedback(tmp_path, capsys, answer, feedback):
    q = grade(with_answer(tmp_path, answer), capsys)
    assert q["q6"]["status"] == "failed" and feedback in q["q6"]["feedback"], q["q6"]["feedback"]


def test_the_rubric_is_the_instructors_only():
    nb = nbformat.read(SOLUTION, 4)
    (cell,) = [c for c in nb.cells if markers.course_meta(c).get("question") == "q7"]
    answer, rubric = markers.rubric(cell.source)
    assert "ncclCommInitRank" in answer and re.search(r"close enough", rubric)
    lab = LAB.read_text()
    assert "MARK SCHEME" not in lab and "ncclCommGrow` adds" not in lab
    _, questions = build.build_lab(nbformat.read(SOLUTION, 4), str(SOLUTION))[:2]
    assert {q.name: q.manual for q in questions}["q7"] is True
