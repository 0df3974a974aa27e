"""Helpers for check cells: say what was expected (in words) and what was found, never the answer.

A check cell imports these, computes the expected value with courselib's model, and calls
:func:`expect` with feedback that names the quantity, the value found, and the chapter to read.

When a check must *run* the student's code (a function, a class), it does so inside a function
decorated with :func:`probe` that returns plain data. In the notebook the decorator does nothing.
Under ``courselib grade`` the check itself runs in the grader's process, which never runs the
student's code; a probe is sent (as the instructor's source) to the student's process, run there, and
only its result comes back, as data.
"""
from __future__ import annotations

import ast
import functools
import inspect
import math
import textwrap
from numbers import Real

from courselib.grading.encode import Missing

# Set by the grader while it runs a check: (name, source, args, kwargs) -> the probe's result.
_REMOTE = None


def probe(fn):
    """Mark ``fn`` (a top-level function of a check cell) as the part of a check that runs student code.

    It may use the lab's given names, the student's answers and its arguments, and must return plain
    data (numbers, strings, lists, tuples, sets, dicts, courselib dataclasses).
    """
    remote = _REMOTE
    if remote is None:
        return fn
    source = _definition(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return remote(fn.__name__, source, args, kwargs)

    return call


def _definition(fn) -> str:
    """The source of ``fn``'s ``def`` statement, without its decorators."""
    text = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(text).body[0]
    lines = text.splitlines()
    return "\n".join(lines[node.lineno - 1:node.end_lineno]) + "\n"


def expect(condition: bool, feedback: str) -> None:
    """Raise ``AssertionError(feedback)`` unless ``condition`` (unlike ``assert``, never optimised away)."""
    if not condition:
        raise AssertionError(feedback)


def answered(**answers) -> None:
    """Fail with "not answered yet" for the first answer that is still the stub ``...`` (or is gone)."""

    for name, value in answers.items():
        if value is Ellipsis:
            raise AssertionError(f"`{name}` is still `...`: not answered yet; replace the `...` with your answer")
        if isinstance(value, Missing):
            raise AssertionError(f"`{name}` is not defined: not answered yet; keep the name the answer cell "
                                 f"gives (`{name} = ...`) and set it")


def number(name: str, value) -> float:
    """``value`` as a float, or fail saying a number was expected and what was found instead."""
    expect(isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value),
           f"`{name}` should be a number; found {type(value).__name__} {value!r}")
    return float(value)


KERNEL_COUNTS = "the kernel counts in integers"


def whole(name: str, value, why: str = KERNEL_COUNTS) -> int:
    """``value`` as an int, or fail (a float such as 137.0 is accepted when it is whole).

    ``why`` says why the quantity is whole, in the lab's own terms ("a count of GPUs"). The default is
    the kernel labs' reason (PIDs, badness points, exit statuses); a lab about anything else gives its own.
    """
    v = number(name, value)
    expect(v == int(v), f"`{name}` should be a whole number ({why}); found {value!r}")
    return int(v)


def close(found: float, expected: float, rel: float = 1e-3) -> bool:
    """Equal within ``rel`` (relative) — for answers computed in floating point."""
    return math.isclose(found, expected, rel_tol=rel, abs_tol=1e-9)


def within(found: float, expected: float, rel: float = 0.005, decimals: int = 1) -> bool:
    """Equal within ``rel`` of ``expected`` (0.5 %), or to ``decimals`` places (a figure rounded to one
    decimal): for a figure a learner works out by hand and may round, where a question states that
    precision. A known wrong formula must lie outside this band (the lab's tests show it does)."""
    return abs(found - expected) <= max(rel * abs(expected), 0.5 * 10 ** -decimals) + 1e-9
