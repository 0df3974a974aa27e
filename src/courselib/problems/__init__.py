"""Seeded practice problems with worked solutions, one module per topic (see ``base``)."""
from __future__ import annotations

import importlib
import importlib.util

from courselib.problems.base import DIFFICULTIES, Problem, Solution, rng

# Topic name -> module under courselib.problems. Order is the order `--help` lists them.
TOPICS = ("namespaces", "cpu", "gang", "backfill", "topology", "oom", "qos", "cost", "checkpoint", "barrier",
          "layers")


def topic_module(topic: str):
    if topic not in TOPICS:
        raise ValueError(f"unknown topic {topic!r}; choose one of: {', '.join(TOPICS)}")
    return importlib.import_module(f"courselib.problems.{topic}")


def available() -> tuple[str, ...]:
    """The topics whose module exists (a topic may be listed in TOPICS before it is written)."""
    return tuple(t for t in TOPICS if importlib.util.find_spec(f"courselib.problems.{t}") is not None)


def generate(topic: str, seed: int = 0, difficulty: str = "easy") -> Problem:
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; choose one of: {', '.join(DIFFICULTIES)}")
    return topic_module(topic).generate(int(seed), difficulty)


def solve(problem: Problem) -> Solution:
    return topic_module(problem.topic).solve(problem)


__all__ = ["DIFFICULTIES", "TOPICS", "Problem", "available", "Solution", "generate", "rng", "solve", "topic_module"]
