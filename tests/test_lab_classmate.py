"""A classmate's answers are wrong for you (issue 32, A12), except where they cannot be by design.

For every lab and several pairs of seeds (A, B): seed A's reference answers, run and typed in as literal
values (what a student copies from a classmate's finished notebook), go into seed B's student lab, which
the instructor's grader then grades with the hidden checks. Every auto-graded question must fail, except
those named in :data:`BY_DESIGN`, which is the list book/instructors.md gives under "Per-student
variants" (the last test holds the two equal). A question whose answer is a program, not a value, keeps
the reference code: a program that reads the lab's numbers is right for every seed, so such questions
are on the list too.

Each pair is one grading of one notebook (1-4 s); the solved namespaces run without a kernel.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import io
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from lab_answers import seeded_lab  # noqa: E402

from courselib.grading import build, markers, variant  # noqa: E402
from courselib.grading.grade import grade  # noqa: E402

nbformat = pytest.importorskip("nbformat")
ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
NAMES = [p.stem for p in SOLUTIONS]

#: (the seed whose answers are copied, the seed that hands them in)
PAIRS = ((0, 7), (23, 0), (11, 3))

#: the auto-graded questions a classmate's answer passes by design, and why (book/instructors.md names
#: the same ones, with the same reasons, in words)
BY_DESIGN: dict[tuple[str, str], str] = {
    ("01-namespaces-cgroups", "q2"): "facts the same in every container: one more NSpid number, one kernel",
    ("03-oom-killer", "q4"): "a fact: a SIGKILLed container exits 137, reason OOMKilled",
    ("03-oom-killer", "q5"): "the real kernel's fixed experiment, the same run for everyone",
    ("06-gang-deadlock", "q1"): "a program: the rival job is written from the lab's own numbers",
    ("07-barrier", "q1"): "a multiple choice",
    ("07-barrier", "q2"): "a program: the lines of AllReduce.arrive",
    ("08-gang-cost", "q1"): "a program: idle_cost and compare, run on the lab's own numbers",
    ("09-capstone", "q1"): "the student's own configuration, a choice",
}


def _literal(value) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


@functools.lru_cache(maxsize=None)
def _questions(path: Path) -> dict[str, tuple[str, ...]]:
    """Each auto-graded question and its answer names."""
    _, qs = build.build_lab(nbformat.read(path, 4), str(path))[:2]
    return {q.name: tuple(q.answers) for q in qs if not q.manual}


@functools.lru_cache(maxsize=None)
def solved(path: Path, seed: int) -> dict:
    """Seed ``seed``'s solved lab run without a kernel: given cells and reference answers, no checks."""
    nb = nbformat.reads(build.variant_text(nbformat.read(path, 4), str(path), seed, solved=True)[0], 4)
    skip = {markers.SOLUTION_TAG, markers.HIDDEN_TAG, markers.DEMO_TAG, variant.VARIANT_TAG}
    ns: dict = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and not markers.is_check(cell) and not skip & set(markers.tags(cell)):
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(markers.solution_source(cell.source, path.name), path.name, "exec"), ns)  # noqa: S102
    return ns


def copied_answers(path: Path, seed: int) -> dict[str, str]:
    """Seed ``seed``'s answers as a classmate types them in: question -> ``name = literal`` lines. A
    question whose answer is not a plain value (a function, a class's lines) is left out: the lab then
    keeps the reference code."""
    ns = solved(path, seed)
    out = {}
    for q, names in _questions(path).items():
        if all(a in ns and _literal(ns[a]) for a in names):     # a name local to a method is not a value
            out[q] = "".join(f"{a} = {ns[a]!r}\n" for a in names)
    return out


def passes_with_classmates(path: Path, a: int, b: int, folder: Path) -> tuple[set[str], set[str]]:
    """The auto-graded questions seed ``a``'s copied answers pass in seed ``b``'s lab, and the questions
    that kept the reference code."""
    answers = copied_answers(path, a)
    lab = seeded_lab(path, b, folder / f"{a}-in-{b}" / path.name, answers)
    report = grade(lab, source=path)
    assert report.seed == b
    passed = {r.question for r in report.questions if r.kind == "auto" and r.passed}
    return passed, set(_questions(path)) - set(answers)


@pytest.mark.parametrize("name", NAMES)
def test_a_classmates_answers_fail_every_question_not_named_by_design(name, tmp_path):
    path = ROOT / "solutions" / f"{name}.ipynb"
    named = {q for (lab, q) in BY_DESIGN if lab == name}
    wrong = []
    for a, b in PAIRS:
        passed, code = passes_with_classmates(path, a, b, tmp_path)
        assert code <= named, f"{name}: {sorted(code - named)} have answers that are not values: name them"
        if passed - named:
            wrong.append(f"seed {a}'s answers pass seed {b}'s "
                         + ", ".join(q + (" (by design)" if q in named else "") for q in sorted(passed)))
    assert not wrong, f"{name}: " + "; ".join(wrong)


def test_every_question_named_by_design_exists_and_is_auto_graded():
    for lab, q in BY_DESIGN:
        assert q in _questions(ROOT / "solutions" / f"{lab}.ipynb"), (lab, q)


def instructors_list(text: str) -> set[tuple[str, str]]:
    """The questions book/instructors.md names as the same for every seed: the bullets "Lab N, question M"
    of the list under "Per-student variants"."""
    section = text.split("### Per-student variants", 1)[1].split("\n### ", 1)[0]
    start = section.find("same for every student")
    if start < 0:
        return set()
    by_number = {int(re.match(r"\d+", n).group()): n for n in NAMES}
    found = set()
    for line in section[start:].splitlines():
        for lab, qs in re.findall(r"^- \*\*Lab (\d+), questions? ([\d and,]+)\*\*", line):
            for q in re.findall(r"\d+", qs):
                found.add((by_number[int(lab)], f"q{q}"))
    return found


def test_the_by_design_list_is_the_one_instructors_md_names():
    page = (ROOT / "book" / "instructors.md").read_text()
    assert instructors_list(page) == set(BY_DESIGN)
    section = " ".join(page.split("### Per-student variants", 1)[1].split("\n### ", 1)[0].split())
    claim = next(s for s in section.split(". ") if "wrong for them" in s)
    assert "except" in claim, f"the page says without exception: {claim!r}"


#: The copies that passed by chance in session 11's count (seed a = 0-5 typed into seed b = 1-12, 67 pairs a
#: lab, hidden checks in process): an answer with few possible values, so two seeds drew the same one. Each
#: question now draws from more values or asks for more of the mechanism (Lab 4 q1: the steps each of the
#: four edits rebuilds; q3 and Lab 6 q4: also a count the mechanism gives), and each of these copies fails.
CHANCE = {
    ("01-namespaces-cgroups", "q1"): ((4, 1), (5, 1), (1, 4), (5, 4), (1, 5), (4, 5), (2, 6), (3, 7), (0, 8),
                                      (1, 10), (4, 10), (5, 10), (2, 11)),
    ("01-namespaces-cgroups", "q3"): ((2, 6), (2, 10)),
    ("01-namespaces-cgroups", "q4"): ((1, 6), (1, 10)),
    ("01-namespaces-cgroups", "q5"): ((1, 9), (2, 12)),
    ("04-images", "q1"): ((3, 2), (2, 3), (0, 4), (5, 4), (0, 5), (4, 5), (1, 7), (2, 8), (3, 8), (0, 11),
                          (4, 11), (5, 11), (1, 12)),
    ("04-images", "q3"): ((3, 7), (3, 10), (5, 12)),
    ("05-slurm", "q3"): ((3, 1), (1, 3)),
    ("06-gang-deadlock", "q3"): ((5, 4), (4, 5)),
    ("06-gang-deadlock", "q4"): ((2, 1), (1, 2), (0, 3), (1, 7), (2, 7), (4, 8), (1, 11), (2, 11), (0, 12), (3, 12)),
    ("06-gang-deadlock", "q6"): ((1, 6),),
    ("07-barrier", "q3"): ((2, 6),),
    ("09-capstone", "q2"): ((4, 3), (3, 4), (2, 6)),
    ("09-capstone", "q4"): ((2, 7),),
}


@pytest.mark.parametrize("name, question", sorted(CHANCE), ids=[f"{n}-{q}" for n, q in sorted(CHANCE)])
def test_the_copies_that_agreed_by_chance_now_fail(name, question):
    from lab_answers import hidden_feedback

    path = ROOT / "solutions" / f"{name}.ipynb"
    passed = []
    for a, b in CHANCE[name, question]:
        mine, theirs = solved(path, a), dict(solved(path, b))
        names = _questions(path)[question]
        copied = {n: mine[n] for n in names}
        assert all(_literal(v) for v in copied.values()), (name, question, copied)
        if hidden_feedback(path, theirs, question, **copied) is None:
            passed.append((a, b))
    assert not passed, f"{name} {question}: seed a's answer passes seed b's check for (a, b) in {passed}"
