"""Issue 36: a grade that means what it says. Each way a determined student found to full marks without
solving (Lab 8, 12 auto-graded points), written as a test that failed on the grader before this issue
and passes now; after each, a clean solution graded right away still scores 12/12 as the unprivileged
user (nothing an attack did lingers). See the threat model in courselib.grading and book/instructors.md.

The attack notebooks are in tests/grading_attacks.py. These tests run the grader as CI does (its own
process, as root); the same-user ones through the Python API with ``same_user=True``.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import grading_attacks as A
from courselib.grading import build

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
TARGET = "08-gang-cost"
SOLUTION = ROOT / "solutions" / f"{TARGET}.ipynb"
MAX = 12
ROOTLESS = os.geteuid() != 0
needs_root = pytest.mark.skipif(ROOTLESS, reason="the grader runs the student's code as another user only as root")

pytestmark = [pytest.mark.slow, needs_root]     # one grading or two each (a few seconds)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    out = tmp_path_factory.mktemp("labs")
    build.build_all(ROOT / "solutions", out)
    return nbformat.read(out / f"{TARGET}.ipynb", 4)


@pytest.fixture(scope="module")
def solution():
    return nbformat.read(SOLUTION, 4)


def run_grader(path: Path, *extra, cwd=None, env=None, report_dir: Path | None = None):
    """`courselib grade PATH --json-file …` as CI runs it; (the process, the report or None)."""
    report_dir = report_dir or path.parent
    report = report_dir / "report.json"
    done = subprocess.run([sys.executable, "-m", "courselib", "grade", str(path), "--json-file", str(report), *extra],
                          cwd=cwd or path.parent, env=env, capture_output=True, text=True, timeout=600)
    data = json.loads(report.read_text()) if report.is_file() and report.stat().st_size else None
    return done, data


def auto_points(report: dict) -> int:
    return sum(q["points"] or 0 for q in report["questions"] if q["kind"] == "auto")


def clean_solution_scores_full_marks(tmp: Path) -> None:
    """A clean solution graded right after the attack: 12/12, as a separate unprivileged user."""
    folder = Path(tempfile.mkdtemp(prefix="clean-", dir=tmp))
    path = folder / f"{TARGET}.ipynb"
    shutil.copyfile(SOLUTION, path)
    done, report = run_grader(path, "--source", str(SOLUTION))
    assert done.returncode == 0, done.stderr
    assert report["total"] == MAX, report
    assert "separate unprivileged user" in report["isolation"], report["isolation"]


def write(nb, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    A.write(nb, path)
    return path


# --- 1, 2: the solutions through the checkout ------------------------------------------------------

@pytest.mark.parametrize("how", ["--source solutions/LAB.ipynb", "--source labs/manifest.json", "--hidden"])
def test_the_checkouts_solutions_are_out_of_reach(lab, tmp_path, how):
    """Attacks 1-2: an answer reads solutions/LAB.ipynb (directly, or `git show HEAD:solutions/…` from the
    checkout's .git) and runs the solution's cells: 12/12 before, whatever the --source."""
    path = write(A.steals_the_solution(lab), tmp_path / "sub" / f"{TARGET}.ipynb")
    extra = {"--source solutions/LAB.ipynb": ["--source", str(SOLUTION)],
             "--source labs/manifest.json": ["--source", str(ROOT / "labs" / "manifest.json")],
             "--hidden": ["--source", str(ROOT / "labs" / "manifest.json"), "--hidden", str(ROOT / "solutions")]}[how]
    done, report = run_grader(path, *extra)
    assert done.returncode == 0, done.stderr
    assert auto_points(report) == 0, report
    clean_solution_scores_full_marks(tmp_path)


# --- 3: a classmate's submission ------------------------------------------------------------------------

def test_a_classmates_submission_is_out_of_reach(lab, tmp_path):
    """Attack 3: the graded path from /proc/<ppid>/cmdline, the sibling folders globbed, a classmate's
    answers run: 12/12 before. Submissions in a folder every user can read, as they often are."""
    base = Path(tempfile.mkdtemp(prefix="submissions-"))
    try:
        os.chmod(base, 0o755)
        alice = base / "alice" / f"{TARGET}.ipynb"
        alice.parent.mkdir()
        shutil.copyfile(SOLUTION, alice)
        mallory = write(A.copies_a_classmate(lab), base / "mallory" / f"{TARGET}.ipynb")
        for p in (alice.parent, mallory.parent):
            os.chmod(p, 0o755)
        for p in (alice, mallory):
            os.chmod(p, 0o644)
        reports = Path(tempfile.mkdtemp(prefix="reports-"))
        done, report = run_grader(mallory, "--source", str(SOLUTION), report_dir=reports)
        assert done.returncode == 0, done.stderr
        assert auto_points(report) == 0, report
        shutil.rmtree(reports)
    finally:
        shutil.rmtree(base)
    clean_solution_scores_full_marks(tmp_path)


# --- 4: the visible check hands out the answer ------------------------------------------------------

def test_copying_the_visible_checks_expressions_earns_nothing(lab, tmp_path):
    """Attack 4: each answer is the expression the visible check cell uses for its expected value."""
    path = write(A.copies_the_checks_expressions(lab), tmp_path / f"{TARGET}.ipynb")
    done, report = run_grader(path, "--source", str(SOLUTION))
    assert done.returncode == 0, done.stderr
    assert auto_points(report) == 0, report


# --- 5: a symlink (or a hard link, a FIFO) as the submission ----------------------------------------

@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_a_submission_that_is_not_the_students_own_file_is_refused(tmp_path, kind):
    """Attack 5: the submission is a symlink to solutions/08-gang-cost.ipynb: 12/12 before, and the JSON
    showed the mark scheme. Now refused, with a located one-line reason (exit 2)."""
    path = tmp_path / "sub" / f"{TARGET}.ipynb"
    path.parent.mkdir()
    if kind == "symlink":
        path.symlink_to(SOLUTION)
    elif kind == "hardlink":
        copy = tmp_path / "elsewhere.ipynb"
        shutil.copyfile(SOLUTION, copy)
        os.link(copy, path)
    else:
        os.mkfifo(path)
    done, report = run_grader(path, "--source", str(SOLUTION), report_dir=tmp_path)
    assert done.returncode == 2 and report is None, (done.stdout, done.stderr)
    assert str(path) in done.stderr and "Traceback" not in done.stderr
    assert "MARK SCHEME" not in done.stdout + done.stderr
    clean_solution_scores_full_marks(tmp_path)


# --- 6: a source placed beside the lab ------------------------------------------------------------------

@pytest.mark.parametrize("forgery", ["solutions/LAB.ipynb", "labs/manifest.json"])
def test_a_source_beside_the_students_lab_is_never_the_source(lab, solution, tmp_path, forgery):
    """Attack 6: no --source; a solutions/LAB.ipynb or manifest.json the student put beside their lab
    was found first: 12/12 on an untouched lab. The grader's course (its working folder) is the source."""
    course = tmp_path / "course"
    (course / "labs").mkdir(parents=True)
    shutil.copyfile(ROOT / "labs" / "manifest.json", course / "labs" / "manifest.json")
    sub = tmp_path / "submissions" / "mallory"
    path = write(lab, sub / "labs" / f"{TARGET}.ipynb")
    forged = A.forged_source(solution)
    if forgery == "solutions/LAB.ipynb":
        write(forged, sub / "solutions" / f"{TARGET}.ipynb")
    else:
        from courselib.grading import manifest as M
        compiled = build.compile_lab(forged, str(SOLUTION))[2]
        (sub / "labs" / "manifest.json").write_text(M.write_all([compiled]))
    done, report = run_grader(path, cwd=course, report_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert auto_points(report) == 0 and str(sub) not in report["source"], report
    clean_solution_scores_full_marks(tmp_path)


# --- 8: fill the temporary file systems, kill the worker: no fallback ---------------------------------

def _have_loop_mounts() -> bool:
    return (shutil.which("mkfs.ext4") and shutil.which("unshare") and os.path.exists("/dev/loop-control")
            and not ROOTLESS)


@pytest.mark.skipif(not _have_loop_mounts(), reason="needs root, unshare, mkfs.ext4 and loop devices")
def test_a_worker_that_cannot_start_never_runs_the_student_as_root(lab, tmp_path):
    """Attack 8: /tmp filled to its root reserve, then the worker killed; the student's process could not be
    started again as the unprivileged user, and the old sandbox's fallback ran the student's code as root
    with nothing hidden (9/12, and for every later grading). Reproduced in a private mount namespace: a
    small ext4 /tmp (5% reserved for root) that the first answer fills before it kills itself, and
    IPython readable by root only, so that no process of the unprivileged user can start. The grader
    must give zero points with the reason, never a weaker sandbox."""
    import IPython

    image = tmp_path / "tmp.img"
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image), "48M"], check=True, capture_output=True)
    path = write(A.fills_temp_then_dies(lab), tmp_path / f"{TARGET}.ipynb")
    ipython = Path(IPython.__file__).parent
    script = f"""
set -e
exec 3<"{path}"
mount -t tmpfs -o mode=0700 tmpfs /mnt
cp -a "{ipython}" /mnt/IPython && chmod 700 /mnt/IPython && mount --bind /mnt/IPython "{ipython}"
mount -o loop,nosuid,nodev "{image}" /tmp
chmod 1777 /tmp
mount -t tmpfs -o size=8m tmpfs /dev/shm
mount -t tmpfs -o size=8m tmpfs /var/tmp
mkdir -m 700 /tmp/g
cat <&3 > /tmp/g/{TARGET}.ipynb
cd /tmp/g
"{sys.executable}" -m courselib grade /tmp/g/{TARGET}.ipynb --source "{SOLUTION}" --json-file /tmp/g/report.json >/dev/null 2>/tmp/g/err || true
cat /tmp/g/report.json 2>/dev/null || cat /tmp/g/err
"""
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert auto_points(report) == 0, report
    assert "same user" not in report["isolation"] and "same-user" not in report["isolation"], report["isolation"]
    assert not any("as the same user" in n for n in report["notes"]), report["notes"]
    assert any("was not run" in n for n in report["notes"]), report["notes"]
    assert all(q["feedback"].startswith("not graded:") for q in report["questions"] if q["kind"] == "auto")
    clean_solution_scores_full_marks(tmp_path)


# --- 9: same-user mode ------------------------------------------------------------------------------

SAME_USER = """
import json, sys
from courselib.grading.grade import grade
report = grade(sys.argv[1], source=sys.argv[2], same_user=True)
print(json.dumps(report.to_dict()))
"""


def _same_user(path: Path, env=None) -> dict:
    done = subprocess.run([sys.executable, "-c", SAME_USER, str(path), str(SOLUTION)], capture_output=True,
                          text=True, timeout=600, env=env, cwd=path.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_same_user_mode_still_hides_the_solutions(lab, tmp_path):
    """Attack 9a: in same-user mode (the grader run by an ordinary user) the student's code read
    solutions/ (12/12). Same-user mode is now asked for explicitly, warns, and keeps the private view."""
    path = write(A.steals_the_solution(lab), tmp_path / f"{TARGET}.ipynb")
    report = _same_user(path)
    assert auto_points(report) == 0, report
    assert any("same-user mode" in n for n in report["notes"]), report["notes"]
    clean_solution_scores_full_marks(tmp_path)


def test_same_user_mode_cannot_plant_a_module_the_grader_imports(lab, tmp_path):
    """Attack 9b: write a module into a courselib install the grader's user owns and make the grader
    import it (by naming it in an answer's __module__): 12/12, and every later grading too."""
    import courselib

    install = tmp_path / "site"
    shutil.copytree(Path(courselib.__file__).parent, install / "courselib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(install))
    path = write(A.plants_a_module(lab), tmp_path / "mallory" / f"{TARGET}.ipynb")
    report = _same_user(path, env)
    assert auto_points(report) == 0, report
    assert report["isolation"].startswith("the grader's own user"), report     # the student's code did run
    assert not list(install.rglob("pwned_by_student.py")), "the student's code wrote into courselib"
    untouched = write(lab, tmp_path / "later" / f"{TARGET}.ipynb")
    assert auto_points(_same_user(untouched, env)) == 0
    clean_solution_scores_full_marks(tmp_path)


# --- 10: the report's temporary file --------------------------------------------------------------------

def test_a_report_is_never_written_through_a_planted_file(lab, tmp_path):
    """Attack 10: --json-file in a world-writable folder; the student's code planted the grader's
    predictable `.NAME.PID.tmp` as a symlink to a file of its own: the stored report became the
    student's file (12/12 after a later rewrite; root followed the symlink). Now such a folder is refused
    before grading (exit 2); a report is written only through a fresh O_EXCL file and a rename."""
    shared = Path(tempfile.mkdtemp(prefix="shared-"))
    try:
        os.chmod(shared, 0o1777)
        path = write(A.plants_the_report_tmp(lab), tmp_path / "sub" / f"{TARGET}.ipynb")
        done, report = run_grader(path, "--source", str(SOLUTION), report_dir=shared)
        target = shared / "report.json"
        if done.returncode == 2:
            assert "other users can write this folder" in done.stderr and not target.exists()
        else:                                   # written: it must be the grader's own, untouched file
            st = os.lstat(target)
            assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022, st
            planted = shared / ".planted-by-student"
            assert not planted.exists() or planted.read_text() == "{}"
    finally:
        shutil.rmtree(shared)
    clean_solution_scores_full_marks(tmp_path)


# --- 11: the per-uid lock file ----------------------------------------------------------------------

def test_a_planted_lock_symlink_creates_nothing(tmp_path):
    """Attack 11: the per-uid lock file in /tmp planted as a symlink: root created an empty file where
    the student chose (e.g. a courselib.py in site-packages). Locks now live in a root-only folder.
    (An old lock file left in /tmp is moved aside for the test and put back.)"""
    import fcntl

    victims = tmp_path / "victims"
    victims.mkdir()
    planted, aside = [], []
    try:
        for uid in range(64_100, 64_140):
            link = Path(tempfile.gettempdir()) / f"courselib-grade-uid-{uid}.lock"
            if os.path.lexists(link) and not link.is_symlink():
                with open(link) as f:
                    try:
                        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)      # held: a grading is running; leave it
                    except OSError:
                        continue
                link.rename(link.with_name(link.name + ".aside"))
                aside.append(link)
            if not os.path.lexists(link):
                link.symlink_to(victims / f"created-{uid}")
                planted.append(link)
        clean_solution_scores_full_marks(tmp_path)
        assert list(victims.iterdir()) == []
    finally:
        for link in planted:
            link.unlink()
        for link in aside:
            link.with_name(link.name + ".aside").rename(link)


# --- and what else the adversarial test found -------------------------------------------------------

def test_an_answer_naming_the_graders_main_module_runs_nothing(lab, tmp_path):
    """An answer whose class claims `__module__ = "courselib.__main__"` made the grader import (run) its own
    CLI again. The grader never imports a module a student's object names."""
    path = write(A.names_the_graders_main(lab), tmp_path / f"{TARGET}.ipynb")
    probe = ("import json, sys\nfrom courselib.grading.grade import grade\n"
             "report = grade(sys.argv[1], source=sys.argv[2])\n"
             "print(json.dumps({'main': 'courselib.__main__' in sys.modules, 'report': report.to_dict()}))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(path), str(SOLUTION)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    out = json.loads(done.stdout)
    assert out["main"] is False and auto_points(out["report"]) == 0
    clean_solution_scores_full_marks(tmp_path)


def test_a_deeply_nested_message_on_the_socket_ends_cleanly(lab, tmp_path):
    """Deeply nested JSON on the worker's socket ended the grading with a raw RecursionError and no report."""
    path = write(A.sends_a_deep_message(lab), tmp_path / f"{TARGET}.ipynb")
    done, report = run_grader(path, "--source", str(SOLUTION))
    assert done.returncode == 0 and report is not None, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and auto_points(report) == 0
    clean_solution_scores_full_marks(tmp_path)


def test_control_characters_never_reach_a_terminal_or_a_summary(lab, tmp_path):
    """An exception class name with CR, LF and ESC drew "total 12/12" in the text report and the Actions
    summary. Every string from the student's process is escaped, in every output format."""
    path = write(A.forges_report_lines(lab), tmp_path / "sub" / f"{TARGET}.ipynb")
    done, report = run_grader(path, "--source", str(SOLUTION))
    assert done.returncode == 0, done.stderr
    for text in (done.stdout, json.dumps(report)):
        assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert not [ln for ln in done.stdout.splitlines() if ln.strip().startswith("total 12/12")], done.stdout
    assert [ln for ln in done.stdout.splitlines() if ln.strip().startswith("total 0/12")]
    grades = tmp_path / "_grades"
    grades.mkdir()
    shutil.copyfile(tmp_path / "sub" / "report.json", grades / f"{TARGET}.json")
    summary = subprocess.run([sys.executable, str(ROOT / ".github" / "classroom" / "grades.py"), "summary",
                              str(grades)], capture_output=True, text=True)
    assert summary.returncode == 0, summary.stderr
    assert "\x1b" not in summary.stdout and "<img" not in summary.stdout and "\r" not in summary.stdout
    assert "**all passed**" not in summary.stdout
    clean_solution_scores_full_marks(tmp_path)


def test_home_and_tmpdir_are_private_writable_and_gone_afterwards(tmp_path):
    """An honest answer may use $HOME and $TMPDIR (they were unusable), and a grading leaves nothing in
    the shared /tmp that the next student could read (it left an IPython folder)."""
    def owned_by_sandbox_users() -> set[str]:
        out = set()
        for entry in os.scandir(tempfile.gettempdir()):
            try:
                if 64_100 <= entry.stat(follow_symlinks=False).st_uid < 64_900:
                    out.add(entry.name)
            except OSError:
                pass
        return out

    before = owned_by_sandbox_users()
    nb = nbformat.read(SOLUTION, 4)
    first = next(c for c in nb.cells if c.cell_type == "code" and "# BEGIN SOLUTION" in c.source)
    first.source = ("import os, tempfile\n"
                    "with tempfile.NamedTemporaryFile('w') as _f:\n    _f.write('scratch')\n"
                    "with open(os.path.expanduser('~/notes.txt'), 'w') as _f:\n    _f.write('mine')\n"
                    "assert os.path.expanduser('~') != '/' and os.access(tempfile.gettempdir(), os.W_OK)\n"
                    + first.source)
    path = write(nb, tmp_path / f"{TARGET}.ipynb")
    done, report = run_grader(path, "--source", str(SOLUTION))
    assert done.returncode == 0 and report["total"] == MAX, (done.stderr, report)
    assert owned_by_sandbox_users() <= before


# --- 7: the student's own repository's workflow -----------------------------------------------------

def _workflow_steps() -> list[dict]:
    import yaml

    return yaml.safe_load((ROOT / ".github" / "workflows" / "grade.yml").read_text())["jobs"]["grade"]["steps"]


def test_the_workflow_grades_every_lab_of_the_course_from_an_empty_grades_folder(tmp_path):
    """Attack 7: in their own repository a student deletes labs/08-… and commits a forged
    _grades/08-gang-cost.json (12/12): the Actions step read it. Now _grades/ starts empty and every lab
    the course has is graded: the deleted one scores 0 and the job fails."""
    repo = tmp_path / "student"
    shutil.copytree(ROOT / "labs", repo / "labs")
    shutil.copytree(ROOT / ".github", repo / ".github")
    (repo / ".venv").symlink_to(ROOT / ".venv")
    (repo / "labs" / f"{TARGET}.ipynb").unlink()
    (repo / "_grades").mkdir()
    forged = {"lab": TARGET, "total": 12, "max": 12, "manual": 0, "notes": [],
              "questions": [{"question": "q1", "kind": "auto", "points": 12, "max_points": 12, "passed": True,
                             "feedback": ""}]}
    (repo / "_grades" / f"{TARGET}.json").write_text(json.dumps(forged))
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "sudo").write_text('#!/bin/sh\nexec "$@"\n')        # the runner's sudo; we are root already
    (shim / "sudo").chmod(0o755)
    summary, envfile = tmp_path / "summary.md", tmp_path / "env"
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", GITHUB_STEP_SUMMARY=str(summary),
               GITHUB_ENV=str(envfile), COURSE_REPOSITORY="", COURSE_COMMIT="", COURSE_CHECKOUT=str(tmp_path / "none"))
    steps = _workflow_steps()
    grading = next(s for s in steps if s.get("name", "").startswith("Grade every lab the course has"))
    # only the untouched labs are graded here (each scores 0 quickly); the point is what the summary counts
    done = subprocess.run(["bash", "-c", grading["run"]], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    table = summary.read_text()
    assert f"labs/{TARGET}.ipynb: missing; it scores 0" in done.stdout
    assert f"| {TARGET.replace('-', '-')} | q1 | auto | 0/1 |" in table.replace("\\-", "-"), table
    assert "12/12" not in table.split("\n", 1)[0]
    env.update(dict(line.split("=", 1) for line in envfile.read_text().splitlines()))
    check = next(s for s in steps if s.get("name") == "Every auto-graded question passed")
    done = subprocess.run(["bash", "-c", check["run"]], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and f"{TARGET} q1" in done.stdout
    assert not (repo / "_grades" / f"{TARGET}.json").exists()          # the forgery is gone
