"""Autograder services: Gradescope's ``run_autograder`` and a Classroom 50 ``autograder.py``.

``courselib labs gradescope LAB -o autograder.zip`` builds the bundle Gradescope's specification asks
for (gradescope/autograder_samples ``docs/specs.md``): ``setup.sh`` and ``run_autograder`` at the root,
and, beside them, the course library to install and the *instructor's* manifest of the lab (its hidden
checks included: the bundle never reaches a student). Gradescope unpacks it into
``/autograder/source``, runs ``setup.sh`` once when it builds the image, then, per submission, copies
the student's files into ``/autograder/submission``, runs ``run_autograder`` as root in ``/autograder``
and reads ``/autograder/results/results.json``.

``python -m courselib.grading.autograder ROOT CONFIG`` (what ``run_autograder`` runs) finds the one
notebook in ``ROOT/submission``, grades it with the bundle's manifest in the usual sandbox (the student's
code as a separate uid, in a private read-only view: ``ROOT/source`` with the hidden checks is not in
it), and writes ``ROOT/results/results.json``. Anything that keeps the submission from being graded
(no notebook, two, a symlink, an unreadable file, a sandbox that cannot start) gives 0 and the reason,
never an exception: Gradescope shows the student what happened.

:func:`classroom50` is the entry point a Classroom 50 assignment's ``autograder.py`` calls: the same
grading, with the result written where that runner asks (the same per-test fields).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from courselib.errors import CourseError
from courselib.grading import formats
from courselib.grading.files import atomic_write
from courselib.grading.grade import grade

CONFIG = "courselib-autograder.json"


def _submission(folder: Path, lab: str) -> Path:
    """The notebook to grade: ``LAB.ipynb`` if the student uploaded it, else the only notebook."""
    found = sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    named = [p for p in found if p.name == f"{lab}.ipynb"]
    if len(named) == 1:
        return named[0]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CourseError(f"no notebook in the submission: upload your {lab}.ipynb")
    raise CourseError(f"{len(found)} notebooks in the submission and none is {lab}.ipynb: upload only your "
                      f"{lab}.ipynb")


def grade_submission(folder: Path, config: dict) -> dict:
    """Grade the notebook in ``folder`` as ``config`` says; Gradescope's results as a dict (never raises)."""

    lab = str(config["lab"])
    visibility = str(config.get("visibility", "visible"))
    try:
        path = _submission(folder, lab)
        report = grade(path, source=config["manifest"], lab=lab, timeout=float(config.get("timeout", 30)),
                       time_limit=float(config.get("time_limit", 600)), seed=config.get("seed"))
    except CourseError as err:
        return formats.not_graded(lab, str(err), visibility=visibility)
    return formats.gradescope(report, visibility=visibility)


def run(root: Path, config_path: Path) -> int:
    """``run_autograder``: ``root/submission`` → ``root/results/results.json``."""
    config = json.loads(config_path.read_text(encoding="utf-8"))
    manifest = Path(config["manifest"])
    config["manifest"] = str(manifest if manifest.is_absolute() else config_path.parent / manifest)
    results = grade_submission(root / "submission", config)
    out = root / "results"
    out.mkdir(mode=0o755, exist_ok=True)
    os.chmod(out, 0o755)
    atomic_write(out / "results.json", json.dumps(results, indent=2) + "\n")
    print(results["output"])
    return 0


def classroom50(submission: str | Path, result: str | Path, config: str | Path) -> dict:
    """For a Classroom 50 assignment's ``autograder.py``: grade ``submission`` (a folder), write ``result``."""
    cfg = json.loads(Path(config).read_text(encoding="utf-8"))
    manifest = Path(cfg["manifest"])
    cfg["manifest"] = str(manifest if manifest.is_absolute() else Path(config).parent / manifest)
    results = grade_submission(Path(submission), cfg)
    atomic_write(Path(result), json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m courselib.grading.autograder ROOT CONFIG")
    sys.exit(run(Path(sys.argv[1]), Path(sys.argv[2])))
