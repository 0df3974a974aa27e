"""The real API server with Kubernetes' own gang scheduling off (the default) and on: a Job whose pods
name a PodGroup is accepted either way, but with the gate off its ``schedulingGroup`` is silently
dropped and the PodGroup kind is not served (issue 30). The recorded runs the book shows for readers
without a control plane must say what the live server says.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.live import kube
from courselib.live.kube import gatecheck

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "files" / gatecheck.EXAMPLE
SHAPE = dict(nodes=4, gpus_per_node=8)


def _verdict(result: gatecheck.GateCheck) -> tuple:
    dropped = sorted(d["field"] for f in result.findings for d in f["dropped"])
    return result.gang, result.kubernetes, result.podgroup, result.scheduling_group, dropped


def test_the_recordings_say_what_the_gate_changes():
    off, _ = gatecheck.load_recorded(False)
    on, _ = gatecheck.load_recorded(True)
    assert _verdict(off) == (False, kube.KUBERNETES_VERSION, "not served", "dropped", [gatecheck.FIELD])
    assert _verdict(on) == (True, kube.KUBERNETES_VERSION, "accepted", "kept", [])
    assert off.silently_dropped and not on.silently_dropped
    assert "one at a time" in off.text() and "one at a time" not in on.text()


def test_judge_tells_dropped_from_kept_and_rejected():
    from courselib.live.kube.validate import Finding
    pg = Finding("f", 1, 1, "PodGroup", "g", False, validated=False, message="not served")
    kept = Finding("f", 2, 10, "Job", "j", False)
    dropped = Finding("f", 2, 10, "Job", "j", False, dropped=[{"field": gatecheck.FIELD, "line": 27}])
    refused = Finding("f", 2, 10, "Job", "j", True, causes=[{"field": gatecheck.FIELD, "line": 27, "message": "no"}])
    v = lambda job: gatecheck.judge([pg, job], gang=False, kubernetes="v").scheduling_group
    assert (v(kept), v(dropped), v(refused)) == ("kept", "dropped", "rejected")
    assert gatecheck.judge([pg, kept], gang=False, kubernetes="v").podgroup == "not served"


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.live_kube(gang=False)
def test_the_api_server_drops_scheduling_group_while_the_gate_is_off(live_kube):
    cp = live_kube.up(kube.KubeShape(**SHAPE))
    assert not cp.shape.gang
    result = gatecheck.check(cp, EXAMPLE)
    assert _verdict(result) == _verdict(gatecheck.load_recorded(False)[0])


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.live_kube(gang=True)
def test_the_api_server_keeps_scheduling_group_with_the_gate_on(live_kube):
    cp = live_kube.up(kube.KubeShape(**SHAPE, gang=True))
    assert cp.shape.gang
    result = gatecheck.check(cp, EXAMPLE)
    assert _verdict(result) == _verdict(gatecheck.load_recorded(True)[0])
