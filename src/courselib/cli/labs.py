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
    z = sub.add_parser("gradescope", help="build a Gradescope autograder zip for a lab (setup.sh, run_autograder, "
                                          "the sandbox and the hidden checks inside)")
    z.add_argument("lab", metavar="LAB", help="a lab name, e.g. 08-gang-cost")
    z.add_argument("-o", "--output", required=True, metavar="ZIP", help="where to write autograder.zip")
    z.add_argument("--solutions", default="solutions", help="folder of solution notebooks (default solutions)")
    z.add_argument("--timeout", type=float, default=30.0, help="seconds per cell of the student's code (default 30)")
    z.add_argument("--isolation", choices=("namespaces", "container"), default="namespaces",
                   help="namespaces (default): the sandbox's private view, if the autograder's container allows "
                        "unshare; container: Gradescope's throw-away container is the sandbox (the student's code as "
                        "a separate user, the instructor's files root-only), for containers that refuse namespaces")
    z.set_defaults(func=_gradescope_zip)
    c5 = sub.add_parser("classroom50", help="write a Classroom 50 autograder folder for a lab (autograder.py, "
                                            "its settings, the instructor's manifest)")
    c5.add_argument("lab", metavar="LAB", help="a lab name, e.g. 08-gang-cost")
    c5.add_argument("-o", "--output", required=True, metavar="DIR", help="the assignment's autograder folder")
    c5.add_argument("--solutions", default="solutions", help="folder of solution notebooks (default solutions)")
    c5.set_defaults(func=_classroom50)
    m = sub.add_parser("manifest", help="write the labs' manifest (the student edition, or --instructor)")
    m.add_argument("--instructor", action="store_true", help="with the hidden checks and rubrics (never give it "
                                                             "to students: an autograder, a private repository)")
    m.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write it")
    m.add_argument("--solutions", default="solutions", help="folder of solution notebooks (default solutions)")
    m.set_defaults(func=_manifest)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    g = subparsers.add_parser("grade", help="grade a lab against the instructor's checks: points and feedback",
                              description="Runs the student's answers from LAB in a separate, isolated process "
                                          "and scores them with the checks of the instructor's source "
                                          "(solutions/ or labs/manifest.json), never with the notebook's own "
                                          "cells. Written answers are reported as needing manual grading. "
                                          "Exit 0 when grading ran, 2 if an input is unreadable.")
    g.add_argument("lab", metavar="LAB.ipynb", nargs="?", help="a lab from labs/ (or a solution from solutions/)")
    g.add_argument("--many", metavar="DIR", help="grade every submission in DIR (DIR/STUDENT.ipynb or DIR/STUDENT/…"
                                                 "/LAB.ipynb), each in its own sandbox; with --gradebook")
    g.add_argument("-j", "--jobs", type=int, default=1, help="with --many: gradings at a time (default 1)")
    g.add_argument("--gradebook", metavar="FILE.csv", help="with --many: the gradebook to write (one row per "
                                                           "student and lab); one report per submission beside it")
    g.add_argument("--roster", metavar="CSV", help="with --many: the seed of each student (columns student,seed)")
    g.add_argument("--reports", metavar="DIR", help="with --many: where the per-submission reports go "
                                                    "(default: FILE-reports/ beside the gradebook)")
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
    g.add_argument("--nbval", action="store_true",
                   help="run the graded copy (your answers, the instructor's checks) under pytest --nbval and take "
                        "the points from nbval's per-cell results; prints the pytest report first")
    g.add_argument("--gradescope", metavar="FILE", help="also write Gradescope's results.json to FILE "
                                                      "(per-question score, max_score, output, visibility)")
    g.add_argument("--lab", dest="lab_name", metavar="NAME", help="grade the notebook as lab NAME (default: its file name)")
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

    if args.many is not None:
        return _grade_many(args)
    if args.lab is None:
        raise InputError("give the notebook to grade (LAB.ipynb), or --many DIR", field="LAB.ipynb")
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
    if args.gradescope:
        results = Path(args.gradescope)
        if results.suffix == ".ipynb" or results.is_symlink() or (results.exists() and not results.is_file()):
            raise InputError("is not a file the grader may write (a notebook, a symlink, a folder)",
                             file=args.gradescope, field="--gradescope", hint="give e.g. results.json")
        check_folder(results.parent, "results.json", "--gradescope")
    options = dict(source=args.source, hidden=args.hidden, timeout=args.timeout, grace=args.grace,
                   time_limit=args.time_limit, seed=args.seed, same_user=args.same_user, lab=args.lab_name)
    if args.nbval:
        from courselib.grading.nbval import grade_with_nbval

        report, pytest_report = grade_with_nbval(args.lab, **options)
        if not args.json:
            print(pytest_report.rstrip() + "\n")
    else:
        report = grade.grade(args.lab, **options)
    # every student process is gone by now: only then is anything written
    if args.json_file:
        atomic_write(target, json.dumps(report.to_dict(), indent=2) + "\n", field="--json-file")
    if args.gradescope:
        from courselib.grading.formats import gradescope

        atomic_write(results, json.dumps(gradescope(report), indent=2) + "\n", field="--gradescope")
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


def _gradescope_zip(args) -> int:
    from courselib.errors import InputError
    from courselib.grading.bundle import gradescope_zip
    from courselib.grading.files import atomic_write

    out = Path(args.output)
    if out.suffix != ".zip":
        raise InputError("the output is not a .zip file", file=args.output, field="-o")
    data = gradescope_zip(args.lab, solutions=Path(args.solutions), root=Path("."), timeout=args.timeout,
                          isolation=args.isolation)
    atomic_write(out, data, mode=0o600, field="-o")
    print(f"{out}: Gradescope autograder for {args.lab} ({len(data) // 1024} KiB; it holds your hidden checks: "
          f"upload it to Gradescope only)")
    return 0


def _classroom50(args) -> int:
    from courselib.grading.bundle import classroom50_files
    from courselib.grading.files import atomic_write

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in classroom50_files(args.lab, solutions=Path(args.solutions)).items():
        atomic_write(out / name, text, field="-o")
    print(f"{out}: Classroom 50 autograder for {args.lab} (autograder.py calls courselib's grader)")
    return 0


def _manifest(args) -> int:
    from courselib.errors import InputError
    from courselib.grading.files import atomic_write
    from courselib.grading.manifest import write_all
    from courselib.grading.source import from_solution

    sources = sorted(Path(args.solutions).glob("*.ipynb"))
    if not sources:
        raise InputError("no solution notebooks (*.ipynb) here", file=args.solutions, field="--solutions")
    text = write_all([from_solution(p) for p in sources], instructor=args.instructor)
    atomic_write(Path(args.output), text, mode=0o600 if args.instructor else 0o644, field="-o")
    print(f"{args.output}: the {'instructor' if args.instructor else 'student'} edition of {len(sources)} labs")
    return 0


def _grade_many(args) -> int:
    from courselib.errors import InputError
    from courselib.grading import many

    if args.lab is not None:
        raise InputError("give either a notebook or --many DIR, not both", field="--many")
    if not args.gradebook:
        raise InputError("--many needs --gradebook FILE.csv", field="--gradebook", hint="e.g. --gradebook grades.csv")
    outcomes = many.run(Path(args.many), gradebook=Path(args.gradebook), jobs=args.jobs, lab=args.lab_name,
                        source=args.source, hidden=args.hidden, timeout=args.timeout, time_limit=args.time_limit,
                        roster=None if args.roster is None else Path(args.roster),
                        reports=None if args.reports is None else Path(args.reports))
    graded = sum(1 for o in outcomes if not o.why)
    print(f"{args.gradebook}: {len(outcomes)} submission(s), {graded} graded, {len(outcomes) - graded} not graded "
          f"(reports in {args.reports or Path(args.gradebook).with_name(Path(args.gradebook).stem + '-reports')})")
    return 0
