"""Kubernetes v1.37.2 ``qos_test.go`` (``TestComputePodQOS``) against courselib's QoS class."""
from __future__ import annotations

import pytest
from k8s_pods import pod_of, rules_for
from upstream_cases import judge, params

from courselib.model.qos import qos_class


@pytest.mark.parametrize("case", params("k8s-qos"))
def test_qos_class(case):
    pod, r = pod_of("p", case.input["spec"]), rules_for(case.input["gates"])
    # the kubelet's function on the pod as given, as upstream's unit test calls it: always agrees
    assert qos_class(pod, r, defaulting=False) == case.expect
    # the course's answer: the pod as the API server stores it (defaulted first)
    judge(case, qos_class(pod, r))
