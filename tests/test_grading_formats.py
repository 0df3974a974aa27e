"""Other graders' formats (issue 33): Gradescope's results.json, validated against its documented format
(tests/data/gradescope-results.schema.json, from gradescope/autograder_samples docs/specs.md); the
autograder zip, run as Gradescope runs it in a folder laid out as Gradescope lays it out; a Classroom 50
autograder.py; and the honest feedback words, the same in every output format."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from courselib.grading import build, formats, markers
from courselib.grading.grade import format_report, grade, held_back_feedback

nbformat = pytest.importorskip("nbformat")
jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
LAB = "08-gang-cost"
SOLUTION = ROOT / "solutions" / f"{LAB}.ipynb"
SCHEMA = json.loads((ROOT / "tests" / "data" / "gradescope-results.schema.json").read_text())
ROOTLESS = os.geteuid() != 0


def valid(results: dict) -> dict:
    jsonschema.validate(results, SCHEMA)
    return results


def test_the_schema_can_fail():
    """The schema refuses what the specification does not allow (so passing it means something)."""
    good = {"score": 1.0, "tests": [{"name": "q1", "score": 1.0, "max_score": 1.0, "status": "passed"}]}
    valid(good)
    for bad in ({"tests": [{"status": "ok"}]}, {"score": "12"}, {"score": 1, "visibility": "secret"},
                {"score": 1, "tests": [{"nmae": "typo"}]}, {"output": "no score, no tests"},
                {"score": 1, "output_format": "markdown"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMA)


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    out = tmp_path_factory.mktemp("labs")
    build.build_all(ROOT / "solutions", out)
    return out


def test_results_json_for_a_solution_an_untouched_lab_and_held_back_points(labs, tmp_path):
    solved = valid(formats.gradescope(grade(SOLUTION)))
    assert solved["score"] == 12.0 and solved["extra_data"]["manual_points"] == 3
    auto = [t for t in solved["tests"] if t["max_score"] > 0]
    assert sum(t["max_score"] for t in auto) == 12 and all(t["status"] == "passed" for t in auto)
    (written,) = [t for t in solved["tests"] if t["max_score"] == 0]
    assert "written answer" in written["name"] and "needs manual grading" in written["output"]
    assert written["extra_data"] == {"manual_points": 3} and "MARK SCHEME" not in json.dumps(solved)

    untouched = valid(formats.gradescope(grade(labs / f"{LAB}.ipynb", source=SOLUTION)))
    assert untouched["score"] == 0 and all(t["score"] == 0 for t in untouched["tests"])
    assert all("not answered yet" in t["output"] for t in untouched["tests"] if t["max_score"] > 0)

    # graded without the hidden checks (the student's own run): the points are held back, in the same words
    path = tmp_path / f"{LAB}.ipynb"
    shutil.copyfile(SOLUTION, path)
    report = grade(path, source=ROOT / "labs" / "manifest.json")
    results = valid(formats.gradescope(report))
    held = [r for r in report.questions if r.held_back]
    assert held and report.held_back_points == sum(r.max_points for r in held) and report.total == 12 - report.held_back_points
    words = held_back_feedback(held[0].max_points)
    assert words.startswith("the public checks passed;") and "held back for hidden checks your instructor runs" in words
    text = format_report(report)
    table = subprocess.run([sys.executable, str(ROOT / ".github/classroom/grades.py"), "summary", str(tmp_path)],
                           capture_output=True, text=True)
    (tmp_path / f"{LAB}.json").write_text(json.dumps(report.to_dict()))
    table = subprocess.run([sys.executable, str(ROOT / ".github/classroom/grades.py"), "summary", str(tmp_path)],
                           capture_output=True, text=True).stdout
    for r in held:
        same = held_back_feedback(r.max_points)
        assert same in text and same in json.dumps(report.to_dict())
        assert same in next(t["output"] for t in results["tests"] if t["name"] == f"{LAB} {r.question}")
        assert same in table.replace("\\", "")
    assert "passed" not in [q["status"] for q in report.to_dict()["questions"] if q["question"] in {r.question for r in held}]
    last = text.splitlines()[-1].strip()
    assert last in results["output"] and last.removeprefix("total ") in table


def test_the_cli_writes_results_json_and_refuses_a_notebook(tmp_path):
    path = tmp_path / f"{LAB}.ipynb"
    shutil.copyfile(SOLUTION, path)
    done = subprocess.run([sys.executable, "-m", "courselib", "grade", str(path), "--source", str(SOLUTION),
                           "--gradescope", str(tmp_path / "results.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert valid(json.loads((tmp_path / "results.json").read_text()))["score"] == 12.0
    done = subprocess.run([sys.executable, "-m", "courselib", "grade", str(path), "--gradescope", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "--gradescope" in done.stderr and "Traceback" not in done.stderr


# --- the autograder zip, run as Gradescope runs it ------------------------------------------------------

def _gradescope_root(tmp_path: Path) -> Path:
    """/autograder as Gradescope lays it out: source/ (the zip, unpacked), run_autograder, submission/, results/."""
    zpath = tmp_path / "autograder.zip"
    done = subprocess.run([sys.executable, "-m", "courselib", "labs", "gradescope", LAB, "-o", str(zpath)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zpath) as z:
        names = z.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names)               # at the root of the archive
        z.extractall(root / "source")
        for info in z.infolist():
            (root / "source" / info.filename).chmod((info.external_attr >> 16) & 0o777)
    shutil.copyfile(root / "source" / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    return root


def _run_autograder(root: Path) -> dict:
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), COURSELIB_PYTHON=sys.executable,
               PYTHONPATH=str(root / "source" / "course" / "src"))      # the course library the zip carries
    done = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return valid(json.loads((root / "results" / "results.json").read_text()))


@pytest.mark.slow
@pytest.mark.skipif(ROOTLESS, reason="Gradescope runs the autograder as root (the student's code as another user)")
def test_the_gradescope_zip_grades_as_gradescope_runs_it(labs, tmp_path):
    root = _gradescope_root(tmp_path)
    assert subprocess.run(["bash", "-n", str(root / "source" / "setup.sh")]).returncode == 0
    manifest = json.loads((root / "source" / "manifest.json").read_text())["labs"][LAB]
    assert any(c["role"] == "hidden" for c in manifest["cells"]), "the hidden checks are inside the zip"
    # a solution, uploaded under another name: full marks, hidden checks run
    shutil.copyfile(SOLUTION, root / "submission" / "my-lab.ipynb")
    results = _run_autograder(root)
    assert results["score"] == 12.0 and "hidden checks from" not in results["output"]
    assert "separate unprivileged user" in results["extra_data"]["isolation"]
    # a submission that goes looking for the zip's hidden checks finds nothing, and earns nothing
    (root / "submission" / "my-lab.ipynb").unlink()
    nb = nbformat.read(labs / f"{LAB}.ipynb", 4)
    first = next(c for c in nb.cells if markers.course_meta(c).get("answer"))
    first.source = ("import courselib, glob, os\n_p = os.path.dirname(courselib.__file__)\n"
                    "_found = [open(f).read() for d in range(6) for f in glob.glob(os.path.join(_p, *['..'] * d, '*.json'))]\n"
                    "raise RuntimeError('found: ' + ' '.join(_found)[:3000])\n")
    nbformat.write(nb, str(root / "submission" / f"{LAB}.ipynb"))
    results = _run_autograder(root)
    assert results["score"] == 0 and "_hidden_q" not in json.dumps(results)
    # nothing to grade, or too much: 0 and why
    (root / "submission" / f"{LAB}.ipynb").unlink()
    assert "no notebook in the submission" in _run_autograder(root)["output"]
    for name in ("a.ipynb", "b.ipynb"):
        shutil.copyfile(SOLUTION, root / "submission" / name)
    results = _run_autograder(root)
    assert results["score"] == 0 and "2 notebooks" in results["output"]


@pytest.mark.slow
@pytest.mark.skipif(ROOTLESS, reason="the grader runs the student's code as another user only as root")
def test_a_classroom50_autograder_py_calls_the_grader(tmp_path):
    folder = tmp_path / "autograders" / LAB
    done = subprocess.run([sys.executable, "-m", "courselib", "labs", "classroom50", LAB, "-o", str(folder)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert {p.name for p in folder.iterdir()} >= {"autograder.py", "manifest.json"}
    submission = tmp_path / "student"
    submission.mkdir()
    shutil.copyfile(SOLUTION, submission / f"{LAB}.ipynb")
    done = subprocess.run([sys.executable, str(folder / "autograder.py"), str(submission), str(tmp_path / "result.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert valid(json.loads((tmp_path / "result.json").read_text()))["score"] == 12.0


@pytest.mark.slow
@pytest.mark.skipif(ROOTLESS or not shutil.which("unshare"), reason="needs root and unshare")
def test_container_isolation_for_a_container_that_refuses_namespaces(labs, tmp_path):
    """Gradescope runs the autograder in Docker, whose default profile refuses unshare: an instructor builds the
    zip with --isolation container (asked for, never a fallback): the student's code runs as a separate user
    in the throw-away container, the zip's files (hidden checks) root-only. Run here in a private mount
    namespace that makes the interpreter's folder enterable by others, as a container image would have it."""
    zpath = tmp_path / "autograder.zip"
    done = subprocess.run([sys.executable, "-m", "courselib", "labs", "gradescope", LAB, "-o", str(zpath),
                           "--isolation", "container"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zpath) as z:
        assert "COURSELIB_GRADE_ISOLATION=container" in z.read("run_autograder").decode()
        z.extractall(root / "source")
    shutil.copyfile(root / "source" / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    nb = nbformat.read(labs / f"{LAB}.ipynb", 4)
    first = next(c for c in nb.cells if markers.course_meta(c).get("answer"))
    first.source = (f"import glob\n_found = [open(f).read() for f in glob.glob({str(root)!r} + '/source/*.json')]\n"
                    "raise RuntimeError('found: ' + ' '.join(_found)[:3000])\n")
    nbformat.write(nb, str(root / "submission" / f"{LAB}.ipynb"))
    os.chmod(tmp_path, 0o755)
    python = os.path.realpath(sys.executable)
    top = "/" + Path(python).parts[1]                 # e.g. /root, when the interpreter lives in ~/.pyenv
    reach = ""
    if not os.stat(top).st_mode & 0o001:
        inner = "/".join(Path(python).parts[:3])[1:]  # /root/.pyenv
        reach = (f'mkdir -p /mnt/keep && mount --bind "{inner}" /mnt/keep && mount -t tmpfs -o mode=0755 tmpfs "{top}" '
                 f'&& mkdir -p "{inner}" && mount --bind /mnt/keep "{inner}" && ')
    script = (f'{reach}AUTOGRADER_ROOT="{root}" COURSELIB_PYTHON="{sys.executable}" PYTHONPATH="{ROOT / "src"}" '
              f'"{root}/run_autograder"')
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    results = valid(json.loads((root / "results" / "results.json").read_text()))
    assert results["score"] == 0 and "_hidden_q" not in json.dumps(results)
    assert "container isolation" in results["extra_data"]["isolation"], results["extra_data"]
    # and a solution scores full marks there, hidden checks included
    (root / "submission" / f"{LAB}.ipynb").unlink()
    shutil.copyfile(SOLUTION, root / "submission" / f"{LAB}.ipynb")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert valid(json.loads((root / "results" / "results.json").read_text()))["score"] == 12.0
