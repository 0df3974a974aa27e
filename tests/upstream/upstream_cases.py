"""Upstream test tables, transcribed as data, and the one rule every suite is judged by.

Each ``data/*.yaml`` file holds one suite: the ``sources`` it was transcribed from (repository,
path, commit) and its ``cases``; every case names its source and its ``case`` (the upstream
test's own name: a ``t.Run`` name, a table key, an assertion), an ``input`` and the upstream
``expect``ed answer, in the shape the suite's test module computes from courselib.

A case is **agreed** when courselib computes ``expect``. A case courselib deliberately models
differently carries ``marked: {reason, source, courselib}``: the test then requires courselib
to give ``courselib`` — *and* that this still differs from ``expect``, so a mark that no longer
describes a difference fails too. Cases are transcribed, never code (STYLE: "Use the search
tool ... transcribe test cases as data with provenance").

``python tests/upstream/upstream_cases.py`` prints the table: suite, cases, agreed, marked.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parent / "data"
PROVENANCE = ("repository", "path", "commit")


@dataclass(frozen=True)
class Mark:
    reason: str
    source: str
    courselib: Any


@dataclass(frozen=True)
class Case:
    suite: str
    file: str
    repository: str
    path: str
    commit: str
    case: str
    input: Any
    expect: Any
    marked: Mark | None = None

    @property
    def id(self) -> str:
        return self.case


def load(name: str) -> list[Case]:
    """The cases of ``data/<name>.yaml``, each with its full provenance (a missing field raises)."""
    path = DATA / f"{name}.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    sources = doc["sources"]
    out = []
    for i, c in enumerate(doc["cases"]):
        src = sources[c["source"]]
        missing = [k for k in PROVENANCE if not src.get(k)]
        if missing or not c.get("case") or "expect" not in c:
            raise ValueError(f"{path.name} case {i}: missing {missing or ['case/expect']}")
        m = c.get("marked")
        mark = None
        if m is not None:
            if not (m.get("reason") and m.get("source") and "courselib" in m):
                raise ValueError(f"{path.name} case {c['case']!r}: a mark needs reason, source, courselib")
            mark = Mark(m["reason"], m["source"], m["courselib"])
        out.append(Case(doc["suite"], path.name, src["repository"], src["path"], str(src["commit"]),
                        str(c["case"]), c.get("input"), c["expect"], mark))
    names = [c.case for c in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"{path.name}: case names repeat: {sorted(dup)}")
    return out


def params(name: str):
    """``pytest.param`` per case, with the upstream case name as its id."""
    import pytest
    return [pytest.param(c, id=c.id) for c in load(name)]


def judge(case: Case, got: Any) -> None:
    """Agreed: ``got == expect``. Marked: ``got == marked.courselib != expect``."""
    where = f"{case.repository} {case.path}@{case.commit[:12]} {case.case!r}"
    if case.marked is None:
        assert got == case.expect, f"{where}: upstream expects {case.expect!r}, courselib gives {got!r}"
        return
    assert case.marked.courselib != case.expect, f"{where}: the mark is not a difference"
    assert got == case.marked.courselib, (
        f"{where}: marked as a deliberate difference ({case.marked.reason}) giving "
        f"{case.marked.courselib!r}; courselib now gives {got!r} (upstream: {case.expect!r})")


def suites() -> list[str]:
    return sorted(p.stem for p in DATA.glob("*.yaml"))


def table() -> list[tuple[str, int, int, int]]:
    """(suite, cases, agreed, marked) for every data file: counted from the data, never typed."""
    rows = []
    for name in suites():
        cases = load(name)
        marked = sum(c.marked is not None for c in cases)
        rows.append((cases[0].suite if cases else name, len(cases), len(cases) - marked, marked))
    return rows


def markdown_table() -> str:
    rows = table()
    lines = ["| suite | cases | agreed | marked |", "|---|---:|---:|---:|"]
    lines += [f"| {s} | {n} | {a} | {m} |" for s, n, a, m in rows]
    total = [sum(r[i] for r in rows) for i in (1, 2, 3)]
    lines.append(f"| **all** | {total[0]} | {total[1]} | {total[2]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
    for name in suites():
        for c in load(name):
            if c.marked:
                print(f"- {c.suite} / {c.case}: {c.marked.reason} ({c.marked.source})", file=sys.stdout)
