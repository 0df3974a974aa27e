"""Volcano's scheduler unit tests (allocate, enqueue, overcommit) against courselib's ``volcano``."""
from __future__ import annotations

import pytest
from sessions import session
from upstream_cases import judge, params


@pytest.mark.parametrize("case", params("volcano-allocate"))
def test_volcano(case):
    out = session(case.input, "volcano")
    assert out["bound_before"] == sorted(j["name"] for j in case.input.get("running", [])), \
        "the PodGroups upstream has Running must be placed first"
    judge(case, {key: out[key] for key in case.expect})
