"""Hypothesis budgets in one place: how many examples a property test asks for, by tier.

Every property test writes ``@settings(max_examples=examples(N), ...)``: ``N`` is its count in the
full run (``make test``, CI), the count it always had. ``make test-fast`` sets
``COURSE_TEST_BUDGET=dev``, which asks a tenth of ``N`` (at least 5), or the test's own ``dev=K`` where
each example is a benchmark row: the same properties, fewer cases, for a loop of two minutes, drawn
the same way every run (conftest.py's dev profile is derandomized). A module that names a count without this helper is
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


def examples(full: int, *, dev: int | None = None) -> int:
    """The number of examples for a property test whose full-run count is ``full``. ``dev``: the dev
    tier's count for a test whose every example is a benchmark-sized run, where even a tenth costs
    seconds (at most a tenth, at least 1); the full run always asks ``full``."""
    fraction, least = BUDGETS[budget()]
    if fraction >= 1:
        return full
    if dev is not None:
        if not 1 <= dev <= max(least, round(full * fraction)):
            raise ValueError(f"examples({full}, dev={dev}): a dev count is between 1 and the tier's own")
        return min(full, dev)
    return min(full, max(least, round(full * fraction)))
