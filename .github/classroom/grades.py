"""Read the JSON reports `courselib grade LAB --json-file DIR/LAB.json` wrote (run it with courselib's Python).

    python grades.py labs MANIFEST                      # the course's labs, one name a line
    python grades.py summary DIR [--labs MANIFEST]      # a Markdown table: every lab, every question
    python grades.py question DIR LAB Q                 # exit 0 iff question Q of LAB passed
    python grades.py check DIR [--labs MANIFEST]        # exit 0 iff every auto-graded question passed

With ``--labs`` (the course's labs/manifest.json, from the instructor's repository where the workflow
can fetch it), every lab of the course counts: a lab with no report — deleted from the repository,
or not gradable — scores 0 of its points, and a report for a lab the course does not have is ignored.
The workflow empties DIR before grading, so nothing committed by the student is ever read.

Every string of a report may hold the student's words: it is escaped for Markdown and HTML here
(courselib.grading.safe), on top of the escaping the grader did. Auto-graded points, points held
back for the instructor's hidden checks, and points that need manual grading are always shown apart.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from courselib.grading.grade import held_back_feedback, total_line
from courselib.grading.safe import markdown as md


def course_labs(manifest: Path) -> dict[str, dict]:
    """The course's labs and their questions, from its manifest (`courselib labs build` writes it)."""
    data = json.loads(manifest.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("labs"), dict):
        sys.exit(f"{manifest}: not a lab manifest (rebuild it with `courselib labs build`)")
    return data["labs"]


def load(folder: Path, lab: str) -> dict | None:
    path = folder / f"{lab}.json"
    if not path.is_file() or path.is_symlink():
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or report.get("lab") != lab or not isinstance(report.get("questions"), list):
        return None
    return report


def _missing(lab: str, spec: dict) -> dict:
    """The report of a lab the course has and the repository does not (or that could not be graded): 0."""
    questions = []
    for q in spec.get("questions", []):
        manual = bool(q.get("manual"))
        questions.append({"question": q["name"], "kind": "manual" if manual else "auto",
                          "points": None if manual else 0, "max_points": q["points"], "passed": None if manual else False,
                          "feedback": "not graded: this lab has no report (it is missing from the repository, "
                                      "or it could not be graded)"})
    auto = [q for q in questions if q["kind"] == "auto"]
    return {"lab": lab, "questions": questions, "total": 0, "max": sum(q["max_points"] for q in auto),
            "manual": sum(q["max_points"] for q in questions if q["kind"] == "manual"), "held_back": 0,
            "notes": ["no report for this lab: it scores 0"]}


def reports(folder: Path, manifest: Path | None) -> list[tuple[str, dict]]:
    if manifest is None:
        names = sorted(p.stem for p in folder.glob("*.json"))
        return [(n, r) for n in names if (r := load(folder, n)) is not None]
    return [(lab, load(folder, lab) or _missing(lab, spec)) for lab, spec in sorted(course_labs(manifest).items())]


def summary(folder: Path, manifest: Path | None = None) -> str:
    rows = ["| Lab | Question | Graded | Points | Feedback |", "|---|---|---|---|---|"]
    total = maximum = manual = held = 0
    for lab, report in reports(folder, manifest):
        name = md(lab, 80)
        for q in report["questions"]:
            feedback = md(q.get("feedback") or "ok")
            mx = int(q.get("max_points", 0))
            if q.get("kind") == "manual":
                rows.append(f"| {name} | {md(q['question'], 40)} | by hand | ?/{mx} | {feedback} |")
            elif q.get("status") == "held back" or q.get("held_back"):
                rows.append(f"| {name} | {md(q['question'], 40)} | held back | 0/{mx} | {md(held_back_feedback(mx))} |")
            else:
                rows.append(f"| {name} | {md(q['question'], 40)} | auto | {int(q.get('points') or 0)}/{mx} | {feedback} |")
        total, maximum = total + int(report.get("total", 0)), maximum + int(report.get("max", 0))
        manual += int(report.get("manual", 0))
        held += int(report.get("held_back", 0))
        for note in report.get("notes", []):
            rows.append(f"| {name} | note | | | {md(note, 600)} |")
    head = "## Lab grades: " + total_line(total, maximum, held, manual).removeprefix("total ")
    return "\n".join([head, "", *rows, ""])


def question(folder: Path, lab: str, name: str) -> int:
    report = load(folder, lab)
    if report is None:
        print(f"{lab}: no grade report (did the grading step run?)")
        return 1
    for q in report["questions"]:
        if q["question"] == name:
            if q.get("kind") == "manual":
                print(f"{lab} {name}: ?/{q['max_points']}  {q['feedback']}")
                return 0
            print(f"{lab} {name}: {q['points']}/{q['max_points']}" + (f"  {q['feedback']}" if q["feedback"] else ""))
            return 0 if q["passed"] or q.get("held_back") else 1
    print(f"{lab}: no question {name!r} in its report")
    return 1


def check(folder: Path, manifest: Path | None = None) -> int:
    failed = []
    for lab, report in reports(folder, manifest):
        failed += [f"{lab} {q['question']}" for q in report["questions"]
                   if q.get("kind") != "manual" and not q.get("passed") and not q.get("held_back")]
    print(f"{len(failed)} auto-graded question(s) not passed" + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    manifest = None
    if "--labs" in argv:
        i = argv.index("--labs")
        if i + 1 >= len(argv):
            print(__doc__.strip(), file=sys.stderr)
            return 2
        manifest = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) == 2 and argv[0] == "labs":
        print("\n".join(sorted(course_labs(Path(argv[1])))))
        return 0
    if len(argv) == 2 and argv[0] == "summary":
        print(summary(Path(argv[1]), manifest))
        return 0
    if len(argv) == 2 and argv[0] == "check":
        return check(Path(argv[1]), manifest)
    if len(argv) == 4 and argv[0] == "question":
        return question(Path(argv[1]), argv[2], argv[3])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
