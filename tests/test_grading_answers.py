"""Checks that do not hand out the answer (issue 36, attack 4): a visible check cell — the one in the
student's lab — may check that an answer is there, its type, shape and plausibility, and word the
feedback, but it must not compute the expected value: a student could copy the expression. The
expected value belongs in the question's hidden cells (instructor only), run by the grader.

The rule, read from each lab's manifest: a visible check imports nothing from courselib but
``courselib.grading.checks``, and calls only builtins, those helpers and what it defines itself (a
``@probe`` function's body runs the student's code and may call anything). A lab still to be converted is in ``NOT_YET`` (an expected failure,
strict: remove it from the set in the commit that converts it)."""
from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

from courselib.grading.manifest import read_all

ROOT = Path(__file__).resolve().parents[1]
LABS = read_all(ROOT / "labs" / "manifest.json")
ALLOWED = {"courselib.grading.checks"}
NOT_YET: set[str] = set()     # every lab converted (the labs helper, 2026-12-02)


def _is_probe(node) -> bool:
    return any((isinstance(d, ast.Name) and d.id == "probe") or (isinstance(d, ast.Attribute) and d.attr == "probe")
               for d in node.decorator_list)


def answer_computing_calls(source: str) -> list[str]:
    """What a check cell uses that could compute an answer: a courselib module other than the checks'
    helpers, or a call to a name the cell does not define itself (a model function the lab's given
    cells imported, say). Calls inside a ``@probe`` function run the student's code and are fine."""
    tree = ast.parse(source)
    bound: set[str] = set(dir(builtins))
    found: list[str] = []
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_probe(node):
                skip.update(id(n) for n in ast.walk(node) if n is not node)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("courselib") and a.name not in ALLOWED:
                    found.append(a.name)
                bound.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("courselib") and node.module not in ALLOWED:
                found.append(node.module)
            elif node.module in ALLOWED or not node.module.startswith("courselib"):
                bound.update(a.asname or a.name for a in node.names)
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if node.func.id not in bound:
            found.append(f"{node.func.id}()")
    return sorted(set(found))


def test_the_rule_reads_imports_and_calls():
    assert answer_computing_calls("from courselib.grading.checks import expect\nimport math\nexpect(len([1]) == 1, 'x')") == []
    assert answer_computing_calls("from courselib.model.cost import gang_wait_cost") == ["courselib.model.cost"]
    assert answer_computing_calls("def f():\n    import courselib.sim.gang") == ["courselib.sim.gang"]
    assert answer_computing_calls("want = simulate(W, 'volcano')") == ["simulate()"]          # from a given cell
    assert answer_computing_calls("@probe\ndef _p():\n    return student_fn(1)\n_p()") == []


@pytest.mark.parametrize("lab", [pytest.param(name, marks=pytest.mark.xfail(
    strict=True, reason="visible checks still compute expected values (the labs helper converts them)"))
    if name in NOT_YET else name for name in sorted(LABS)])
def test_visible_checks_compute_no_answer(lab):
    bad = {s.question: answer_computing_calls(s.source) for s in LABS[lab].steps if s.role == "check"}
    bad = {q: mods for q, mods in bad.items() if mods}
    assert not bad, f"{lab}: visible checks that could hand out the answer: {bad}"
