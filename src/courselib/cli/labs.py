"""``courselib labs build`` and ``courselib grade``: make the student labs, and grade one.

``labs build`` writes ``labs/*.ipynb`` from ``solutions/*.ipynb`` (answers replaced by stubs;
``--check`` only compares and exits 1 when labs/ is out of date). ``grade`` executes a copy of a
lab and prints each question's points and feedback; it exits 0 whenever grading ran (the score is
the result) and 2 when the file cannot be read.
"""
from __future__ import annotations

from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("labs", help="build the student labs from solutions/",
                              description="Student labs are generated: edit solutions/, then build.")
    sub = p.add_subparsers(dest="labs_command", metavar="COMMAND")
    b = sub.add_parser("build", help="write labs/*.ipynb from solutions/*.ipynb (answers become stubs)")
    b.add_argument("--check", action="store_true", help="write nothing; exit 1 if labs/ is out of date")
    b.add_argument("--force", action="store_true", help="overwrite labs even if a student has answered in them")
    b.add_argument("--solutions", default="solutions", help="folder of solution notebooks (default solutions)")
    b.add_argument("--labs", default="labs", help="folder of student labs (default labs)")
    b.set_defaults(func=_build)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    g = subparsers.add_parser("grade", help="grade a lab: run a copy, print each question's points and feedback",
                              description="Executes a copy of LAB (never the file itself) and scores each "
                                          "question's check cell. Exit 0 when grading ran, 2 if LAB is unreadable.")
    g.add_argument("lab", metavar="LAB.ipynb", help="a lab from labs/ (or a solution from solutions/)")
    g.add_argument("--json", action="store_true", help="print one JSON document")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per cell (default 60)")
    g.add_argument("--json-file", metavar="PATH", help="also write the JSON report to PATH (CI: grade once, "
                                                       "print the text, keep the data); refuses to overwrite LAB")
    g.set_defaults(func=_grade)


def _build(args) -> int:
    from courselib.grading import build

    outcomes = build.build_all(Path(args.solutions), Path(args.labs), check=args.check, force=args.force)
    bad = 0
    for o in outcomes:
        if o.status == build.REFUSED:
            print(f"courselib: {o.path}: not overwritten ({o.detail}); keep your work elsewhere "
                  f"or run `courselib labs build --force`")
            bad += 1
        elif o.status == build.STALE:
            print(f"{o.path}: out of date ({o.detail}); run `make labs`")
            bad += 1
        elif o.status == build.ORPHAN:
            print(f"{o.path}: {o.status}, {o.detail}" + ("" if args.check else " (left alone)"))
            bad += args.check
        else:
            print(f"{o.path}: {o.status}")
    if args.check and not bad:
        print(f"{args.labs}/ is in step with {args.solutions}/")
    return 1 if bad else 0


def _grade(args) -> int:
    from courselib.cli.main import print_json
    from courselib.grading import grade

    from courselib.errors import InputError

    if args.json_file and Path(args.json_file).resolve() == Path(args.lab).resolve():
        raise InputError("--json-file is the lab itself; the grader never writes the graded file",
                         file=args.lab, field="--json-file", hint="give another path, e.g. grades.json")
    report = grade.grade(args.lab, timeout=args.timeout)
    if args.json_file:
        import json

        Path(args.json_file).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    if args.json:
        print_json(report.to_dict())
    else:
        print(grade.format_report(report))
    return 0
