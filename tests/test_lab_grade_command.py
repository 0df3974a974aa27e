"""One command grades a student's own lab, and every page that tells a student how says it the same way
(issue 32): ``courselib grade --same-user labs/NN-name.ipynb`` (``courselib.course.GRADE_OWN``), typed in a
terminal in the course's folder. ``make lab`` puts .venv/bin first on its JupyterLab's PATH, as Binder and
the class hub have courselib on theirs; a shell of one's own needs ``source .venv/bin/activate``.

Before: every lab's header said ``courselib grade --same-user labs/…`` while labs/README.md said
``.venv/bin/courselib grade --same-user …``, the intro ``courselib grade labs/NN-name.ipynb`` (no
``--same-user``: "not graded: the grader is not root"), and ``make lab`` left .venv/bin off the PATH, so the
header's command was not found in the terminal of the JupyterLab the README opens.
:func:`test_every_page_says_the_one_command` failed on labs/README.md, README.md and the intro.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from courselib import course

ROOT = Path(__file__).resolve().parents[1]
#: the pages that tell a student how to grade their own lab (each has the command at least once)
PAGES = ("labs/README.md", "README.md", "book/intro.md", "book/instructors.md")
#: a grading command as a page writes it, with whatever comes before `courselib` on its word
COMMAND = re.compile(r"(\S*)courselib grade (--same-user )?(labs/[\w.-]+\.ipynb|labs/[A-Z]+[\w.-]*\.ipynb)?")


def header(path: Path) -> str:
    return "".join(json.loads(path.read_text())["cells"][0]["source"])


def student_commands(text: str) -> list[str]:
    """Every ``courselib grade --same-user`` command in ``text``, with what precedes it on its word."""
    return [m.group(0) for m in COMMAND.finditer(text) if m.group(2)]


@pytest.mark.parametrize("lab", course.LABS, ids=lambda lab: lab.doc)
def test_each_lab_header_shows_the_command_in_both_editions(lab):
    name = lab.doc.split("/")[-1]
    for folder in ("solutions", "labs"):
        path = ROOT / folder / f"{name}.ipynb"
        if not path.is_file():
            continue
        text = header(path)
        assert f"\n    {lab.grade_command}" in text, f"{folder}/{name}: the header does not show {lab.grade_command!r}"
        assert student_commands(text) == [lab.grade_command], (folder, name, student_commands(text))
        assert "terminal in the course's folder" in text, (folder, name)


def test_every_page_says_the_one_command():
    """Each page's own-lab command is GRADE_OWN for some lab (or a placeholder name), with nothing before it."""
    allowed = {course.GRADE_OWN.format(lab=n) for n in ("NN-name", "LAB")}
    allowed |= {lab.grade_command for lab in course.LABS}
    for page in PAGES:
        found = student_commands((ROOT / page).read_text())
        assert found, f"{page}: no `courselib grade --same-user` command"
        wrong = [c.lstrip("`") for c in found if c.lstrip("`") not in allowed]
        assert not wrong, f"{page}: {wrong} is not the command the labs show ({course.GRADE_OWN})"


def test_the_labs_readme_says_where_to_type_it():
    text = (ROOT / "labs" / "README.md").read_text()
    assert "source .venv/bin/activate" in text and "File → New → Terminal" in text


def _make_lab_path() -> str:
    dry = subprocess.run(["make", "-n", "-o", ".venv/.installed", "lab"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    line = next(line for line in dry.stdout.splitlines() if "jupyter lab" in line)
    m = re.match(r'PATH="([^"]*):\$PATH" ', line)
    assert m, f"make lab does not put .venv/bin on JupyterLab's PATH: {line}"
    return m.group(1)


def test_make_lab_puts_courselib_on_its_terminals_path():
    assert Path(_make_lab_path()) == ROOT / ".venv" / "bin"


def test_the_headers_command_grades_in_the_terminal_make_lab_gives(tmp_path):
    """The lab's own words, run by a shell with the PATH of `make lab`'s JupyterLab and nothing else of ours."""
    if not (ROOT / ".venv" / "bin" / "courselib").exists():
        pytest.skip("no .venv here (make setup)")
    lab = course.LABS[0]
    env = {"HOME": str(tmp_path), "PATH": f"{_make_lab_path()}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = subprocess.run(["bash", "-c", lab.grade_command + " --json"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    report = json.loads(done.stdout)
    assert (report["file"], report["lab"]) == (f"{lab.doc}.ipynb", lab.doc.split("/")[-1])
    assert report["total"] == 0 and report["max"] > 0 and "same-user mode" in report["isolation"]
