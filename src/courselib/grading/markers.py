"""The lab format: where the answers are, which cells check them, and what a stub looks like.

An **answer region** is a block of lines in a code cell between ``# BEGIN SOLUTION`` and
``# END SOLUTION`` (the nbgrader convention). In the student lab the region becomes one stub line
per answer variable the region assigns, ``name = ...  # YOUR ANSWER HERE``, so the untouched lab
still *runs* (an ``Ellipsis`` is a value) while its check fails with "not answered yet".
Names starting with ``_`` are the solution's scratch work and get no stub.

A **check cell** carries ``{"course": {"question": "q1", "points": 2}}`` in its metadata and the
tag ``check``; it raises ``AssertionError`` with feedback when the answer is wrong.
A cell tagged ``solution`` (an explanation, a worked alternative) exists only in the solution.
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
_MARKER = re.compile(r"^(\s*)# (BEGIN|END) SOLUTION\s*$")


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


def stub_source(source: str, where: str) -> tuple[str, list[str]]:
    """The student's version of an answer cell, and the answer variables it stubs."""
    lines: list[str] = []
    names: list[str] = []
    for part in _split(source, where):
        if isinstance(part, Region):
            for name in answer_names(part, where):
                lines.append(f"{part.indent}{name} = ...  {STUB_COMMENT}")
                names.append(name)
        else:
            lines.append(part)
    return "\n".join(lines), names


def solution_source(source: str, where: str) -> str:
    """The answer cell with its markers removed (the worked answer, as a student would write it)."""
    lines: list[str] = []
    for part in _split(source, where):
        if isinstance(part, Region):
            lines.extend(part.lines)
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
