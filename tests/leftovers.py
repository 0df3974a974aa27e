"""Which test left something in a computing lane's temporary directory (a pytest plugin).

tests/lanes.py gives each computing lane a ``TMPDIR`` of its own and, after the run, lists what is still
in it before removing it (``lanes: left in the temporary directory of the rest lane …``). That says what
was left, not by whom. Here, in such a lane only (its ``TMPDIR`` is a ``courselib-lane-*`` folder),
each test's run is bracketed by a listing of the folder; whatever appeared during a test and is still
there when the session ends is named at the end of the lane's output with the test it appeared in
(pytest's own ``pytest-of-*`` folder aside). A file a session-scoped fixture makes appears in the first
test that asks for it.
"""
from __future__ import annotations

import os

import pytest

from lane_scope import lane_tmp, tmp_entries

_appeared: dict[str, str] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    place = lane_tmp()
    before = tmp_entries(place) if place else set()
    yield
    if place:
        for name in tmp_entries(place) - before:
            _appeared.setdefault(name, item.nodeid)


def pytest_terminal_summary(terminalreporter):
    place = lane_tmp()
    if not place:
        return
    left = {n: t for n, t in sorted(_appeared.items()) if os.path.lexists(os.path.join(place, n))}
    if left:
        terminalreporter.write_line(
            f"leftovers: still in {place} at the end, by the test they appeared in: "
            + "; ".join(f"{n} ({t})" for n, t in list(left.items())[:20]))
