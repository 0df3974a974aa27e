"""The real Kueue manager binary reads the configurations the book talks about (issue 30).

`courselib kube kueue-config` gives a configuration to the pinned manager (no control plane: it
stops at the missing kubeconfig) and reads its own answer. The real tests need the built binary
(`make setup-k8s`); the light ones check the recording the book shows, and that the model's
version-dependent default agrees with what the real manager said.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from courselib.live.kube.kueue import config as kconfig
from courselib.live.kube.kueue import manager
from courselib.model.policies.kueue import default_wait_for_pods_ready

REASON = manager.binary_reason()
CASE = {name: text for name, text in kconfig.CASES}


def _by_name(results):
    return {r.name: r for r in results}


def _check_facts(results):
    r = _by_name(results)
    assert r["no waitForPodsReady block"].accepted
    assert r["no waitForPodsReady block"].wait_for_pods_ready is None            # off at v0.17
    enable = r["v1beta1's words in a v1beta2 file: enable: true"]
    assert not enable.accepted and 'unknown field "waitForPodsReady.enable"' in enable.error
    assert enable.field == "waitForPodsReady.enable"
    empty = r["the block without a timeout"]
    assert not empty.accepted and "must be specified" in empty.error and empty.field == "waitForPodsReady.timeout"
    given = r["the block with timeout: 30m"].wait_for_pods_ready
    assert (given["timeout"], given["recoveryTimeout"], given["blockAdmission"]) == ("30m0s", "30m0s", False)
    old = r["the old v1beta1 configuration with enable: true"].wait_for_pods_ready
    assert (old["timeout"], old["blockAdmission"]) == ("5m0s", True)


def test_the_recorded_answers_of_the_pinned_manager():
    results, data = kconfig.load_recorded()
    assert data["versions"]["kueue"] == manager.KUEUE_VERSION
    assert [r.name for r in results] == list(CASE)
    assert [r.given for r in results] == list(CASE.values())
    _check_facts(results)


def test_the_model_s_default_for_the_pinned_version_is_what_the_manager_said():
    results, _ = kconfig.load_recorded()
    left_out = _by_name(results)["no waitForPodsReady block"]
    assert default_wait_for_pods_ready(manager.KUEUE_VERSION) == (left_out.wait_for_pods_ready is not None)


def test_locate_finds_the_line_of_the_field_the_manager_names():
    text = CASE["v1beta1's words in a v1beta2 file: enable: true"]
    assert kconfig.locate(text, "waitForPodsReady.enable", "k.yaml") == 4
    assert kconfig.locate(CASE["the block without a timeout"], "waitForPodsReady.timeout", "k.yaml") == 3
    assert kconfig.locate(text, None, "k.yaml") is None


def test_the_command_needs_a_file_or_the_cases(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "courselib", "kube", "kueue-config", *a],
                                    capture_output=True, text=True)
    both = run(str(tmp_path / "x.yaml"), "--cases")
    assert both.returncode == 2 and "not both" in both.stderr and "Traceback" not in both.stderr
    rec = run(str(tmp_path / "x.yaml"), "--record", str(tmp_path / "r.json"))
    assert rec.returncode == 2 and "--record" in rec.stderr


@pytest.mark.real
@pytest.mark.skipif(bool(REASON), reason=f"Kueue not built here: {REASON}")
def test_the_real_manager_reads_the_cases_as_recorded():
    results = kconfig.check_cases()
    _check_facts(results)
    recorded, _ = kconfig.load_recorded()
    assert [(r.accepted, r.error, r.wait_for_pods_ready) for r in results] == \
        [(r.accepted, r.error, r.wait_for_pods_ready) for r in recorded]


@pytest.mark.real
@pytest.mark.skipif(bool(REASON), reason=f"Kueue not built here: {REASON}")
def test_the_command_names_the_line_the_manager_refuses(tmp_path):
    f = tmp_path / "kueue.yaml"
    f.write_text(CASE["v1beta1's words in a v1beta2 file: enable: true"])
    done = subprocess.run([sys.executable, "-m", "courselib", "kube", "kueue-config", str(f), "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert (out["accepted"], out["line"], out["field"]) == (False, 4, "waitForPodsReady.enable")
    f.write_text(CASE["the block with timeout: 30m"])
    done = subprocess.run([sys.executable, "-m", "courselib", "kube", "kueue-config", str(f)],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "waitForPodsReady on: timeout 30m0s" in done.stdout


def test_the_recorded_v0_17_default_run_never_evicts_and_agrees_with_the_model():
    """The real Kueue v0.17.1 with no waitForPodsReady block (its default) in front of kube-scheduler
    v1.37.2: `big` is admitted on quota at 1 min, holds 2 of its 3 pods until `filler` ends at 1 h,
    and nothing evicts it; the model at v0.17 says the same, and at v0.19 (read, not run) it would be
    evicted 30 min after admission."""
    from courselib.live.kube import result as kresult
    from courselib.sim.gang import simulate
    rec = kresult.load_recorded("kueue-quota-v017-default")
    res = rec.result
    assert f"Kueue {manager.KUEUE_VERSION}" in rec.recorded_on
    assert res.extra["manager"]["enabled"] is False and res.extra["evictions"] == {"filler": 0, "big": 0}
    waiting = next(e for e in res.extra["events"] if e["job"] == "big" and e["what"] == "waiting")
    assert (waiting["t"], waiting["bound"], waiting["pods"]) == (60.0, 2, 3)
    c = kresult.compare(res, name="kueue-quota-not-placement.yaml")
    assert c.agreement == 1.0, kresult.format_comparison(c)
    v19 = simulate(res.plan.workload, "kueue", wait_for_pods_ready=None, version="v0.19.2")
    assert v19.job("big").evictions == 1
