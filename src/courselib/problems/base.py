"""What every practice-problem generator returns (``courselib problem TOPIC``).

A topic module ``courselib.problems.<topic>`` defines::

    TOPIC: str            # the name on the command line, e.g. "oom"
    SUMMARY: str          # one line for `courselib problem --help`
    def generate(seed: int, difficulty: str) -> Problem
    def solve(problem: Problem) -> Solution        # computed by courselib's engines, never stored

``generate`` draws everything from :func:`rng` so that the same (topic, seed, difficulty) gives the
same problem on every machine and Python version (``random.Random`` seeded with a string is
stable: CPython hashes str seeds with SHA-512). ``difficulty`` changes the size of the problem and
which traps appear, not only the numbers.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

DIFFICULTIES = ("easy", "medium", "hard")


def cite(*keys: str) -> str:
    """A source in a worked step, as its key in the course bibliography: ``[nccl-header]``.

    Readers find every key on the website's bibliography page (``book/references.bib``); a test
    checks that each key a solution cites is there.
    """
    return "[" + ", ".join(keys) + "]"


def rng(topic: str, seed: int, difficulty: str) -> random.Random:
    """The one random source of a problem: stable across machines and Python versions."""
    return random.Random(f"courselib-problem:{topic}:{seed}:{difficulty}")


@dataclass(frozen=True)
class Problem:
    topic: str
    seed: int
    difficulty: str
    text: str                                   # the problem and its question(s), plain text
    data: dict[str, Any] = field(default_factory=dict)   # JSON-serialisable inputs the solver reads
    question: str = ""                          # the question alone, one or two lines

    @property
    def args(self) -> dict[str, Any]:
        return {"topic": self.topic, "seed": self.seed, "difficulty": self.difficulty}


@dataclass(frozen=True)
class Solution:
    answer: dict[str, Any]                      # JSON-serialisable: the answer(s) by name
    steps: list[str]                            # the worked trace: why, step by step
