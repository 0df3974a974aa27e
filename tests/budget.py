"""Hypothesis budgets in one place: how many examples a property test asks for, by tier.

Every property test writes ``@settings(max_examples=examples(N), ...)``: ``N`` is its count in the
full run (``make test``, CI), the count it always had. ``make test-fast`` sets
``COURSE_TEST_BUDGET=dev``, which asks a tenth of ``N`` (at least 5): the same properties, fewer
random cases, for a loop of two minutes. A module that names a count without this helper is
shrunk the same way on the dev budget by tests/tiers.py, and a test that names none gets the dev
profile's 10 (conftest.py); the full run keeps every count as written.
"""
from __future__ import annotations

import os

#: tier -> (fraction of the full count, the least count)
BUDGETS = {"full": (1.0, 1), "dev": (0.1, 5)}


def budget() -> str:
    """The tier asked for in COURSE_TEST_BUDGET (default ``full``); anything else is an error."""
    name = os.environ.get("COURSE_TEST_BUDGET", "full") or "full"
    if name not in BUDGETS:
        raise ValueError(f"COURSE_TEST_BUDGET={name!r}: choose one of {', '.join(BUDGETS)}")
    return name


def examples(full: int) -> int:
    """The number of examples for a property test whose full-run count is ``full``."""
    fraction, least = BUDGETS[budget()]
    return full if fraction >= 1 else min(full, max(least, round(full * fraction)))
