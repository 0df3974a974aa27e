"""Read the JSON reports `courselib grade LAB --json-file DIR/LAB.json` wrote (standard library only).

    python3 .github/classroom/grades.py summary DIR          # a Markdown table: every lab, every question
    python3 .github/classroom/grades.py question DIR LAB Q   # exit 0 iff question Q of LAB passed
    python3 .github/classroom/grades.py check DIR            # exit 0 iff every auto-graded question passed

`question` is what each GitHub Classroom test runs (.github/workflows/classroom.yml): the labs are
graded once, and each Classroom test only reads its question's result and prints its feedback.
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


def main(argv: list[str]) -> int:
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
