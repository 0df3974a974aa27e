"""Read the JSON reports `courselib grade LAB --json-file DIR/LAB.json` wrote (standard library only).

    python3 .github/classroom/grades.py summary DIR          # a Markdown table: every lab, every question
    python3 .github/classroom/grades.py question DIR LAB Q   # exit 0 iff question Q of LAB passed
    python3 .github/classroom/grades.py check DIR            # exit 0 iff every auto-graded question passed
    python3 .github/classroom/grades.py workflow labs/manifest.json > .github/workflows/classroom.yml

`question` is what each GitHub Classroom test runs (.github/workflows/classroom.yml): the labs are
graded once, and each Classroom test only reads its question's result and prints its feedback.
`workflow` writes that workflow from the labs' manifest (`courselib labs build` writes it), one
Classroom test per auto-graded question with its points; run it whenever a lab changes.
Auto-graded points and points that need manual grading (written answers) are always shown apart:
a written answer is never counted as 0 or as full marks here.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def load(folder: Path, lab: str) -> dict:
    path = folder / f"{lab}.json"
    if not path.is_file():
        sys.exit(f"{path}: no grade report (did the grading step run?)")
    report = json.loads(path.read_text(encoding="utf-8"))
    if report.get("lab") != lab:
        sys.exit(f"{path}: the report is for lab {report.get('lab')!r}, not {lab!r}; it does not count")
    return report


def summary(folder: Path) -> str:
    rows = ["| Lab | Question | Graded | Points | Feedback |", "|---|---|---|---|---|"]
    total = maximum = manual = 0
    for path in sorted(folder.glob("*.json")):
        report = load(folder, path.stem)
        for q in report["questions"]:
            feedback = (q["feedback"] or "ok").replace("|", "\\|").replace("\n", " ")
            if q.get("kind") == "manual":
                rows.append(f"| {path.stem} | {q['question']} | by hand | ?/{q['max_points']} | {feedback} |")
            else:
                rows.append(f"| {path.stem} | {q['question']} | auto | {q['points']}/{q['max_points']} | {feedback} |")
        total, maximum = total + report["total"], maximum + report["max"]
        manual += report.get("manual", 0)
        for note in report.get("notes", []):
            rows.append(f"| {path.stem} | note | | | {note} |")
    head = f"## Lab grades: {total}/{maximum} auto-graded"
    if manual:
        head += f"; {manual} more point(s) need manual grading"
    return "\n".join([head, "", *rows, ""])


def question(folder: Path, lab: str, name: str) -> int:
    report = load(folder, lab)
    for q in report["questions"]:
        if q["question"] == name:
            if q.get("kind") == "manual":
                print(f"{lab} {name}: ?/{q['max_points']}  {q['feedback']}")
                return 0
            print(f"{lab} {name}: {q['points']}/{q['max_points']}" + (f"  {q['feedback']}" if q["feedback"] else ""))
            return 0 if q["passed"] else 1
    print(f"{lab}: no question {name!r} in its report")
    return 1


def check(folder: Path) -> int:
    failed = []
    for path in sorted(folder.glob("*.json")):
        report = load(folder, path.stem)
        failed += [f"{path.stem} {q['question']}" for q in report["questions"]
                   if q.get("kind") != "manual" and not q["passed"]]
    print(f"{len(failed)} auto-graded question(s) not passed" + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


WORKFLOW_HEAD = """\
# GitHub Classroom autograding: one Classroom test per auto-graded lab question, worth its points.
# Written by `python3 .github/classroom/grades.py workflow labs/manifest.json` (do not edit by hand).
# The labs are graded once (`courselib grade`: the instructor's checks from labs/manifest.json, the
# student's code in a separate process as an unprivileged user, hence sudo); each test then reads its
# question's result from _grades/. The Classroom total is the auto-graded total `courselib grade`
# prints, with partial credit; written answers (graded by hand) have no Classroom test and are listed
# in the run's summary with their points. tests/test_labs.py checks that this file is what the
# command writes from the current labs.
name: classroom
on:
  push:
  workflow_dispatch:
  repository_dispatch:
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  run-autograding-tests:
    runs-on: ubuntu-latest
    if: github.actor != 'github-classroom[bot]'
    steps:
      - uses: actions/checkout@v4
        with:
          persist-credentials: false     # no token in .git/config for the student's code to find
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Grade every lab once
        run: |
          make setup
          mkdir -p _grades
          for lab in labs/*.ipynb; do
            sudo .venv/bin/courselib grade "$lab" --json-file "_grades/$(basename "$lab" .ipynb).json"
          done
          python3 .github/classroom/grades.py summary _grades >> "$GITHUB_STEP_SUMMARY"
"""


def workflow(manifest: Path) -> str:
    """classroom.yml for the labs in ``manifest`` (labs/manifest.json)."""
    labs = json.loads(manifest.read_text(encoding="utf-8"))["labs"]
    steps, ids = [], []
    for lab in sorted(labs):
        for q in labs[lab]["questions"]:
            if q.get("manual"):
                continue
            ident = f"lab{lab.split('-', 1)[0]}-{q['name']}"
            ids.append(ident)
            steps.append(f"""\
      - name: {lab} {q['name']}
        id: {ident}
        uses: classroom-resources/autograding-command-grader@v1
        with:
          test-name: {lab} {q['name']}
          command: python3 .github/classroom/grades.py question _grades {lab} {q['name']}
          timeout: 1
          max-score: {q['points']}
""")
    env = "".join(f'          {i.upper()}_RESULTS: "${{{{steps.{i}.outputs.result}}}}"\n' for i in ids)
    reporter = ("      - name: Autograding Reporter\n"
                "        uses: classroom-resources/autograding-grading-reporter@v1\n"
                "        env:\n" + env +
                "        with:\n"
                f"          runners: {','.join(ids)}\n")
    return WORKFLOW_HEAD + "".join(steps) + reporter


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "workflow":
        sys.stdout.write(workflow(Path(argv[1])))
        return 0
    if len(argv) == 2 and argv[0] == "summary":
        print(summary(Path(argv[1])))
        return 0
    if len(argv) == 2 and argv[0] == "check":
        return check(Path(argv[1]))
    if len(argv) == 4 and argv[0] == "question":
        return question(Path(argv[1]), argv[2], argv[3])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
