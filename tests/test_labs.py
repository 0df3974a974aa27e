"""Labs, proven both ways (DESIGN §5): every solution scores full marks, every untouched lab scores
zero on every question and fails on its check cells and nothing else, one correct answer earns exactly
its own question's points, a wrong answer costs only its own question (no cascade), a partly solved lab
gets partial credit with specific feedback, labs/ is in step with solutions/, the grader never writes
the graded file, and bad input is one located line. The Slurm lab's answers are also checked against
the real local Slurm where one can run.

Each grading starts a kernel (1-3 s): 5 solutions, 5 untouched labs (run twice: cells, then the CLI),
one run per question with only that answer filled in (22, slow), one wrong first answer per lab (5, slow),
one with one answer left out, a partly solved lab, a hung answer, a killed kernel, a tampered check.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import keyword
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.cli.main import main
from courselib.errors import InputError
from courselib.grading import build, markers
from courselib.grading.grade import format_report
from courselib.grading.grade import grade as _grade

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here: this is the student template (`make student-template`); the labs are "
                "graded by .github/workflows/grade.yml and classroom.yml", allow_module_level=True)
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
NAMES = [p.stem for p in SOLUTIONS]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def grade(path: Path, **kw):
    """Grade against the instructor's source in solutions/ (the file graded may live anywhere)."""
    name = kw.pop("lab", None) or Path(path).stem
    return _grade(path, source=kw.pop("source", ROOT / "solutions" / f"{name}.ipynb"), **kw)


def execute(nb, workdir: Path, timeout: float) -> str | None:
    """Run every cell of ``nb`` in a kernel, as nbval (the `grade` workflow's friendly run) does."""
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    class _CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict())

    km = AsyncKernelManager(kernel_name="courselib-current-env", kernel_spec_manager=_CurrentEnv())
    NotebookClient(nb, km=km, timeout=timeout, allow_errors=True, interrupt_on_timeout=True, startup_timeout=120,
                   resources={"metadata": {"path": str(workdir)}}).execute(stderr=subprocess.DEVNULL)
    return None


@pytest.fixture(scope="module")
def labs(tmp_path_factory) -> Path:
    """A fresh build of every lab, in a temporary folder (the repo's labs/ is only compared)."""
    out = tmp_path_factory.mktemp("labs")
    outcomes = build.build_all(ROOT / "solutions", out)
    assert [o.status for o in outcomes] == [build.WRITTEN] * (len(SOLUTIONS) + 1)   # and manifest.json
    return out


def answer_cells(nb) -> dict[str, list]:
    out: dict[str, list] = {}
    for cell in nb.cells:
        meta = markers.course_meta(cell)
        if meta.get("answer"):
            out.setdefault(meta["question"], []).append(cell)
    return out


def graft(lab: Path, solution: Path, questions: set[str], dest: Path, wrong: dict[str, str] | None = None) -> Path:
    """The lab with the solution's answers (markers removed) for ``questions`` only; stubs elsewhere.

    ``wrong`` maps a question to a student's (wrong) source for its single answer cell.
    """
    sol = {c["id"]: c for c in nbformat.read(solution, 4).cells}
    nb = nbformat.read(lab, 4)
    for q, cells in answer_cells(nb).items():
        if wrong and q in wrong:
            (cell,) = cells
            cell.source = wrong[q]
        elif q in questions:
            for cell in cells:
                cell.source = markers.solution_source(sol[cell["id"]].source, str(solution))
    nbformat.write(nb, dest)
    return dest


# --- the lab format --------------------------------------------------------------------------

def test_there_are_five_labs_with_three_to_five_questions_each():
    assert NAMES == ["01-gang-deadlock", "02-gang-cost", "03-barrier", "04-oom-killer", "05-slurm"]
    for path in SOLUTIONS:
        _, questions = build.build_lab(nbformat.read(path, 4), str(path))
        assert 3 <= len(questions) <= 5, path.name
        assert all(q.points > 0 and q.answers for q in questions)


def test_stub_keeps_the_answer_names_and_drops_scratch_and_the_solution():
    src = ("# context stays\n"
           "    # BEGIN SOLUTION\n"
           "    _scratch = 41\n"
           "    victim, points = 'a', _scratch + 1\n"
           "    victim = 'b'\n"
           "    # END SOLUTION\n"
           "victim")
    stub, names = markers.stub_source(src, "x.ipynb cell 3")
    assert names == ["victim", "points"]
    assert stub == ("# context stays\n    victim = ...  # YOUR ANSWER HERE\n"
                    "    points = ...  # YOUR ANSWER HERE\nvictim")
    assert "41" not in stub and "'b'" not in stub
    assert markers.solution_source(src, "x") .count("SOLUTION") == 0


@pytest.mark.parametrize("src, line, text", [
    ("a = 1\n# BEGIN SOLUTION\nx = 2\n", 2, "never closed"),
    ("# END SOLUTION\n", 1, "without a # BEGIN SOLUTION"),
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n", 2, "inside another"),
    ("# BEGIN SOLUTION\nprint(1)\n_x = 2\n# END SOLUTION\n", 1, "assigns no answer variable"),
])
def test_bad_markers_are_located_errors(src, line, text):
    with pytest.raises(InputError) as err:
        markers.stub_source(src, "solutions/x.ipynb cell 4")
    assert err.value.line == line and text in str(err.value)
    assert str(err.value).startswith("solutions/x.ipynb cell 4:") and "\n" not in str(err.value)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=4, unique=True),
       st.integers(min_value=0, max_value=10_000))
def test_every_assigned_name_gets_exactly_one_stub_and_no_value_leaks(names, value):
    names = [n for n in names if not keyword.iskeyword(n)]
    if not names:
        return
    region = "\n".join(f"{n} = {value} + {i}" for i, n in enumerate(names))
    stub, got = markers.stub_source(f"# BEGIN SOLUTION\n{region}\n# END SOLUTION", "x")
    assert got == names
    assert stub.splitlines() == [f"{n} = ...  # YOUR ANSWER HERE" for n in names]


def test_a_check_cell_without_an_answer_before_it_is_refused():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("pass")]
    nb.cells[0].metadata = {"course": {"question": "q1", "points": 1}}
    with pytest.raises(InputError, match="no answer cell"):
        build.build_lab(nb, "solutions/bad.ipynb")


def test_one_answer_name_in_two_questions_is_refused():
    nb = nbformat.v4.new_notebook()
    answer = "# BEGIN SOLUTION\nx = 1\n# END SOLUTION"
    nb.cells = [nbformat.v4.new_code_cell(answer), nbformat.v4.new_code_cell("pass"),
                nbformat.v4.new_code_cell(answer), nbformat.v4.new_code_cell("pass")]
    nb.cells[1].metadata = {"course": {"question": "q1", "points": 1}}
    nb.cells[3].metadata = {"course": {"question": "q2", "points": 1}}
    with pytest.raises(InputError, match="also an answer"):
        build.build_lab(nb, "solutions/bad.ipynb")


# --- the build -------------------------------------------------------------------------------

def test_labs_folder_is_in_step_with_solutions(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["labs", "build", "--check"]) == 0, capsys.readouterr().out
    assert sorted(p.name for p in (ROOT / "labs").glob("*.ipynb")) == [p.name for p in SOLUTIONS]


def test_rebuild_is_byte_identical_and_check_catches_a_stale_lab(labs, tmp_path, capsys):
    again = tmp_path / "again"
    build.build_all(ROOT / "solutions", again)
    for p in SOLUTIONS:
        assert (again / p.name).read_bytes() == (labs / p.name).read_bytes()
    assert {o.status for o in build.build_all(ROOT / "solutions", again)} == {build.UNCHANGED}
    stale = again / SOLUTIONS[1].name
    stale.write_text(stale.read_text().replace("Question 1", "Question one"))
    (again / SOLUTIONS[2].name).unlink()
    args = ["labs", "build", "--check", "--solutions", str(ROOT / "solutions"), "--labs", str(again)]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert f"{stale}: out of date" in out and f"{SOLUTIONS[2].name}: out of date (missing)" in out
    assert not (again / SOLUTIONS[2].name).exists()  # --check writes nothing


def test_generated_labs_hold_no_answer_and_no_output(labs):
    for path in SOLUTIONS:
        lab_text = (labs / path.name).read_text()
        lab = nbformat.reads(lab_text, 4)
        assert "BEGIN SOLUTION" not in lab_text and "END SOLUTION" not in lab_text
        sol = nbformat.read(path, 4)
        solution_lines, given_hints = set(), set()
        for cell in sol.cells:
            if cell.cell_type == "code" and markers.has_markers(cell.source):
                region = markers.solution_source(cell.source, "x")
                stub = markers.stub_source(cell.source, "x")[0]
                solution_lines |= {ln.strip() for ln in region.splitlines() if ln.strip()} - \
                                  {ln.strip() for ln in stub.splitlines()}
                given_hints.add(stub)
        # a line of the answer may appear in the lab only where the instructor's stub says it (lab 3's
        # `event.succeed()`, named in the stub so that the whole region to write is visible)
        leaked = [ln for ln in solution_lines if len(ln) > 8 and ln in lab_text and not any(ln in h for h in given_hints)]
        assert solution_lines and not leaked, leaked
        assert not any(markers.SOLUTION_TAG in markers.tags(c) for c in lab.cells)
        for cell in lab.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
        meta = lab.metadata["course"]
        assert meta["cells"] == len(lab.cells)
        assert sum(meta["questions"].values()) == meta["points"]
        for q, cells in answer_cells(lab).items():
            assert all("# YOUR ANSWER HERE" in c.source for c in cells), (path.name, q)


def test_build_refuses_to_overwrite_a_students_work_but_replaces_an_untouched_lab(labs, tmp_path, capsys):
    work = tmp_path / "labs"
    build.build_all(ROOT / "solutions", work)
    args = ["labs", "build", "--solutions", str(ROOT / "solutions"), "--labs", str(work)]
    # untouched but outdated (a Markdown cell changed): rebuilt without fuss
    lab0 = work / SOLUTIONS[0].name
    lab0.write_text(lab0.read_text().replace("Question 1", "Question one"))
    # a student answered a question: never overwritten
    lab1 = work / SOLUTIONS[1].name
    nb = nbformat.read(lab1, 4)
    first = next(iter(answer_cells(nb).values()))[0]
    first.source = first.source.replace("...", "42", 1) + "\n# my work"
    nbformat.write(nb, lab1)
    # a student added a scratch cell and changed no answer: not overwritten either
    lab2 = work / SOLUTIONS[2].name
    nb2 = nbformat.read(lab2, 4)
    nb2.cells.append(nbformat.v4.new_code_cell("# my notes"))
    nbformat.write(nb2, lab2)
    before1, before2 = sha(lab1), sha(lab2)
    assert main(args) == 1
    lines = capsys.readouterr().out.splitlines()
    refused = [ln for ln in lines if "not overwritten" in ln]
    assert len(refused) == 2 and str(lab1) in refused[0] and str(lab2) in refused[1]
    assert "answers edited: q1" in refused[0] and "--force" in refused[0]
    assert sha(lab1) == before1 and sha(lab2) == before2
    assert "Question one" not in lab0.read_text()
    assert main(args + ["--force"]) == 0
    capsys.readouterr()
    assert lab1.read_bytes() == (labs / lab1.name).read_bytes()


def test_the_classroom_workflow_reports_every_question_with_its_points():
    """classroom.yml: one Classroom test per lab question, worth its points, all sent to the reporter."""
    import yaml

    steps = yaml.safe_load((ROOT / ".github" / "workflows" / "classroom.yml").read_text())["jobs"][
        "run-autograding-tests"]["steps"]
    tests = [s for s in steps if s.get("uses", "").startswith("classroom-resources/autograding-command-grader")]
    expected = []
    for path in SOLUTIONS:
        _, questions = build.build_lab(nbformat.read(path, 4), str(path))
        expected += [(path.stem, q.name, q.points) for q in questions if not q.manual]
    found = []
    for step in tests:
        lab, q = step["with"]["test-name"].split()
        assert step["with"]["command"] == f"python3 .github/classroom/grades.py question _grades {lab} {q}"
        found.append((lab, q, step["with"]["max-score"]))
    assert found == expected
    (reporter,) = [s for s in steps if "autograding-grading-reporter" in s.get("uses", "")]
    ids = [s["id"] for s in tests]
    assert reporter["with"]["runners"].split(",") == ids
    assert reporter["env"] == {f"{i.upper()}_RESULTS": "${{steps.%s.outputs.result}}" % i for i in ids}
    grading = next(s for s in steps if s.get("name") == "Grade every lab once")["run"]
    assert "courselib grade" in grading and "--json-file" in grading


def test_the_student_template_has_the_labs_and_no_solutions(tmp_path):
    """`make student-template`: the committed course without solutions/ (what students may see)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the template is made from the committed course")
    done = subprocess.run(["git", "archive", "--format=tar", "HEAD", "--", ".", ":(exclude)solutions"],
                          cwd=ROOT, capture_output=True)
    assert done.returncode == 0, done.stderr
    (tmp_path / "t.tar").write_bytes(done.stdout)
    with tarfile.open(tmp_path / "t.tar") as tar:
        names = tar.getnames()
    assert not [n for n in names if n == "solutions" or n.startswith("solutions/")]
    assert "labs/README.md" in names and ".github/classroom/grades.py" in names
    assert "student-template:" in (ROOT / "Makefile").read_text()


def test_the_json_file_is_never_the_graded_lab(labs, tmp_path, capsys):
    lab = tmp_path / "lab.ipynb"
    lab.write_bytes((labs / SOLUTIONS[0].name).read_bytes())
    before = sha(lab)
    assert main(["grade", str(lab), "--json-file", str(lab)]) == 2
    assert sha(lab) == before and "the grader never writes a notebook" in capsys.readouterr().err


def test_missing_solutions_folder_is_one_line(tmp_path, capsys):
    assert main(["labs", "build", "--solutions", str(tmp_path / "nope"), "--labs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err and "--solutions" in err


# --- grading, both ways ------------------------------------------------------------------------

GRADES_SCRIPT = ROOT / ".github" / "classroom" / "grades.py"


def run_grades_script(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GRADES_SCRIPT), *map(str, args)], capture_output=True, text=True)


@pytest.mark.parametrize("name", NAMES)
def test_every_solution_scores_full_marks_and_is_not_modified(name, tmp_path):
    path = ROOT / "solutions" / f"{name}.ipynb"
    before, mtime = sha(path), os.stat(path).st_mtime_ns
    report = grade(path, timeout=60)
    assert sha(path) == before and os.stat(path).st_mtime_ns == mtime
    auto = [r for r in report.questions if r.kind == "auto"]
    assert [r.feedback for r in auto if not r.passed] == []
    assert report.total == report.max_points == sum(r.max_points for r in auto) > 0
    for r in report.questions:
        if r.kind == "manual":   # a written answer: never 0, never full marks, always its points
            assert (r.status, r.points, r.passed) == ("needs manual grading", None, None) and r.max_points > 0
            assert r.answer and "YOUR ANSWER HERE" not in r.answer
    assert report.manual_points == sum(r.max_points for r in report.questions if r.kind == "manual")
    assert report.notes == (), report.notes
    # what each GitHub Classroom test runs: every question passes
    (tmp_path / f"{name}.json").write_text(json.dumps(report.to_dict()))
    for r in auto:
        done = run_grades_script("question", tmp_path, name, r.question)
        assert done.returncode == 0 and done.stdout.startswith(f"{name} {r.question}: {r.max_points}/"), done


@pytest.mark.parametrize("name", NAMES)
def test_every_untouched_lab_scores_zero_on_every_question(labs, name, capsys, tmp_path):
    path = labs / f"{name}.ipynb"
    before = sha(path)
    assert main(["grade", str(path), "--source", str(ROOT / "solutions"), "--json",
                 "--json-file", str(tmp_path / f"{name}.json")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sha(path) == before
    assert json.loads((tmp_path / f"{name}.json").read_text()) == report
    assert report["total"] == 0 and report["max"] > 0
    for q in report["questions"]:
        assert q["points"] == 0 and not q["passed"]
        assert "not answered yet" in q["feedback"], q
    # what each GitHub Classroom test and the workflow summary show
    done = run_grades_script("question", tmp_path, name, "q1")
    assert done.returncode == 1 and "0/" in done.stdout and "not answered yet" in done.stdout
    table = run_grades_script("summary", tmp_path).stdout
    assert table.startswith(f"## Lab grades: 0/{report['max']} auto-graded") and f"| {name} | q1 | auto | 0/" in table


@pytest.mark.parametrize("name", NAMES)
def test_an_untouched_lab_fails_on_every_check_cell_and_nothing_else(labs, name, tmp_path):
    """What nbval (the grading workflow) sees: exactly the check cells raise, each 'not answered yet'."""
    nb = nbformat.read(labs / f"{name}.ipynb", 4)
    assert execute(nb, tmp_path, timeout=60) is None
    failed = {i for i, c in enumerate(nb.cells) if any(o.get("output_type") == "error" for o in c.get("outputs", []))}
    checks = {i for i, c in enumerate(nb.cells) if markers.is_check(c)}
    assert failed == checks
    for i in checks:
        (err,) = [o for o in nb.cells[i].outputs if o.output_type == "error"]
        assert err.ename == "AssertionError" and "not answered yet" in err.evalue


def _questions(path: Path) -> list[str]:
    return [q.name for q in build.build_lab(nbformat.read(path, 4), str(path))[1]]


# Every question of every lab, alone: its check must pass with every other answer left as a stub.
# This is the whole independence proof (a check that read another question's answer would fail here).
EACH = [(p.stem, q) for p in SOLUTIONS for q in _questions(p)]


@pytest.mark.slow  # 22 kernels, about 60 s: `make test` runs it, `make test-fast` does not
@pytest.mark.parametrize("name, question", EACH, ids=[f"{n}-{q}" for n, q in EACH])
def test_one_correct_answer_earns_exactly_its_points(labs, name, question, tmp_path):
    lab, solution = labs / f"{name}.ipynb", ROOT / "solutions" / f"{name}.ipynb"
    report = grade(graft(lab, solution, {question}, tmp_path / lab.name))
    points = {r.question: r.points for r in report.questions}
    maxima = {r.question: r.max_points for r in report.questions}
    assert points == {q: (maxima[q] if q == question else 0) for q in points}


# A plausible wrong first answer per lab, and the specific feedback it must get. Every other answer is
# the solution's: only question 1 may lose points (no cascade), even where a later answer calls it.
WRONG_FIRST = {
    "01-gang-deadlock": ('other_jobs = [Job("rival", pods=200, gpus_per_pod=1, duration=2 * HOUR)]',
                         "a delay, not a deadlock"),
    "02-gang-cost": ("def idle_cost(gpus_held, wait_minutes, usd_per_gpu_hour):\n"
                     "    return gpus_held * wait_minutes * usd_per_gpu_hour",
                     "used 40 hours, not 40 minutes"),
    "03-barrier": ('why = "A"', "you chose A, but in the model no all-reduce"),
    "04-oom-killer": ("dataloader_points = 180_000 + 1024 * 1024 // PAGE_SIZE",
                      "the oom_score_adj term (oom_score_adj × totalpages/1000) is missing"),
    "05-slurm": ("smoke_nodes, smoke_time_limit_minutes = 2, 120", "sbatch never reads it"),
}


@pytest.mark.slow  # 5 kernels
@pytest.mark.parametrize("name", NAMES)
def test_a_wrong_first_answer_costs_only_its_own_points_with_specific_feedback(labs, name, tmp_path):
    assert set(WRONG_FIRST) == set(NAMES)
    lab, solution = labs / f"{name}.ipynb", ROOT / "solutions" / f"{name}.ipynb"
    source, feedback = WRONG_FIRST[name]
    report = grade(graft(lab, solution, set(_questions(solution)), tmp_path / lab.name, wrong={"q1": source}))
    assert [r.question for r in report.questions if not r.passed] == ["q1"], format_report(report)
    assert feedback in report.questions[0].feedback, report.questions[0].feedback
    assert report.total == report.max_points - report.questions[0].max_points


def test_a_partly_solved_lab_gets_partial_credit_and_feedback_per_question(labs, tmp_path, capsys):
    """Question 1 wrong by a unit, 2 and 3 right (3 calls the wrong function from 1), 4 untouched."""
    name = "02-gang-cost"
    lab, solution = labs / f"{name}.ipynb", ROOT / "solutions" / f"{name}.ipynb"
    path = graft(lab, solution, {"q2", "q3"}, tmp_path / lab.name, wrong={"q1": WRONG_FIRST[name][0]})
    assert main(["grade", str(path), "--source", str(solution)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  q1  FAIL  0/3  idle_cost\(480, 40, 3\) gave 57600: your function used 40 hours, "
                     r"not 40 minutes", out, re.M), out
    assert re.search(r"^  q2  ok    2/2$", out, re.M) and re.search(r"^  q3  ok    3/3$", out, re.M), out
    assert re.search(r"^  q4  FAIL  0/2  `kube_idle_gpu_hours` is still `...`: not answered yet", out, re.M), out
    assert re.search(r"^  total 5/10$", out, re.M), out


def test_one_unanswered_question_costs_only_its_points(labs, tmp_path):
    name, left_out = "02-gang-cost", "q2"
    lab, solution = labs / f"{name}.ipynb", ROOT / "solutions" / f"{name}.ipynb"
    report = grade(graft(lab, solution, set(_questions(solution)) - {left_out}, tmp_path / lab.name))
    assert [r.question for r in report.questions if not r.passed] == [left_out]
    assert report.total == report.max_points - 2


def test_a_hung_answer_is_stopped_and_costs_only_its_question(labs, tmp_path, capsys):
    name = "04-oom-killer"
    path = graft(labs / f"{name}.ipynb", ROOT / "solutions" / f"{name}.ipynb", {"q1", "q2", "q3", "q4", "q5"},
                 tmp_path / "hung.ipynb")
    nb = nbformat.read(path, 4)
    answer_cells(nb)["q3"][0].source = "while True:\n    pass"
    nbformat.write(nb, path)
    assert main(["grade", str(path), "--source", str(ROOT / "solutions" / f"{name}.ipynb"), "--timeout", "5"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  q3  FAIL  0/2  your answer cell was stopped at the 5 s time limit", out, re.M), out
    assert re.search(r"^  total 7/9$", out, re.M), out


def test_a_kernel_killed_mid_lab_keeps_the_points_already_earned(tmp_path):
    """An answer that takes the kernel down (an OOM kill, say) costs the checks after it, not before."""
    solution = nbformat.read(ROOT / "solutions" / "04-oom-killer.ipynb", 4)
    last = [c for c in solution.cells if c.cell_type == "code" and markers.has_markers(c.source)][-1]
    last.source = "import os\nos._exit(137)"
    path = tmp_path / "killed.ipynb"
    nbformat.write(solution, path)
    report = grade(path, lab="04-oom-killer")
    assert [(r.question, r.points) for r in report.questions] == [("q1", 2), ("q2", 2), ("q3", 2), ("q4", 1),
                                                                  ("q5", 0)]
    assert "stopped the grading process" in report.questions[-1].feedback, report.questions[-1].feedback
    assert "exit status 137" in report.questions[-1].feedback and report.notes


def test_an_edited_or_deleted_check_cell_earns_nothing_and_says_so(labs, tmp_path, capsys):
    """Even with every answer right: the question whose check was edited (or deleted) earns 0."""
    name = "04-oom-killer"
    solution = ROOT / "solutions" / f"{name}.ipynb"
    path = graft(labs / f"{name}.ipynb", solution, set(_questions(solution)), tmp_path / f"{name}.ipynb")
    nb = nbformat.read(path, 4)
    checks = [c for c in nb.cells if markers.is_check(c)]
    checks[0].source = checks[0].source.replace("(do not edit this cell)", "(edited)")
    nb.cells.remove(checks[1])
    nbformat.write(nb, path)
    assert main(["grade", str(path), "--source", str(solution)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  q1  FAIL  0/2  its check cell was edited: this question earns nothing", out, re.M), out
    assert re.search(r"^  q2  FAIL  0/2  its check cell is missing from your notebook", out, re.M), out
    assert re.search(r"^  total 5/9$", out, re.M), out


@pytest.mark.parametrize("content, expect", [
    (None, "no such lab"),
    ('{"cells": [\n  {"cell_type": "code",,}\n]}', ":2: not a notebook (invalid JSON"),
    ('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "no instructor source for lab 'broken'"),
    ("[1, 2]", "not a Jupyter notebook in format 4"),
])
def test_unreadable_input_is_one_located_line_and_exit_2(tmp_path, capsys, content, expect):
    path = tmp_path / "broken.ipynb"
    if content is not None:
        path.write_text(content)
    assert main(["grade", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and str(path) in captured.err and expect in captured.err
    if content is not None:
        assert path.read_text() == content


# --- the Slurm lab against the real Slurm ---------------------------------------------------------

def _lab_namespace(name: str) -> dict:
    """Run the solution's given cells and answer cells (not its checks) in a namespace, without a kernel."""
    ns: dict = {}
    for cell in nbformat.read(ROOT / "solutions" / f"{name}.ipynb", 4).cells:
        if cell.cell_type == "code" and not markers.is_check(cell) and markers.SOLUTION_TAG not in markers.tags(cell):
            code = markers.solution_source(cell.source, name)
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, f"{name}.ipynb", "exec"), ns)  # noqa: S102 (our own notebook)
    return ns


@pytest.mark.real
@pytest.mark.slow
def test_the_slurm_labs_answers_agree_with_the_real_slurm(tmp_path, monkeypatch):
    """The answers of labs/05-slurm, checked in the lab against the model, hold on a real Slurm too."""
    from courselib.live import slurm
    from courselib.live import slurm_replay as replay

    reason = slurm.unavailable_reason()
    if reason:
        pytest.skip(f"local Slurm not runnable here: {reason}")
    ns = _lab_namespace("05-slurm")
    plan = replay.plan_replay(ns["lab_workload"](), seconds_per_minute=10)
    monkeypatch.setenv(slurm.STATE_ENV, str(tmp_path / "state.json"))
    shape = slurm.ClusterShape(plan.shape.nodes, plan.shape.gpus_per_node, plan.shape.features, base_port=17980)
    cluster = slurm.up(shape)
    pids = [p.pid for p in cluster.procs]
    try:
        result = replay.run_replay(cluster, plan)
    finally:
        assert slurm.down(cluster)["left"] == []
    assert [pid for pid in pids if slurm._alive(pid)] == []
    evidence = replay.format_replay(result)
    started_at_once = {j.name for j in result.jobs if j.start is not None and j.reason is None}
    assert started_at_once == set(ns["start_at_once"]), evidence
    assert {j.name: j.reason for j in result.jobs if j.reason is not None} == ns["pending_reason"], evidence
    order = result.start_order()
    assert set(order[:2]) == set(ns["start_at_once"]) and order[2:] == ["sweep", "eval"], evidence
    first = min(j.start for j in result.jobs)        # the lab's t = 0: Slurm's first start (1 s resolution)
    hours = {j.name: (j.start - first) / plan.seconds_per_minute * plan.unit / 3600 for j in result.jobs}
    latency_h = 2.0 / plan.seconds_per_minute * plan.unit / 3600   # 2 s of scheduler latency, in lab hours
    assert abs(hours["sweep"] - ns["sweep_start_hours"]) <= latency_h + 1e-9, evidence
    # eval waits behind two hand-offs (pretrain -> sweep -> eval): each may add the latency
    assert abs(hours["eval"] - ns["eval_start_hours"]) <= 2 * latency_h + 1e-9, evidence
