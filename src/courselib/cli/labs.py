"""``courselib labs build`` and ``courselib grade``: make the student labs, and grade one.

``labs build`` writes ``labs/*.ipynb`` from ``solutions/*.ipynb`` (answers replaced by stubs;
``--check`` only compares and exits 1 when labs/ is out of date). ``grade`` scores a lab's answers
with the instructor's checks (:mod:`courselib.grading.grade`) and prints each question's points and
feedback; it exits 0 whenever grading ran (the score is the result) and 2 when an input cannot be read.
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
    v = sub.add_parser("variant", help="write one student's variant of a lab (its numbers from a seed)",
                       description="Writes the lab for seed S: the parameters cell holds that seed's numbers, the "
                                   "Markdown quotes them, and the seed is recorded in the notebook's metadata "
                                   "(courselib grade checks it). Seed 0 is the default lab.")
    v.add_argument("lab", metavar="LAB", help="a lab name (08-gang-cost) or a solutions/ notebook")
    v.add_argument("--seed", required=True, metavar="S", help="an integer, or a login / student id (hashed to one)")
    v.add_argument("-o", "--output", required=True, metavar="OUT.ipynb", help="where to write it (never over LAB)")
    v.add_argument("--solution", action="store_true", help="write the solved variant (what the tests grade)")
    v.add_argument("--solutions", default="solutions", help="folder of solution notebooks (default solutions)")
    v.set_defaults(func=_variant)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    g = subparsers.add_parser("grade", help="grade a lab against the instructor's checks: points and feedback",
                              description="Runs the student's answers from LAB in a separate, isolated process "
                                          "and scores them with the checks of the instructor's source "
                                          "(solutions/ or labs/manifest.json), never with the notebook's own "
                                          "cells. Written answers are reported as needing manual grading. "
                                          "Exit 0 when grading ran, 2 if an input is unreadable.")
    g.add_argument("lab", metavar="LAB.ipynb", help="a lab from labs/ (or a solution from solutions/)")
    g.add_argument("--source", metavar="PATH", help="the instructor's source: a solutions/ notebook or folder, "
                                                    "or a manifest.json (default: solutions/, then labs/manifest.json)")
    g.add_argument("--hidden", metavar="DIR", help="also run the hidden checks of DIR/LAB.ipynb (the instructor's "
                                                   "notebooks, e.g. solutions/; never in the student template)")
    g.add_argument("--json", action="store_true", help="print one JSON document")
    g.add_argument("--timeout", type=float, default=30.0,
                   help="seconds allowed per cell or call of the student's code (default 30)")
    g.add_argument("--grace", type=float, default=5.0,
                   help="seconds an interrupted cell has before it is killed (default 5)")
    g.add_argument("--time-limit", type=float, default=600.0,
                   help="wall-clock seconds for the whole grading (default 600)")
    g.add_argument("--seed", metavar="S", help="grade against the variant for seed S (an integer, or the login it "
                                               "was made from); default: the seed in the notebook's metadata; a "
                                               "notebook recording another seed is refused")
    g.add_argument("--same-user", action="store_true",
                   help="run the student's code as you (no root needed; a private read-only view all the same): "
                        "for grading your own notebook; the report carries a warning. Without it the grader "
                        "must be root, and runs the student's code as a separate unprivileged user")
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
    import json

    from courselib.cli.main import print_json
    from courselib.errors import InputError
    from courselib.grading import grade
    from courselib.grading.files import atomic_write, check_folder

    if args.json_file:
        target = Path(args.json_file)
        if target.resolve() == Path(args.lab).resolve() or target.suffix == ".ipynb":
            raise InputError("--json-file is a notebook (or the lab itself); the grader never writes a notebook",
                             file=args.lab, field="--json-file", hint="give another path, e.g. grades.json")
        # refused before grading, not after a whole run has been spent
        if target.is_dir():
            raise InputError("is a directory; the report is written to a file", file=args.json_file,
                             field="--json-file", hint=f"give a file name, e.g. {target / 'grades.json'}")
        if not target.parent.is_dir():
            raise InputError("its folder does not exist", file=args.json_file, field="--json-file",
                             hint=f"create {target.parent} first, or give another path")
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise InputError("is not a regular file (a symlink, a FIFO…); not written through", file=args.json_file,
                             field="--json-file")
        check_folder(target.parent, "the report", "--json-file")
    report = grade.grade(args.lab, source=args.source, hidden=args.hidden, timeout=args.timeout,
                         grace=args.grace, time_limit=args.time_limit, seed=args.seed,
                         same_user=args.same_user)
    # every student process is gone by now: only then is anything written
    if args.json_file:
        atomic_write(target, json.dumps(report.to_dict(), indent=2) + "\n", field="--json-file")
    if args.json:
        print_json(report.to_dict())
    else:
        print(grade.format_report(report))
    return 0


def _variant(args) -> int:
    from courselib.errors import InputError
    from courselib.grading import build, variant
    from courselib.grading.notebook import read_notebook

    lab = Path(args.lab)
    solution = lab if lab.suffix == ".ipynb" and lab.parent.name == Path(args.solutions).name else \
        Path(args.solutions) / f"{variant.lab_name(args.lab)}.ipynb"
    if not solution.is_file():
        raise InputError("no such solution notebook", file=str(solution), field="LAB",
                         hint="give a lab name such as 08-gang-cost, run from the course's root (with solutions/)")
    out = Path(args.output)
    if out.suffix != ".ipynb":
        raise InputError("the output is not an .ipynb file", file=args.output, field="-o")
    if out.exists() and out.resolve() == solution.resolve():
        raise InputError("would overwrite the solution", file=args.output, field="-o")
    seed = variant.seed_of(args.seed)
    text, has_variants = build.variant_text(read_notebook(solution, "solution"), str(solution), seed,
                                            solved=args.solution)
    build.write_private(out, text)
    what = "solved variant" if args.solution else "lab"
    print(f"{out}: the {what} {solution.stem} for seed {seed}" +
          ("" if has_variants or not seed else " (this lab has no variants yet: the numbers are seed 0's)"))
    return 0
