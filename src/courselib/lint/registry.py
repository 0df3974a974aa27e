"""The lint rules' registry: one entry per code, its reason and its fix, and the check that finds it.

A rule is a small function registered under its code with :func:`rule`; it receives what a reader
read (and a context the kind's runner builds once) and yields :class:`~courselib.model.lint.Finding`
values. The runners in ``lint/sbatch.py``, ``lint/manifests.py`` and ``lint/dockerfile.py`` call a
kind's rules in the order they were registered, so the findings come in the same order every time;
``courselib lint --explain CODE`` prints :func:`explain`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from courselib.errors import InputError


@dataclass(frozen=True)
class Rule:
    code: str                # S001, K006, D001: the letter names the kind of file
    kind: str                # "sbatch", "manifest", "dockerfile"
    scope: str               # what the check is called with: "file", "component", "document"
    severity: str            # the severity it reports, or e.g. "error or warning" when it depends
    title: str               # one line: what it finds
    why: str                 # why it matters, with the sources the findings cite
    fix: str                 # the usual fix (each finding says the fix for its own case)
    check: Callable

    def explain(self) -> str:
        return (f"{self.code} ({self.kind}, {self.severity}): {self.title}\n\n"
                f"why: {self.why}\n\nfix: {self.fix}")


RULES: dict[str, Rule] = {}


def rule(code: str, kind: str, scope: str, severity: str, title: str, why: str, fix: str):
    """Register the decorated check as rule ``code`` (a code is registered once)."""
    def register(check: Callable) -> Callable:
        if code in RULES:
            raise ValueError(f"lint rule {code} is registered twice")
        RULES[code] = Rule(code, kind, scope, severity, title, " ".join(why.split()), " ".join(fix.split()),
                           check)
        return check
    return register


def rules_for(kind: str, scope: str) -> list[Rule]:
    """The rules of one kind of file and scope, in the order they were registered."""
    return [r for r in RULES.values() if r.kind == kind and r.scope == scope]


def explain(code: str) -> str:
    """What rule ``code`` finds, why it matters and how to fix it (an InputError if unknown)."""
    found = RULES.get(code.strip().upper())
    if found is None:
        raise InputError(f"no lint rule {code!r}", field="--explain",
                         hint=f"the codes are {', '.join(sorted(RULES))}")
    return found.explain()
