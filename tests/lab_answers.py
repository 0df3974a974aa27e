"""A lab as a student hands it in, for the lab-design tests: one seed's student edition, every answer cell
the reference solution's, except the questions a test answers itself; and, for the capstone's question
tests (test_capstone_q2, _q4), a lab's given cells run without a kernel, a question's hidden checks and
reference answer for a configuration, and a wrong answer graded against the reference."""
from __future__ import annotations

from pathlib import Path

from courselib.grading import build, markers, variant
from courselib.grading.grade import grade


def seeded_lab(solution: Path, seed: int, dest: Path, answers: dict[str, str] | None = None) -> Path:
    """Seed ``seed``'s lab built from ``solution``, written to ``dest``: each question in ``answers``
    (question -> the source handed in) answered with it, every other one by the reference solution."""
    import nbformat

    sol = nbformat.read(solution, 4)
    by_id = {c["id"]: c for c in sol.cells}
    nb = nbformat.reads(build.variant_text(sol, str(solution), seed)[0], 4)
    answers = answers or {}
    for cell in nb.cells:
        meta = markers.course_meta(cell)
        if meta.get("answer"):
            cell.source = answers.get(meta.get("question")) or \
                markers.solution_source(by_id[cell["id"]].source, str(solution))
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)
    return dest


# --- the capstone's questions checked against configurations (tests/test_capstone_q2.py, _q4.py) --------

def given_namespace(solution: Path, seed: int = 0, given: tuple[str, ...] = ()) -> dict:
    """Seed ``seed``'s parameters cell, then the cells with the ids ``given``, run without a kernel."""
    import nbformat

    cells = nbformat.read(solution, 4).cells
    tagged = {tag: next(c for c in cells if tag in markers.tags(c)).source
              for tag in (variant.PARAMETERS_TAG, variant.VARIANT_TAG)}
    ns: dict = {"print": lambda *a, **k: None}
    exec(variant.parameters_for(tagged[variant.PARAMETERS_TAG], tagged[variant.VARIANT_TAG], seed,  # noqa: S102
                                solution.stem), ns)
    for cell_id in given:
        exec(next(c.source for c in cells if c.get("id") == cell_id), ns)  # noqa: S102 (the course's own lab)
    return ns


def passes_hidden(solution: Path, ns: dict, question: str, **answers) -> bool:
    """Whether every hidden check of ``question`` passes on ``answers`` (set in ``ns``)."""
    return hidden_feedback(solution, ns, question, **answers) is None


def hidden_feedback(solution: Path, ns: dict, question: str, **answers) -> str | None:
    """The feedback of the first hidden check of ``question`` that fails on ``answers`` (set in ``ns``),
    or None when every one passes."""
    import nbformat

    ns.update(answers)
    for cell in nbformat.read(solution, 4).cells:
        if markers.HIDDEN_TAG in markers.tags(cell) and markers.course_meta(cell).get("question") == question:
            try:
                exec(compile(cell.source, solution.name, "exec"), ns)  # noqa: S102 (our own notebook)
            except AssertionError as err:
                return str(err)
    return None


def reference_answer(solution: Path, ns: dict, question: str, **answers) -> dict:
    """``question``'s reference answer given ``answers`` (the capstone: ``config``): the names its check
    cell reads (``answered(config=config, a=a, ...)``) and their values, ``answers`` left out."""
    import nbformat

    cells = nbformat.read(solution, 4).cells
    (i,) = [i for i, c in enumerate(cells) if markers.course_meta(c).get("question") == question and markers.is_check(c)]
    local = dict(ns, **answers)
    exec(markers.solution_source(cells[i - 1].source, str(solution)), local)  # noqa: S102 (the course's own lab)
    call = cells[i].source.split("answered(", 1)[1].split(")", 1)[0]
    names = [part.split("=")[0].strip() for part in call.split(",")]
    return {k: local[k] for k in names if k not in answers}


def graded_with(solution: Path, dest: Path, config: dict, seed: int = 0, answers: dict[str, str] | None = None) -> dict:
    """The capstone of seed ``seed`` graded with question 1 answered by ``config`` and each question of
    ``answers`` by its source (every other one by the reference solution): question -> its auto result."""
    lab = seeded_lab(solution, seed, dest, {"q1": f"config = {config!r}", **(answers or {})})
    return {r.question: r for r in grade(lab, source=solution).questions if r.kind == "auto"}


class ReferenceGrades:
    """The reference answer's auto results per configuration and seed, graded once (several wrong answers
    of a test module share one); ``folder`` makes a fresh folder per grading."""

    def __init__(self, solution: Path, folder):
        self.solution, self.folder, self.graded = solution, folder, {}

    def __call__(self, config: dict, seed: int = 0) -> dict:
        key = (repr(config), seed)
        if key not in self.graded:
            self.graded[key] = graded_with(self.solution, self.folder() / self.solution.name, config, seed)
        return self.graded[key]


def fails_alone(wrong: dict, right: dict, question: str) -> set[str]:
    """The questions whose result a wrong answer changed from the reference answer's (``{question}`` where
    it costs only its own points), with ``question`` asserted right in the reference."""
    assert right[question].passed, right[question].feedback
    return {q for q in wrong if wrong[q].passed != right[q].passed}
