"""A lab as a student hands it in, for the lab-design tests: one seed's student edition, every answer cell
the reference solution's, except the questions a test answers itself."""
from __future__ import annotations

from pathlib import Path

from courselib.grading import build, markers


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
