"""The order in which kube-scheduler v1.37.2 tries PodGroups (courselib.live.kube.queue), and the
kube-gang comparison that follows it (fast, no real system).

The rule, from the source: each pop takes, among the groups that have reached their quorum, the one
of highest priority whose first pod came first. CI once saw the real scheduler try j5 before j6 in
examples/kube/more-than-fit.yaml although j6 reached its quorum first; the model was then given
the quorum order and disagreed. The constructed runs below are that case.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live.kube import plan as kplan, queue, result as kresult
from courselib.live.kube.cluster import NAMESPACE
from courselib.live.kube.replay import RealJob, ReplayResult
from courselib.model.workload import ClusterSpec, Job, Workload

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "src" / "courselib" / "data" / "recorded"
MORE_THAN_FIT = REPO / "examples" / "kube" / "more-than-fit.yaml"
HOUR = 3600.0


def _pods(*runs) -> list[str]:
    """``("j1", 12), ("j5", 1), ...`` -> one job name per pod, in arrival order."""
    return [name for name, n in runs for _ in range(n)]


#: j1..j4 whole; then j5's first pod, all of j6 (j6's quorum comes first), the rest of j5
CI_ORDER = _pods(("j1", 12), ("j2", 12), ("j3", 12), ("j4", 12), ("j5", 1), ("j6", 12), ("j5", 11))


def _replay(started: list[str], later: str, pod_order: list[str], cycles=None) -> ReplayResult:
    """A real replay of more-than-fit.yaml as CI saw one: ``started`` train at 0 (five fit in 64
    GPUs), ``later`` waits holding nothing and trains when they end at 1 h."""
    wl = load_workload(MORE_THAN_FIT)
    plan = kplan.plan_replay(wl, gang=True, policy="kube-gang")
    jobs = []
    for j in wl.jobs:
        t0 = 0.0 if j.name in started else HOUR
        jobs.append(RealJob(j.name, j.pods, submitted=0.0, start=t0, end=t0 + HOUR, bound_max=j.pods,
                            timeline=[(t0, j.pods), (t0 + HOUR, 0)] if t0 == 0 else
                            [(0.0, 0), (t0, j.pods), (t0 + HOUR, 0)], state="COMPLETED"))
    extra = {"podgroup_cycles": cycles} if cycles is not None else {}
    return ReplayResult(plan, jobs, pod_order, [[j.name for j in wl.jobs]], 1.0, 3, False,
                        {"kubernetes": "v1.37.2"}, "2026-12-03", extra)


FIVE = ["j1", "j2", "j3", "j4", "j5"]
CI_CYCLES = [[n, "scheduled", 1] for n in FIVE] + [["j6", "unschedulable", 3], ["j6", "scheduled", 1]]


# ---- the rule ----------------------------------------------------------------------------------

def _wl(*jobs) -> Workload:
    return Workload(ClusterSpec(2, 8), [Job(name, pods, 1, duration=HOUR, priority=prio) for name, pods, prio in jobs])


def test_a_later_first_pod_with_an_earlier_quorum_may_go_either_way():
    wl = _wl(("a", 2, 0), ("b", 2, 0))
    mark = queue.marks(wl, _pods(("a", 1), ("b", 2), ("a", 1)), [["a", "b"]])[0]
    assert mark == {"a": (0, 3), "b": (1, 2)}
    # b first: the scheduler was idle when b's quorum came; a first: busy until a's came too
    assert queue.batch_orders(wl, mark) == [("a", "b"), ("b", "a")]


def test_an_earlier_first_pod_and_quorum_fix_the_order():
    wl = _wl(("a", 2, 0), ("b", 2, 0))
    pods = _pods(("a", 1), ("b", 1), ("a", 1), ("b", 1))
    mark = queue.marks(wl, pods, [["a", "b"]])[0]
    assert queue.batch_orders(wl, mark) == [("a", "b")]
    assert queue.order_allowed(wl, pods, [["a", "b"]], ["a", "b"]) is None
    assert "b was tried before a" in queue.order_allowed(wl, pods, [["a", "b"]], ["b", "a"])


def test_priority_comes_before_the_first_pod_among_queued_groups():
    wl = _wl(("a", 2, 0), ("b", 2, 5))
    pods = _pods(("a", 2), ("b", 2))
    mark = queue.marks(wl, pods, [["a", "b"]])[0]
    # a alone had its quorum at first (the idle scheduler takes it); once both are queued b wins
    assert queue.batch_orders(wl, mark) == [("b", "a"), ("a", "b")]


def test_the_quorum_order_is_always_one_the_rule_allows():
    wl = load_workload(MORE_THAN_FIT)
    batches = [[j.name for j in wl.jobs]]
    q = queue.quorum_order(wl, CI_ORDER, batches)
    assert q == ["j1", "j2", "j3", "j4", "j6", "j5"]
    assert queue.order_allowed(wl, CI_ORDER, batches, q) is None
    assert q in queue.allowed_orders(wl, CI_ORDER, batches)
    assert queue.allowed_orders(wl, CI_ORDER, batches) == [FIVE + ["j6"], q]


# ---- the scheduler's log -----------------------------------------------------------------------

def _line(msg: str, group: str, ns: str = NAMESPACE, more: str = "") -> str:
    """A kube-scheduler --v=2 line as klog's text format writes it (schedule_one_podgroup.go L896,
    L908: the cycle's logger carries podGroupType and podGroup, L86, then the call's own pairs)."""
    return (f'I1203 11:40:01.123456   4242 schedule_one_podgroup.go:896] "{msg}" podGroupType="PodGroup" '
            f'podGroup="{ns}/{group}" podGroup="{ns}/{group}"{more}\n')


def test_the_log_gives_each_cycle_in_order_and_nothing_else():
    ok, no = "Successfully scheduled a pod group", "Unable to schedule a pod group"
    log = ("I1203 11:40:00.000001   4242 eventhandlers.go:244] \"Add event for unscheduled pod\" pod=\"x/j1-0\"\n"
           + "".join(_line(ok, n, more=" scheduledPods=12 unschedulablePods=0") for n in FIVE)
           + _line(no, "j6", more=' unschedulablePods=12 err="minCount (12) cannot be satisfied"') * 2
           + _line(ok, "j6", ns="elsewhere") + _line(ok, "other") + _line(ok, "j6"))
    cycles = queue.pod_group_cycles(log, NAMESPACE, [f"j{k}" for k in range(1, 7)])
    assert cycles == CI_CYCLES[:5] + [["j6", "unschedulable", 2], ["j6", "scheduled", 1]]
    assert queue.first_tries(cycles) == FIVE + ["j6"]


# ---- the comparison ----------------------------------------------------------------------------

def test_the_ci_run_disagrees_with_the_quorum_order_and_agrees_with_the_scheduler_s_order():
    """The CI failure, reconstructed: with the old input (the quorum order) the model starts j6 and
    not j5; given the order the scheduler's log shows, which the rule allows, it agrees."""
    real = _replay(FIVE, "j6", CI_ORDER, CI_CYCLES)
    wl = real.plan.workload
    old = kresult.compare(real, name="more-than-fit", group_order=queue.quorum_order(wl, CI_ORDER, real.batches))
    assert old.agreement < 1.0 and ("j5", "j6") in {tuple(sorted(p)) for p in old.order_disagreements}
    c = kresult.compare(real, name="more-than-fit")
    assert c.agreement == 1.0, kresult.format_comparison(c)
    assert c.group_order == FIVE + ["j6"] and c.queue_rule == ""
    assert "its log" in c.group_order_from
    assert "allowed by the queue's rule: yes" in kresult.format_comparison(c)


def test_an_order_the_rule_forbids_fails_the_check():
    """The scheduler's log says j6 went first although j5's first pod and quorum both came first:
    the rule as read from the source would be wrong, and the comparison says so."""
    pods = _pods(("j1", 12), ("j2", 12), ("j3", 12), ("j4", 12), ("j5", 12), ("j6", 12))
    cycles = [[n, "scheduled", 1] for n in ["j1", "j2", "j3", "j4", "j6"]] + [["j5", "unschedulable", 1]]
    c = kresult.compare(_replay(["j1", "j2", "j3", "j4", "j6"], "j5", pods, cycles), name="more-than-fit")
    assert c.queue_rule and "j6 was tried before j5" in c.queue_rule
    assert c.agreement < 1.0 and "queue rule 0/1" in kresult.format_comparison(c)


def test_without_the_log_any_order_the_rule_allows_is_accepted_and_only_those():
    # the CI run as an old recording (no log): both orders are allowed, the scheduler's is found
    c = kresult.compare(_replay(FIVE, "j6", CI_ORDER), name="more-than-fit")
    assert c.agreement == 1.0 and c.queue_rule is None and "2 allowed" in c.group_order_from
    assert c.group_order == FIVE + ["j6"]
    # ... and the idle scheduler's run too
    c = kresult.compare(_replay(["j1", "j2", "j3", "j4", "j6"], "j5", CI_ORDER), name="more-than-fit")
    assert c.agreement == 1.0 and c.group_order[4] == "j6"
    # j5's first pod and quorum both first: no allowed order starts j6 before j5
    pods = _pods(("j1", 12), ("j2", 12), ("j3", 12), ("j4", 12), ("j5", 12), ("j6", 12))
    c = kresult.compare(_replay(["j1", "j2", "j3", "j4", "j6"], "j5", pods), name="more-than-fit")
    assert c.agreement < 1.0 and "1 allowed" in c.group_order_from


def test_every_recorded_kube_gang_run_agrees_given_an_order_the_rule_allows():
    names = []
    for path in sorted(RECORDED.glob("kube-*.json")):
        if json.loads(path.read_text()).get("replay", {}).get("policy") != "kube-gang":
            continue
        rec = kresult.load_recorded(path)
        res = rec.result
        c = kresult.compare(res, name=path.stem)
        assert c.agreement == 1.0, kresult.format_comparison(c)
        assert c.group_order in queue.allowed_orders(res.plan.workload, res.pod_order, res.batches)
        names.append(path.stem)
    assert len(names) >= 7, names
