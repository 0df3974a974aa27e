"""Autograder bundles: what an instructor uploads to Gradescope, or puts in a Classroom 50 repository.

``courselib labs gradescope LAB -o autograder.zip`` writes the zip Gradescope's specification asks for
(gradescope/autograder_samples ``docs/specs.md``: ``setup.sh`` and ``run_autograder`` at the root), with
the course library (``course/``, installed by ``setup.sh``), the instructor's manifest of the lab
(hidden checks included) and the grading settings. ``courselib labs classroom50 LAB -o DIR`` writes the
same settings and manifest with an ``autograder.py`` that calls
:func:`courselib.grading.autograder.classroom50`. The zip is reproducible: sorted entries, fixed times.
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from courselib.errors import InputError
from courselib.grading.autograder import CONFIG
from courselib.grading.manifest import write_all
from courselib.grading.source import from_solution

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (its specification:
# gradescope/autograder_samples docs/specs.md). It installs the course library and what the grader needs.
set -euo pipefail
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3 python3-venv python3-pip
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q '/autograder/source/course[test]' ipython ipykernel
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this as root in /autograder for each submission: the student's notebook is in
# submission/, the results go to results/results.json. The student's code runs in courselib's sandbox
# (a separate unprivileged user, a private read-only view: source/, with the hidden checks, is not in it).
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${COURSELIB_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT"
mkdir -p "$ROOT/results"
chmod 700 "$ROOT/source" "$ROOT/results"     # the instructor's files: root only, whatever the isolation
@ISOLATION@exec "$PYTHON" -m courselib.grading.autograder "$ROOT" "$ROOT/source/""" + CONFIG + """"
"""
CONTAINER = ("# container isolation (asked for when the zip was built): this throw-away container is the sandbox;\n"
             "# the student's code runs as a separate user, without namespaces (Docker's default profile refuses them)\n"
             "export COURSELIB_GRADE_ISOLATION=container\n")

AUTOGRADER_PY = '''\
"""Classroom 50 calls this once per submission. It grades the lab notebook with courselib's grader (the
instructor's checks from manifest.json beside this file, hidden ones included; the student's code in
courselib's sandbox) and writes result.json."""
import sys
from pathlib import Path

from courselib.grading.autograder import classroom50

HERE = Path(__file__).resolve().parent


def main(argv):
    submission = argv[1] if len(argv) > 1 else "."
    result = argv[2] if len(argv) > 2 else "result.json"
    classroom50(submission, result, HERE / "''' + CONFIG + '''")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''

_EPOCH = (1980, 1, 1, 0, 0, 0)


def _settings(lab: str, timeout: float, time_limit: float) -> str:
    return json.dumps({"lab": lab, "manifest": "manifest.json", "timeout": timeout, "time_limit": time_limit,
                       "visibility": "visible"}, indent=2) + "\n"


def _instructor_manifest(solutions: Path, lab: str) -> str:
    path = solutions / f"{lab}.ipynb"
    if not path.is_file():
        raise InputError("no such solution notebook", file=str(path), field="LAB",
                         hint="give a lab name such as 08-gang-cost, from the course's root (with solutions/)")
    return write_all([from_solution(path)], instructor=True)


def _course_files(root: Path) -> list[tuple[str, Path]]:
    files = [(name, root / name) for name in ("pyproject.toml", "README.md", "LICENSE") if (root / name).is_file()]
    pkg = root / "src" / "courselib"
    if not pkg.is_dir():
        raise InputError("no src/courselib here: run from the course's root", file=str(root))
    for path in sorted(pkg.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.append((str(path.relative_to(root)), path))
    return files


def gradescope_zip(lab: str, *, solutions: Path, root: Path, timeout: float = 30.0, time_limit: float = 600.0,
                   isolation: str = "namespaces") -> bytes:
    """The autograder zip for ``lab``, as bytes. ``isolation``: "namespaces" (the sandbox's private view), or
    "container" (Gradescope's Docker refuses namespaces: the throw-away container is the sandbox)."""
    if isolation not in ("namespaces", "container"):
        raise InputError(f"isolation {isolation!r} is not namespaces or container", field="--isolation")
    run = RUN_AUTOGRADER.replace("@ISOLATION@", CONTAINER if isolation == "container" else "")
    entries: list[tuple[str, bytes, int]] = [
        ("setup.sh", SETUP_SH.encode(), 0o755), ("run_autograder", run.encode(), 0o755),
        (CONFIG, _settings(lab, timeout, time_limit).encode(), 0o644),
        ("manifest.json", _instructor_manifest(solutions, lab).encode(), 0o600)]
    entries += [(f"course/{name}", path.read_bytes(), 0o644) for name, path in _course_files(root)]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in sorted(entries):
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return buf.getvalue()


def classroom50_files(lab: str, *, solutions: Path, timeout: float = 30.0, time_limit: float = 600.0) -> dict[str, str]:
    """The files of a Classroom 50 assignment's autograder folder, by name."""
    return {"autograder.py": AUTOGRADER_PY, CONFIG: _settings(lab, timeout, time_limit),
            "manifest.json": _instructor_manifest(solutions, lab)}
