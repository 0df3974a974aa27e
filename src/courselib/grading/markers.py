"""The lab format: where the answers are, which cells check them, and what a stub looks like.

An **answer region** is a block of lines in a code cell between ``# BEGIN SOLUTION`` and
``# END SOLUTION`` (the nbgrader convention). In the student lab the region becomes one stub line
per answer variable the region assigns, ``name = ...  # YOUR ANSWER HERE``, so the untouched lab
still *runs* (an ``Ellipsis`` is a value) while its check fails with "not answered yet".
Names starting with ``_`` are the solution's scratch work and get no stub.

A **check cell** carries ``{"course": {"question": "q1", "points": 2}}`` in its metadata and the
tag ``check``; it raises ``AssertionError`` with feedback when the answer is wrong. A check that must
also read an earlier question's answer says so with ``"uses": ["config"]`` (the capstone, whose
predictions are the consequences of the student's own configuration): nothing else crosses questions.
A cell tagged ``solution`` (an explanation, a worked alternative) exists only in the solution.

When a region's work is more than assigning names (lab 7's ``AllReduce.arrive`` must also complete
the collective), the instructor writes the stub the student sees as ``# STUB`` lines inside the
region: in the lab the region becomes those lines (without ``# STUB ``), fenced by
``# YOUR ANSWER HERE …`` and ``# END OF YOUR ANSWER``, so the whole region to write is visible.

A **written answer** (graded by hand, nbgrader's "manually graded answer") is a Markdown cell with
``{"course": {"question": "q6", "points": 3, "manual": true}}``: in the lab its text becomes
``YOUR ANSWER HERE``; the solution's text is the model answer, and the rubric sits between
``=== BEGIN MARK SCHEME ===`` and ``=== END MARK SCHEME ===`` (nbgrader's markers).

A code cell tagged ``hidden`` (with ``{"course": {"question": "q2"}}``) is an instructor's extra
check for a question: it never reaches the lab, and ``courselib grade --hidden DIR`` runs it. A code
cell tagged ``demo`` shows what an answer does and is run by neither side of the grader.
"""
from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from dataclasses import dataclass

from courselib.errors import InputError

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"
STUB_COMMENT = "# YOUR ANSWER HERE"
CHECK_TAG = "check"
SOLUTION_TAG = "solution"
HIDDEN_TAG = "hidden"
DEMO_TAG = "demo"
WRITTEN_STUB = "YOUR ANSWER HERE"
BEGIN_RUBRIC = "=== BEGIN MARK SCHEME ==="
END_RUBRIC = "=== END MARK SCHEME ==="
STUB_OPEN = "# YOUR ANSWER HERE: write every line from here to END OF YOUR ANSWER"
STUB_CLOSE = "# END OF YOUR ANSWER"
_MARKER = re.compile(r"^(\s*)# (BEGIN|END) SOLUTION\s*$")
_STUB_LINE = re.compile(r"^(\s*)# STUB(?: (.*))?$")


def checksum(text: str) -> str:
    """A short, stable fingerprint of a cell's source (to tell a stub from a student's edit)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def has_markers(source: str) -> bool:
    return any(_MARKER.match(line) for line in source.splitlines())


@dataclass(frozen=True)
class Region:
    """One answer region: its lines (without the markers), indentation, and where it starts."""

    indent: str
    lines: tuple[str, ...]
    begin_line: int  # 1-based line of ``# BEGIN SOLUTION`` inside the cell


def _split(source: str, where: str) -> list[str | Region]:
    """The cell as plain lines and regions, in order. Unbalanced markers are a located error."""
    out: list[str | Region] = []
    current: list[str] | None = None
    indent, begin = "", 0
    for n, line in enumerate(source.splitlines(), start=1):
        m = _MARKER.match(line)
        if m and m.group(2) == "BEGIN":
            if current is not None:
                raise InputError(f"{BEGIN} inside another solution region (opened on line {begin})",
                                 file=where, line=n, hint=f"close the first one with {END}")
            current, indent, begin = [], m.group(1), n
        elif m:
            if current is None:
                raise InputError(f"{END} without a {BEGIN} before it", file=where, line=n)
            out.append(Region(indent, tuple(current), begin))
            current = None
        elif current is not None:
            current.append(line)
        else:
            out.append(line)
    if current is not None:
        raise InputError(f"{BEGIN} is never closed", file=where, line=begin,
                         hint=f"add a line {END} after the answer")
    return out


def answer_names(region: Region, where: str) -> list[str]:
    """The variables a region assigns at its top level, in order, without ``_``-scratch names."""
    code = textwrap.dedent("\n".join(region.lines))
    try:
        tree = ast.parse(code)
    except SyntaxError as err:
        raise InputError(f"the solution does not parse: {err.msg}", file=where,
                         line=region.begin_line + (err.lineno or 0)) from None
    names: list[str] = []

    def add(target):
        if isinstance(target, ast.Name):
            if not target.id.startswith("_") and target.id not in names:
                names.append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                add(t)

    for node in tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                add(t)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            add(node.target)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            if node.name not in names:
                names.append(node.name)
    if not names:
        raise InputError("the solution region assigns no answer variable, so the lab would have "
                         "nothing to stub", file=where, line=region.begin_line,
                         hint="end the region with e.g. `victim = ...` (names starting with _ are scratch)")
    return names


def explicit_stub(region: Region) -> list[str] | None:
    """The region's ``# STUB`` lines as the student will see them, or None when it has none."""
    out = []
    for line in region.lines:
        m = _STUB_LINE.match(line)
        if m:
            out.append(m.group(1) + m.group(2) if m.group(2) else "")   # "# STUB" alone: a blank line
    return out or None


def stub_source(source: str, where: str) -> tuple[str, list[str]]:
    """The student's version of an answer cell, and the answer variables it stubs."""
    lines: list[str] = []
    names: list[str] = []
    for part in _split(source, where):
        if isinstance(part, Region):
            found = answer_names(part, where)
            explicit = explicit_stub(part)
            if explicit is not None:
                lines.append(part.indent + STUB_OPEN)
                lines.extend(explicit)
                lines.append(part.indent + STUB_CLOSE)
            else:
                lines.extend(f"{part.indent}{name} = ...  {STUB_COMMENT}" for name in found)
            names.extend(found)
        else:
            lines.append(part)
    return "\n".join(lines), names


def rubric(text: str) -> tuple[str, str]:
    """A written answer's solution text split into (model answer, rubric between the mark-scheme lines)."""
    if BEGIN_RUBRIC not in text:
        return text.strip(), ""
    before, _, rest = text.partition(BEGIN_RUBRIC)
    inside, _, after = rest.partition(END_RUBRIC)
    return (before + after).strip(), inside.strip()


def solution_source(source: str, where: str) -> str:
    """The answer cell with its markers (and ``# STUB`` lines) removed: the worked answer, as a student would write it."""
    lines: list[str] = []
    for part in _split(source, where):
        if isinstance(part, Region):
            lines.extend(line for line in part.lines if not _STUB_LINE.match(line))
        else:
            lines.append(part)
    return "\n".join(lines)


def course_meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("course", {})
    return meta if isinstance(meta, dict) else {}


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def is_check(cell) -> bool:
    meta = course_meta(cell)
    return cell.get("cell_type") == "code" and "question" in meta and "points" in meta
