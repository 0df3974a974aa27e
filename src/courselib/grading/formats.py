"""One grade report, in the formats other graders read: Gradescope's ``results.json``, and the same
shape for a Classroom 50 ``autograder.py``.

Gradescope's format is its autograder specification (gradescope/autograder_samples ``docs/specs.md``,
"Output format"): a top-level ``score``, ``output`` and ``visibility``, and one entry of ``tests`` per
question with ``name``, ``number``, ``score``, ``max_score``, ``status`` (``passed`` / ``failed``),
``output`` and ``visibility``. A written answer is a test worth 0 (``max_score`` 0) that says it needs
manual grading and how many points it carries (``extra_data.manual_points``): the instructor grades it
in Gradescope's manual rubric, and it is never counted as 0 or as full marks. The words are the text
report's (:func:`courselib.grading.grade.total_line`, ``held_back_feedback``), already escaped
(:mod:`courselib.grading.safe`). ``tests/data/gradescope-results.schema.json`` is the format as a JSON
Schema, against which the tests validate every file written here.
"""
from __future__ import annotations

from courselib.grading.grade import GradeReport, total_line

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


def gradescope(report: GradeReport, *, visibility: str = "visible") -> dict:
    """``report`` as Gradescope's ``results.json`` (a dict ready for ``json.dumps``)."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility {visibility!r} is not one of {VISIBILITIES}")
    tests = []
    for n, r in enumerate(report.questions, start=1):
        name = f"{report.lab} {r.question}"
        if r.kind == "manual":
            tests.append({"name": f"{name} (written answer, graded by hand)", "number": str(n), "score": 0.0,
                          "max_score": 0.0, "output": f"{r.feedback}; worth {r.max_points} point(s)",
                          "visibility": visibility, "extra_data": {"manual_points": r.max_points}})
            continue
        tests.append({"name": name, "number": str(n), "score": float(r.points or 0), "max_score": float(r.max_points),
                      "status": "passed" if r.passed else "failed",
                      "output": r.feedback or ("passed" if r.passed else ""), "visibility": visibility,
                      **({"extra_data": {"held_back": True}} if r.held_back else {})})
    notes = "".join(f"\nnote: {n}" for n in report.notes)
    return {
        "score": float(report.total),
        "output": total_line(report.total, report.max_points, report.held_back_points, report.manual_points) + notes,
        "output_format": "text", "test_output_format": "text", "test_name_format": "text",
        "visibility": visibility, "stdout_visibility": "hidden",
        "extra_data": {"lab": report.lab, "seed": report.seed, "max_auto": report.max_points,
                       "manual_points": report.manual_points, "held_back": report.held_back_points,
                       "isolation": report.isolation},
        "tests": tests,
    }


def not_graded(lab: str, why: str, *, visibility: str = "visible") -> dict:
    """The results of a submission that could not be graded at all (no notebook, two notebooks…): 0, and why."""
    return {"score": 0.0, "output": f"not graded: {why}", "output_format": "text", "visibility": visibility,
            "stdout_visibility": "hidden", "extra_data": {"lab": lab}, "tests": []}
