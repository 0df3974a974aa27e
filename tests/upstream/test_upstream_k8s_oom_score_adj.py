"""Kubernetes v1.37.2 ``policy_test.go`` (``TestGetContainerOOMScoreAdjust``) against courselib."""
from __future__ import annotations

import pytest
from k8s_pods import pod_of, rules_for
from upstream_cases import judge, params

from courselib.model.qos import pod_oom_score_adj


def _scores(case, *, defaulting: bool) -> dict:
    """Each container's score; one inside upstream's [low, high] is written as that range."""
    pod = pod_of("p", case.input["spec"])
    _, rows = pod_oom_score_adj(pod, case.input["capacity"], rules_for(case.input["gates"]),
                                defaulting=defaulting)
    out = {}
    for row in rows:
        low, high = case.expect[row.name]
        out[row.name] = [low, high] if low <= row.oom_score_adj <= high else row.oom_score_adj
    assert set(out) == set(case.expect)
    return out


@pytest.mark.parametrize("case", params("k8s-oom-score-adj"))
def test_oom_score_adj(case):
    if not case.input["gates"]["DRANodeAllocatableResources"]:
        # the kubelet's function on the pod as given, as upstream's unit test calls it
        assert _scores(case, defaulting=False) == case.expect
    judge(case, _scores(case, defaulting=True))
