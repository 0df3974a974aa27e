"""Lab 7's questions on the recovery ladder (q6, auto-graded) and the communicator's state (q7, written,
graded by rubric): both fail on the untouched lab and pass on the solution (issue 31). Question 6 prices
the story's job with each student's numbers (issue 32): a seed's solved variant passes it, its untouched
variant fails it, and seed 0's answer (a classmate's, or the lab as the book shows it) fails another seed."""
import json
import re
from pathlib import Path

import nbformat
import pytest

from courselib.cli.main import main
from courselib.grading import build, markers, variant

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


def _seed(seed: int, tmp_path, solved: bool) -> Path:
    out = tmp_path / str(seed) / ("solved" if solved else "untouched") / "07-barrier.ipynb"
    out.parent.mkdir(parents=True)
    out.write_text(build.variant_text(nbformat.read(SOLUTION, 4), str(SOLUTION), seed, solved=solved)[0])
    return out


def _ladder(seed: int) -> dict:
    """Question 6's inputs for ``seed``, from the lab's parameters and variant cells."""
    nb = nbformat.read(SOLUTION, 4)
    params, var = (next(c.source for c in nb.cells if tag in markers.tags(c))
                   for tag in (variant.PARAMETERS_TAG, variant.VARIANT_TAG))
    v = variant.values_for(params, var, seed, "07")
    return {"ranks": v["RANKS"], "since_min": v["LOST_AT_MINUTES"] % v["CHECKPOINT_MINUTES"],
            "billion": v["MODEL_BILLION"], "wait_min": v["REPLACEMENT_WAIT_MINUTES"]}


SEEDS = (7, 11, 23)


def test_question_6_draws_its_job_per_seed():
    ladders = [_ladder(s) for s in (0, *SEEDS)]
    assert ladders[0] == {"ranks": 384, "since_min": 20, "billion": 34, "wait_min": 8}   # the book's lab
    for name in ladders[0]:
        assert len({lad[name] for lad in ladders}) > 1, f"question 6's {name} is the same for every seed"
    for seed in range(1, 200):
        assert _ladder(seed)["wait_min"] > 0 and _ladder(seed)["since_min"] > 0, seed


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_a_seeds_question_6_passes_solved_and_fails_untouched(seed, tmp_path, capsys):
    solved, untouched = _seed(seed, tmp_path, True), _seed(seed, tmp_path, False)
    lad = _ladder(seed)
    text = " ".join(" ".join(c.source for c in nbformat.read(untouched, 4).cells if c.cell_type == "markdown").split())
    assert f"No node is free for the lost rank for {lad['wait_min']} minutes" in text
    assert f"a model of {lad['billion']} billion parameters" in text
    q = grade(solved, capsys)["q6"]
    assert (q["status"], q["points"]) == ("passed", 3), q["feedback"]
    assert grade(untouched, capsys)["q6"]["points"] == 0


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_seed_0s_question_6_answer_fails_another_seed(seed, tmp_path, capsys):
    """A classmate's numbers (here seed 0's, the lab the book shows), typed into another seed's notebook."""
    from courselib.model import recovery

    lad = _ladder(0)
    inputs = recovery.LadderInputs(ranks=lad["ranks"], since_checkpoint_s=lad["since_min"] * 60.0, loss="error",
                                   step_s=60.0, params=lad["billion"] * 1e9, replacement_wait_s=lad["wait_min"] * 60.0)
    rungs = [recovery.rung(n, inputs) for n in recovery.RUNGS]
    best = min((r for r in rungs if r.capacity_after == inputs.ranks), key=lambda r: r.lost_gpu_hours)
    copied = (f"restart_gpu_hours = {rungs[0].lost_gpu_hours!r}\n"
              f"best_full_rung, best_full_gpu_hours = {best.name!r}, {best.lost_gpu_hours!r}\n")
    assert rungs[0].name == "restart"
    assert grade(with_answer(tmp_path, copied), capsys)["q6"]["status"] == "passed"    # right for seed 0
    nb = nbformat.read(_seed(seed, tmp_path, True), 4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "best_full_rung, best_full_gpu_hours =" in c.source)
    cell.source = copied
    nbformat.write(nb, tmp_path / str(seed) / "solved" / "07-barrier.ipynb")
    q = grade(tmp_path / str(seed) / "solved" / "07-barrier.ipynb", capsys)
    assert q["q6"]["status"] == "failed", (seed, q["q6"])
    assert all(v["status"] == "passed" for k, v in q.items() if v["kind"] == "auto" and k != "q6")


def test_the_rubric_is_the_instructors_only():
    nb = nbformat.read(SOLUTION, 4)
    (cell,) = [c for c in nb.cells if markers.course_meta(c).get("question") == "q7"]
    answer, rubric = markers.rubric(cell.source)
    assert "ncclCommInitRank" in answer and re.search(r"close enough", rubric)
    lab = LAB.read_text()
    assert "MARK SCHEME" not in lab and "ncclCommGrow` adds" not in lab
    _, questions = build.build_lab(nbformat.read(SOLUTION, 4), str(SOLUTION))[:2]
    assert {q.name: q.manual for q in questions}["q7"] is True
