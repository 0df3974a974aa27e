"""`courselib grade NB --nbval` (issue 33, "autograded via nbval in CI", literally): the graded copy — the
student's answers between the instructor's given and check cells from the manifest, never the student's
own check cells — runs under `pytest --nbval`, the points come from nbval's per-cell results, and every
integrity attack earns nothing on that path too (courselib's grader is nbval's kernel: the student's
code still runs only in the sandbox, the checks only in the grader)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import grading_attacks as A
from courselib.grading import build, markers
from courselib.grading.grade import grade
from courselib.grading.nbval import grade_with_nbval, graded_cells, pytest_command

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbval")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
LAB = "08-gang-cost"
SOLUTION = ROOT / "solutions" / f"{LAB}.ipynb"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the grader runs the student's code as another user "
                                                            "only as root")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    out = tmp_path_factory.mktemp("labs")
    build.build_all(ROOT / "solutions", out)
    return nbformat.read(out / f"{LAB}.ipynb", 4)


def test_the_graded_copy_holds_the_instructors_cells_and_the_students_answers_only(lab, tmp_path):
    from courselib.grading.grade import prepare

    nb = A.edited_checks(lab)
    answer = next(c for c in nb.cells if markers.course_meta(c).get("answer"))
    answer.source = "# NBVAL_SKIP\n# NBVAL_RAISES_EXCEPTION\n" + answer.source
    path = tmp_path / f"{LAB}.ipynb"
    A.write(nb, path)
    ready = prepare(path, source=SOLUTION)
    cells = graded_cells(ready.manifest, ready.sub)
    checks = [c for c in cells if c["role"] in ("check", "hidden")]
    assert checks and all("my check now" not in c["source"] for c in checks)       # never the student's checks
    assert {c["source"] for c in checks} == {s.source for s in ready.manifest.steps if s.role in ("check", "hidden")}
    text = "\n".join(c["source"] for c in cells if c["role"] == "answer")
    assert "# NBVAL_SKIP" not in text and "NBVAL-disabled-SKIP" in text              # no marker can skip a cell


def test_the_graders_pytest_does_not_build_an_iri_parser(tmp_path):
    """nbval's pytest reads notebooks with nbformat, and nbformat's jsonschema imports rfc3987_syntax when
    it is installed: 39 Earley parsers built at import, 1.5-3.5 s of every graded copy, for a format no
    notebook schema names. The grader's pytest runs without it and still validates a notebook."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_probe.py").write_text(
        "import sys\nimport nbformat\n\n\ndef test_probe():\n"
        "    nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('1')]))\n"
        "    assert sys.modules.get('rfc3987_syntax') is None, 'the iri parser was built'\n")
    done = subprocess.run([*pytest_command(), "-q", "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"),
                           "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def test_the_cli_builds_a_lab_with_nbformat_and_without_the_iri_parser(tmp_path):
    """`courselib labs variant` (the grader's tests run it about 25 times) writes the lab with nbformat, and
    nbformat's jsonschema would build the iri parser: the CLI starts without it."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "courselib", "labs", "variant", LAB, "--seed", "7",
                           "-o", str(tmp_path / f"{LAB}.ipynb")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    imported = set(re.findall(r"\|\s*([\w.]+)\s*$", done.stderr, re.M))
    # (-X importtime lists a refused import too: the parsers are built in rfc3987_syntax.syntax_helpers)
    assert "nbformat" in imported and "rfc3987_syntax.syntax_helpers" not in imported, sorted(m for m in imported if "rfc" in m)
    assert nbformat.read(tmp_path / f"{LAB}.ipynb", 4).cells


@pytest.mark.slow
def test_points_come_from_nbvals_report_and_agree_with_the_grader(lab, tmp_path):
    pytest_report: list[str] = []
    report, text = grade_with_nbval(SOLUTION, report_text=pytest_report)
    assert report.total == report.max_points == 12 and "25 passed" in text
    untouched = tmp_path / f"{LAB}.ipynb"
    A.write(lab, untouched)
    nbval_zero, _ = grade_with_nbval(untouched, source=SOLUTION)
    plain_zero = grade(untouched, source=SOLUTION)
    assert nbval_zero.total == plain_zero.total == 0
    assert [q.feedback for q in nbval_zero.questions] == [q.feedback for q in plain_zero.questions]
    done = subprocess.run([sys.executable, "-m", "courselib", "grade", str(untouched), "--source", str(SOLUTION),
                           "--nbval"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "FAILED" in done.stdout and "::Cell" in done.stdout                 # the pytest report, shown first
    assert done.stdout.rstrip().splitlines()[-1].strip().startswith("total 0/12")


@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(A.ATTACKS))
def test_an_attack_earns_nothing_under_nbval_either(lab, attack, tmp_path):
    solution = nbformat.read(SOLUTION, 4)
    path = tmp_path / f"{LAB}.ipynb"
    A.write(A.ATTACKS[attack](lab, solution), path)
    # the SIGINT-ignoring answer with test_grading_integrity's short limits (SIGINT_TIMES: the same path,
    # interrupted at the timeout and killed the grace later), the others with room for a loaded machine
    report, _ = grade_with_nbval(path, source=SOLUTION, timeout=4 if attack == "ignores_sigint" else 10, grace=2,
                                 time_limit=240)
    earned = {r.question: r.points for r in report.questions if r.kind == "auto"}
    maxima = {r.question: r.max_points for r in report.questions}
    honest = {q: (maxima[q] if attack in A.HONEST_Q1 and q == "q1" else 0) for q in earned}   # question 1's points
    assert earned == honest, json.dumps(report.to_dict())[:3000]
