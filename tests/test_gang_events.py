"""Events that happen to running jobs (issue 31): preemption, failures, JobSet restarts, Kueue eviction."""
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.errors import InputError
from courselib.io.workload import load_workload, parse_workload
from courselib.io.yamlfile import load_one
from courselib.model import jobset
from courselib.model.workload import ClusterSpec, Fail, Job, Preempt, Workload
from courselib.sim.gang import simulate
from budget import examples

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "workloads"
SEED_FORM = """
cluster: {nodes: 4, gpus_per_node: 8}
jobs:
  - {name: big, pods: 4, gpus_per_pod: 8, duration: 2h, kind: jobset, max_restarts: 2}
events: [{at: 30m, preempt: {job: big, by: {name: urgent, pods: 1, gpus_per_pod: 8, duration: 10m, priority: 1000}}}]
"""


def parse(text, tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text(text)
    return load_workload(f)


def test_the_issue_form_parses(tmp_path):
    w = parse(SEED_FORM, tmp_path)
    big, urgent = w.jobs
    assert (big.kind, big.max_restarts) == ("jobset", 2)
    assert urgent.submit == 1800 and urgent.priority == 1000 and urgent.preemption_policy == "PreemptLowerPriority"
    assert urgent.queue == ""   # no queue: a plain pod that Kueue does not manage
    assert w.events == (Preempt(1800.0, "big", "urgent"),)


@pytest.mark.parametrize("bad, field", [
    ("events: [{at: 30m, preempt: {job: nope, by: {name: u, pods: 1, gpus_per_pod: 8, duration: 1m, priority: 9}}}]",
     "events[0].preempt.job"),
    ("events: [{at: 30m, preempt: {job: big, by: {name: u, pods: 1, gpus_per_pod: 8, duration: 1m}}}]",
     "events[0].preempt.by"),
    ("events: [{at: 30m, fail: {job: big, pod: 9}}]", "events[0].fail.pod"),
    ("events: [{at: 30m}]", "events[0]"),
    ("events: [{at: 30m, fail: {job: big}, preempt: {job: big}}]", "events[0]"),
    ("events: [{at: 30m, preempt: {job: big, by: {name: big, pods: 1, gpus_per_pod: 8, duration: 1m, priority: 9}}}]",
     "events[0].preempt.by.name"),
    ("events: [{at: 30m, preempt: {job: big, by: {name: u, pods: 1, gpus_per_pod: 8, duration: 1m, priority: 9, "
     "submit: 0}}}]", "events[0].preempt.by(u).submit"),
])
def test_bad_events_name_their_field(tmp_path, bad, field):
    text = "cluster: {nodes: 4, gpus_per_node: 8}\njobs: [{name: big, pods: 4, gpus_per_pod: 8, duration: 2h}]\n" + bad
    with pytest.raises(InputError) as err:
        parse(text, tmp_path)
    assert err.value.field == field and err.value.line == 3


def test_max_restarts_needs_a_jobset(tmp_path):
    with pytest.raises(InputError, match="only a JobSet") as err:
        parse("cluster: {nodes: 1, gpus_per_node: 8}\njobs: [{name: a, pods: 1, gpus_per_pod: 1, "
              "duration: 1h, max_restarts: 2}]\n", tmp_path)
    assert err.value.field == "jobs[0](a).max_restarts"


def test_the_jobset_controller_reaction():
    """failure_policy.go: no policy fails at once; maxRestarts N survives N losses, fails at N+1."""
    assert jobset.on_child_job_failed(None, 0).action == jobset.FAIL
    assert jobset.on_child_job_failed(None, 0).reason == "FailedJobs"
    r = jobset.on_child_job_failed(2, 0)
    assert (r.action, r.restarts) == (jobset.RESTART, 1)
    assert jobset.on_child_job_failed(2, 1).action == jobset.RESTART
    r = jobset.on_child_job_failed(2, 2)
    assert (r.action, r.reason) == (jobset.FAIL, "ReachedMaxRestarts")
    assert jobset.on_child_job_failed(0, 0).action == jobset.FAIL


@pytest.mark.parametrize("policy", ["kube-default", "kube-gang", "kueue"])
def test_seed_512_one_pod_preempted_whole_gang_restarts(policy):
    r = simulate(load_workload(EXAMPLES / "seed-512-preempt-jobset.yaml"), policy, check=True)
    big, urgent = r.job("big"), r.job("urgent")
    assert r.events[0]["victims"] == {"big": 1} and r.events[0]["as_expected"]
    assert (big.restarts, big.pods_lost, big.state) == (1, 1, "COMPLETED")
    assert big.recoveries == ((1800.0, 2400.0),)      # all 64 pods running again when urgent ends
    assert big.end == 2400 + 7200                     # restarted from its start (no checkpoint)
    assert urgent.start == 1800
    # GPUs held while restarting: kube-default binds 63 of the 64 new pods at once (504 GPUs idle
    # 10 min); a gang holds nothing while it waits
    assert big.wasted_gpu_hours == pytest.approx(0 if policy == "kube-gang" else 63 * 8 * 600 / 3600)


def test_whole_group_preemption_with_disruption_mode_all():
    w = load_workload(EXAMPLES / "gang-preempt-whole-group.yaml")
    r = simulate(w, "kube-gang", check=True)
    assert r.events[0]["victims"] == {"big": 4}
    assert r.job("big").restarts == 1
    single = w.replace_jobs([j if j.name != "big" else Job(**{**j.__dict__, "disruption_mode": "single"})
                             for j in w.jobs])
    assert simulate(single, "kube-gang").events[0]["victims"] == {"big": 1}
    # kube-default (GenericWorkload off) ignores the PodGroup: one pod
    assert simulate(w, "kube-default").events[0]["victims"] == {"big": 1}


def test_max_restarts_exhausted_fails_the_jobset():
    for policy in ("kube-default", "kube-gang", "kueue"):
        r = simulate(load_workload(EXAMPLES / "jobset-max-restarts.yaml"), policy, check=True)
        big = r.job("big")
        assert (big.state, big.end_reason, big.restarts, big.end, big.gpus_held) == \
            ("FAILED", "ReachedMaxRestarts", 1, 2400.0, 0)


def test_a_batch_job_survives_preemption_but_not_a_failure():
    w = Workload(ClusterSpec(2, 8), [Job("a", 2, 8, duration=3600, priority=1),
                                     Job("u", 1, 8, submit=600, duration=600, priority=9,
                                         preemption_policy="PreemptLowerPriority")],
                 events=[Preempt(600, "a", "u")])
    r = simulate(w, "kube-default", check=True)
    assert (r.job("a").restarts, r.job("a").state, r.job("a").end) == (1, "COMPLETED", 1200 + 3600)
    failed = simulate(Workload(ClusterSpec(2, 8), [Job("a", 2, 8, duration=3600)], events=[Fail(600, "a", 1)]),
                      "kube-default", check=True)
    assert (failed.job("a").state, failed.job("a").end_reason) == ("FAILED", "BackoffLimitExceeded")


def test_kueue_admitted_jobset_restarts_inside_its_quota():
    r = simulate(load_workload(EXAMPLES / "jobset-kueue-preempt.yaml"), "kueue", check=True)
    big = r.job("big")
    assert (big.restarts, big.evictions, big.recoveries) == (1, 0, ((1800.0, 2400.0),))
    # a recovery longer than waitForPodsReady's recovery timeout (= timeout): Kueue evicts it
    r2 = simulate(load_workload(EXAMPLES / "jobset-kueue-preempt.yaml"), "kueue", timeout=300)
    assert r2.job("big").evictions == 1


def test_kueue_workload_preemption_evicts_the_whole_workload():
    r = simulate(load_workload(EXAMPLES / "jobset-kueue-workload-preemption.yaml"), "kueue", check=True)
    big = r.job("big")
    assert r.events[0]["victims"] == {"big": 4}
    assert (big.evictions, big.restarts, big.recoveries) == (1, 0, ((1800.0, 2400.0),))
    assert r.job("urgent").start == 1800


def test_events_need_a_policy_that_models_them():
    w = load_workload(EXAMPLES / "jobset-preempt-one-pod.yaml")
    with pytest.raises(ValueError, match="modelled for"):
        simulate(w, "volcano")


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 3), st.lists(st.integers(1, 20), min_size=1, max_size=5, unique=True),
       st.sampled_from(["kube-default", "kube-gang", "kueue"]))
def test_a_jobset_fails_exactly_when_its_losses_exceed_max_restarts(max_restarts, minutes, policy):
    """Each failure lands while the JobSet runs (its pods are back at once on an empty cluster), so
    it restarts for the first max_restarts of them and fails at the next, never before."""
    w = Workload(ClusterSpec(4, 8), [Job("js", 4, 8, duration=36000, kind="jobset", max_restarts=max_restarts)],
                 events=[Fail(60.0 * m, "js", 0) for m in minutes])
    r = simulate(w, policy, check=True)
    js = r.job("js")
    losses = len(minutes)
    assert js.restarts == min(losses, max_restarts)
    assert (js.state == "FAILED") == (losses > max_restarts)
    if js.state == "FAILED":
        assert js.end == 60.0 * sorted(minutes)[max_restarts] and js.end_reason == "ReachedMaxRestarts"
