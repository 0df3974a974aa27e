"""`courselib grade --many DIR -j N --gradebook FILE.csv` (issue 33) on a class of 30 submissions (tests/
grading_class.py): each graded in its own sandbox, a hanging or crashing submission costs only its own
points, the one that attacks the grader earns nothing, a symlinked submission is refused, nothing is left
running, the gradebook and one report per student are written, and a second run resumes (it regrades
only what changed)."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from courselib.grading.sandbox import UID_RANGE, processes

from grading_class import LAB, make_class

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the grader runs the student's code as another user "
                                                            "only as root")]


def many(folder: Path, book: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "courselib", "grade", "--many", str(folder), "--gradebook", str(book),
                           "--source", str(ROOT / "solutions"), "--lab", LAB, "--timeout", "4", "--time-limit", "120",
                           *extra], capture_output=True, text=True, timeout=3600, cwd=ROOT)


def rows(book: Path) -> dict[str, dict]:
    with open(book, newline="") as f:
        return {r["student"]: r for r in csv.DictReader(f)}


def test_a_class_of_30_graded_two_at_a_time(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    expected = make_class(ROOT, folder)
    book = tmp_path / "grades.csv"
    done = many(folder, book, "-j", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    got = rows(book)
    assert set(got) == set(expected)
    for student, points in expected.items():
        row = got[student]
        if points is None:
            assert row["status"].startswith("not graded"), row
            assert row["total"] == "0"
        else:
            assert (int(row["total"]), row["status"]) == (points, "graded"), (student, row)
            assert row["max"] == "12" and row["manual_points"] == "3"
    assert "symbolic link" in got["linker"]["status"] and "not a notebook" in got["notjson"]["status"]
    assert got["hangs"]["q1"] == "0" and got["exits"]["q3"] == "0"
    reports = tmp_path / "grades-reports"
    assert (reports / f"solved00.{LAB}.txt").read_text().rstrip().splitlines()[-1].strip().startswith("total 12/12")
    assert len(list(reports.glob("*.json"))) == 29            # every student but the symlinked 'submission'
    # nothing of any student's is left running
    assert not [p for p in processes() if p.uid in UID_RANGE and not p.zombie]
    # resumable: a second run keeps every report whose submission did not change, regrades the one that did
    (folder / "untouched0" / "labs" / f"{LAB}.ipynb").write_bytes(
        (folder / "solved00" / "labs" / f"{LAB}.ipynb").read_bytes())
    again = many(folder, book, "-j", "2")
    assert again.returncode == 0, again.stderr[-3000:]
    kept = [ln for ln in again.stdout.splitlines() if "kept from an earlier run" in ln]
    assert len(kept) == 28 and not any("untouched0 " in ln for ln in kept), again.stdout
    assert rows(book)["untouched0"]["total"] == "12"
