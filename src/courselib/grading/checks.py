"""Helpers for check cells: say what was expected (in words) and what was found, never the answer.

A check cell imports these, computes the expected value with courselib's model, and calls
:func:`expect` with feedback that names the quantity, the value found, and the chapter to read.
"""
from __future__ import annotations

import math
from numbers import Real


def expect(condition: bool, feedback: str) -> None:
    """Raise ``AssertionError(feedback)`` unless ``condition`` (unlike ``assert``, never optimised away)."""
    if not condition:
        raise AssertionError(feedback)


def answered(**answers) -> None:
    """Fail with "not answered yet" for the first answer that is still the stub ``...``."""
    for name, value in answers.items():
        if value is Ellipsis:
            raise AssertionError(f"`{name}` is still `...`: not answered yet; replace the `...` with your answer")


def number(name: str, value) -> float:
    """``value`` as a float, or fail saying a number was expected and what was found instead."""
    expect(isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value),
           f"`{name}` should be a number; found {type(value).__name__} {value!r}")
    return float(value)


def whole(name: str, value) -> int:
    """``value`` as an int, or fail (a float such as 137.0 is accepted when it is whole)."""
    v = number(name, value)
    expect(v == int(v), f"`{name}` should be a whole number (the kernel counts in integers); found {value!r}")
    return int(v)


def close(found: float, expected: float, rel: float = 1e-3) -> bool:
    """Equal within ``rel`` (relative) — for answers computed in floating point."""
    return math.isclose(found, expected, rel_tol=rel, abs_tol=1e-9)
