"""Kueue v0.17.0's admission unit tests against courselib's ``kueue`` quota arithmetic."""
from __future__ import annotations

import re

import pytest
from sessions import session
from upstream_cases import judge, params

_NUMBERS = {"more_needed": re.compile(r"(\d+) more needed"),
            "max_capacity": re.compile(r"maximum capacity \((\d+)\)")}


def _reason(text: str | None) -> dict:
    for key, rx in _NUMBERS.items():
        m = rx.search(text or "")
        if m:
            return {key: int(m.group(1))}
    return {"text": text}


@pytest.mark.parametrize("case", params("kueue-admission"))
def test_kueue(case):
    out = session(case.input, "kueue")
    pre = [j["name"] for j in case.input.get("running", [])]
    assert out["admitted_before"] == pre, "the quota upstream counts as used must be admitted first"
    got = {"admitted": [n for n in out["admitted"] if n not in pre]}
    if "reason" in case.expect:
        got["reason"] = {name: _reason(out["reasons"][name]) for name in case.expect["reason"]}
    judge(case, got)
