"""Read the JSON reports `courselib grade LAB --json-file DIR/LAB.json` wrote (standard library only).

    python3 .github/classroom/grades.py summary DIR          # a Markdown table: every lab, every question
    python3 .github/classroom/grades.py question DIR LAB Q   # exit 0 iff question Q of LAB passed

`question` is what each GitHub Classroom test runs (.github/workflows/classroom.yml): the labs are
graded once, and each Classroom test only reads its question's result and prints its feedback.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def load(folder: Path, lab: str) -> dict:
    path = folder / f"{lab}.json"
    if not path.is_file():
        sys.exit(f"{path}: no grade report (did the grading step run?)")
    return json.loads(path.read_text(encoding="utf-8"))


def summary(folder: Path) -> str:
    rows = ["| Lab | Question | Points | Feedback |", "|---|---|---|---|"]
    total = maximum = 0
    for path in sorted(folder.glob("*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        for q in report["questions"]:
            feedback = (q["feedback"] or "ok").replace("|", "\\|")
            rows.append(f"| {path.stem} | {q['question']} | {q['points']}/{q['max_points']} | {feedback} |")
        total, maximum = total + report["total"], maximum + report["max"]
        for note in report.get("notes", []):
            rows.append(f"| {path.stem} | note | | {note} |")
    return "\n".join([f"## Lab grades: {total}/{maximum}", "", *rows, ""])


def question(folder: Path, lab: str, name: str) -> int:
    report = load(folder, lab)
    for q in report["questions"]:
        if q["question"] == name:
            print(f"{lab} {name}: {q['points']}/{q['max_points']}" + (f"  {q['feedback']}" if q["feedback"] else ""))
            return 0 if q["passed"] else 1
    print(f"{lab}: no question {name!r} in its report")
    return 1


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "summary":
        print(summary(Path(argv[1])))
        return 0
    if len(argv) == 4 and argv[0] == "question":
        return question(Path(argv[1]), argv[2], argv[3])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
