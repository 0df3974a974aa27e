"""Scenario tests of the mini gang scheduler, each taken from FACTS §3–4 or the seed's two stories."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from courselib.model.cluster import Cluster, alternatives, parse_constraint
from courselib.model.policies import make_policy, policy_names
from courselib.model.policies.kueue import requeue_delay
from courselib.model.workload import ClusterSpec, Job, Queue, Workload
from courselib.io.workload import load_workload
from courselib.sim.gang import simulate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "workloads"


def two_512_jobs() -> Workload:
    return Workload(ClusterSpec(75, 8), [Job("a", 512, 1, duration=7200), Job("b", 512, 1, duration=7200)])


# ---- the seed's stories --------------------------------------------------------------------------
def test_story1_600_free_gpus_deadlock_under_kube_default():
    """Seed story 1: 600 free GPUs, two 512-GPU jobs; FACTS §3.3: the default scheduler places pods
    one at a time (no gang scheduling before v1.35), so round-robin creation gives 300 + 300."""
    r = simulate(two_512_jobs(), "kube-default", check=True)
    assert r.deadlock
    assert [(j.gpus_held, j.start) for j in r.jobs] == [(300, None), (300, None)]
    # the concrete allocation sequence: both jobs bound 300 pods and then wait
    bound = [(e.job, e.held) for e in r.trace if e.what.startswith("bound")]
    assert bound == [("a", 300), ("b", 300)]
    assert r.wasted_gpu_hours == pytest.approx(600 * r.horizon / 3600)


@pytest.mark.parametrize("policy", ["volcano", "slurm", "kueue"])
def test_story1_one_job_starts_under_gang_aware_policies(policy):
    """FACTS §3.1 (minMember: "the scheduler will not start anyone"), §3.4 (a job is one allocation)."""
    r = simulate(two_512_jobs(), policy, check=True)
    assert not r.deadlock and r.wasted_gpu_hours == 0
    assert r.job("a").start == 0 and r.job("b").start == 7200


def test_story2_400_of_512_for_25_minutes_costs_166_67_gpu_hours():
    """Seed story 2: 400 GPUs held 25 min at the NCCL barrier (FACTS §4.1 L180-186): 400 x 25/60 GPU-h."""
    from courselib.io.workload import load_workload
    w = load_workload(EXAMPLES / "seed-400-of-512-25min.yaml")
    r = simulate(w, "kube-default", check=True)
    big = r.job("pretrain")
    assert big.first_bound == 0 and big.start == 25 * 60
    assert big.wasted_gpu_hours == pytest.approx(400 * 25 / 60)
    assert r.wasted_gpu_hours == pytest.approx(166.6667, abs=1e-3)
    for policy in ("volcano", "slurm"):
        other = simulate(w, policy)
        assert other.wasted_gpu_hours == 0 and other.job("pretrain").start == 25 * 60


def test_every_example_workload_loads_and_runs_under_every_policy():
    from courselib.io.workload import load_workload
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert len(files) >= 4
    from courselib.sim.gang import EVENT_POLICIES
    for f in files:
        w = load_workload(f)
        for p in policy_names():
            if w.events and p not in EVENT_POLICIES:   # preemption and failures: kube and Kueue only
                with pytest.raises(ValueError, match="modelled for"):
                    simulate(w, p)
                continue
            simulate(w, p, check=True)


# ---- Volcano -------------------------------------------------------------------------------------
def test_volcano_discards_a_placement_short_of_min_member():
    """FACTS §3.1 allocate.go L343/L865: commit only if JobReady, else stmt.Discard(): nothing bound."""
    w = Workload(ClusterSpec(2, 8, ), [Job("small", 1, 8, duration=3600), Job("gang", 2, 8, duration=60)],
                 queues=[Queue("default", nominal_quota=1000)])
    r = simulate(w, "volcano", check=True)
    g = r.job("gang")
    assert g.first_bound == 3600 and g.wasted_gpu_hours == 0
    kube = simulate(w, "kube-default")
    assert kube.job("gang").wasted_gpu_hours == pytest.approx(8 * 1.0)


def test_volcano_overcommit_factor_1_2_admits_then_allocate_refuses():
    """FACTS §3.1 overcommit.go L37 (factor 1.2), L91 (idle = total*1.2 - used), L124 (inqueue+minReq <= idle).
    With a queue quota above the cluster the proportion check passes, so overcommit decides."""
    jobs = [Job("a", 60, 1, duration=100), Job("b", 60, 1, duration=100)]
    w = Workload(ClusterSpec(100, 1), jobs, queues=[Queue("default", nominal_quota=1000)])
    pol = make_policy("volcano", w)
    assert pol.overcommit_factor == 1.2
    r = simulate(w, "volcano", check=True)
    inq = [e for e in r.trace if "Inqueue" in e.what and e.time == 0]
    assert [e.job for e in inq] == ["a", "b"]  # 60 + 60 <= 100 * 1.2 - 0
    assert r.job("b").first_bound == 100 and r.wasted_gpu_hours == 0  # but b binds nothing until a ends
    strict = simulate(w, "volcano", overcommit_factor=1.0)
    assert [e.job for e in strict.trace if "Inqueue" in e.what and e.time == 0] == ["a"]
    assert any("overused" in e.what and e.job == "b" for e in strict.trace)


def test_volcano_proportion_rejects_a_job_larger_than_the_cluster():
    """FACTS §3.1 proportion.go: minReq + allocated + inqueue > capability -> rejected (never Inqueue)."""
    w = Workload(ClusterSpec(4, 8), [Job("huge", 36, 1, duration=60)])  # 36 <= 32 * 1.2, > 32
    r = simulate(w, "volcano")
    assert r.job("huge").state == "PENDING" and "proportion" in r.job("huge").pending_reason
    assert not r.deadlock and r.wasted_gpu_hours == 0


def test_min_member_below_pods_trains_with_min_member_ranks():
    """PodGroup minMember (FACTS §3.1 L179): the job may start with minMember of its pods."""
    w = Workload(ClusterSpec(1, 6), [Job("elastic", 8, 1, duration=60, min_member=4)])
    r = simulate(w, "volcano", check=True)
    assert r.job("elastic").start == 0 and r.job("elastic").gpus_held_max == 6


@pytest.mark.parametrize("reference", [False, True])
def test_volcano_a_job_that_reached_min_member_goes_back_behind_a_job_not_ready(reference):
    """allocate.go allocateResourcesForTasks: a job ready with tasks left breaks and is pushed back;
    gang's JobOrderFn puts a job not yet ready first. The elastic job does not take every GPU it
    could before the gang behind it has its minMember (it did, before: the gang waited 30 min)."""
    w = Workload(ClusterSpec(8, 8), [Job("elastic", 28, 1, duration=1800, min_member=7),
                                     Job("gang", 46, 1, duration=7200)])
    r = simulate(w, "volcano", check=True, reference=reference)
    assert (r.job("elastic").start, r.job("gang").start) == (0, 0)
    assert r.job("elastic").gpus_held_max == 64 - 46
    # two elastic jobs on one node share it pod by pod (upstream "two Jobs on one node")
    two = Workload(ClusterSpec(1, 4), [Job("a", 4, 1, duration=60, min_member=1),
                                       Job("b", 4, 1, duration=60, min_member=1)])
    r2 = simulate(two, "volcano", horizon=1, reference=reference)
    assert [e.what.split(":")[0] for e in r2.trace if e.what.startswith("bound")] == ["bound 2 pods"] * 2


# ---- Kueue ---------------------------------------------------------------------------------------
def test_kueue_requeue_backoff_doubles_from_60s_to_3600s():
    """FACTS §3.2 setup_wait_for_pods_ready.md L112-118: ~60, 120, 240, ..., 3600, ..., 3600 s."""
    assert [requeue_delay(n) for n in range(1, 9)] == [60, 120, 240, 480, 960, 1920, 3600, 3600]


def test_kueue_wait_for_pods_ready_defaults_depend_on_config_api():
    """FACTS §3.2 / §7.7: timeout 30 min (v1beta2) or 5 min (v1beta1, BlockAdmission true)."""
    w = two_512_jobs()
    v2, v1 = make_policy("kueue", w), make_policy("kueue", w, config_api="v1beta1")
    assert (v2.timeout, v2.block_admission) == (1800, False)
    assert (v1.timeout, v1.block_admission) == (300, True)


def test_kueue_s_own_default_depends_on_the_release():
    """v0.17 (the course's): off without the block; v0.19: on, 30 min (v0.19.2 defaults.go L48,
    L99-112), off only with the DisableWaitForPodsReady gate (kube_features.go L667-669)."""
    from courselib.model.policies.kueue import default_wait_for_pods_ready
    w = two_512_jobs()
    assert [default_wait_for_pods_ready(v) for v in ("v0.15.0", "v0.17.1", "v0.18.6", "v0.19.2")] == \
        [False, False, False, True]
    assert not default_wait_for_pods_ready("v0.19.2", disable_gate=True)
    old, new = (make_policy("kueue", w, wait_for_pods_ready=None, version=v) for v in ("v0.17.1", "v0.19.2"))
    assert (old.wait_for_pods_ready, new.wait_for_pods_ready, new.timeout) == (False, True, 1800)
    assert make_policy("kueue", w).version == make_policy("kueue", w).version == "v0.17.1"   # the pinned one


@pytest.mark.parametrize("options,match", [
    ({"version": "v0.20.0"}, "v0.15 to v0.19 only"),
    ({"version": "1.x"}, "a Kueue release"),
    ({"version": "v0.17.1", "disable_gate": True, "wait_for_pods_ready": None}, "exists from v0.19"),
    ({"version": "v0.19.2", "disable_gate": True, "wait_for_pods_ready": True}, "cannot be on as well"),
    ({"wait_for_pods_ready": None, "config_api": "v1beta1"}, "v1beta2 configuration only"),
])
def test_kueue_refuses_a_release_or_gate_it_has_not_read(options, match):
    with pytest.raises(ValueError, match=match):
        make_policy("kueue", two_512_jobs(), **options)


@pytest.mark.parametrize("reference", [False, True])
def test_the_same_workload_under_kueue_v0_17_and_v0_19_defaults(reference):
    """Quota is not placement: `big` is admitted and holds 2 of its 3 pods. With v0.17's default
    nothing evicts it; v0.19's default evicts it 30 min after admission (PodsReadyTimeout)."""
    w = load_workload(EXAMPLES / "kueue-quota-not-placement.yaml")
    old, new = (simulate(w, "kueue", wait_for_pods_ready=None, version=v, reference=reference)
                for v in ("v0.17.1", "v0.19.2"))
    assert old.job("big").evictions == 0 and new.job("big").evictions >= 1
    said = lambda r: [e for e in r.trace if e.job == "big"]
    assert any("waitForPodsReady off (Kueue v0.17's default)" in e.what for e in said(old))
    assert any("waitForPodsReady on (Kueue v0.19's default)" in e.what for e in said(new))
    evicted = next(e for e in said(new) if "PodsReadyTimeout" in e.what)
    assert evicted.time == 60 + 30 * 60                       # admitted at 1 min, evicted 30 min later
    assert old.job("big").start == new.job("big").start == 3600.0   # trains only when filler ends


def test_kueue_admits_on_quota_not_placement_then_evicts_after_timeout():
    """FACTS §3.2 all_or_nothing.md L35-37: quota does not guarantee placement; L64-70: PodsReadyTimeout."""
    from courselib.io.workload import load_workload
    r = simulate(load_workload(EXAMPLES / "kueue-quota-not-placement.yaml"), "kueue", check=True)
    big = r.job("big")
    evictions = [e.time for e in r.trace if e.job == "big" and "PodsReadyTimeout" in e.what]
    admissions = [e.time for e in r.trace if e.job == "big" and e.what.startswith("admitted")]
    assert evictions == [60 + 1800]
    assert admissions == [60, 60 + 1800 + 60]
    assert big.start == 3600 and big.evictions == 1
    assert big.wasted_gpu_hours == pytest.approx(16 * (1800 + (3600 - 1920)) / 3600)


def test_kueue_cohort_borrowing_matches_the_docs_example():
    """FACTS §3.2 cluster_queue.md L229-241: team-a 9 + idle team-b 12 in one cohort -> up to 21."""
    queues = [Queue("team-a", 9, cohort="c"), Queue("team-b", 12, cohort="c")]
    w = Workload(ClusterSpec(3, 8), [Job("x", 21, 1, duration=60, queue="team-a")], queues)
    assert simulate(w, "kueue").job("x").start == 0
    w22 = Workload(ClusterSpec(3, 8), [Job("x", 22, 1, duration=60, queue="team-a")], queues)
    assert simulate(w22, "kueue", horizon=600).job("x").start is None
    limited = [Queue("team-a", 9, cohort="c", borrowing_limit=5), Queue("team-b", 12, cohort="c")]
    assert simulate(Workload(w.cluster, w.jobs, limited), "kueue", horizon=600).job("x").start is None


def test_kueue_quota_one_queue_borrowed_is_gone_from_the_cohort_for_everyone():
    """Kueue v0.17.0 resource_node.go available(): cq1 borrowed 6 of the cohort's 30, so cq2 can
    borrow 4 more, not 10 (courselib admitted the second 16-GPU workload before: over-admission;
    upstream scheduler_test.go "only one workload can borrow ... if cohort quota cannot fit")."""
    queues = [Queue(f"cq{i}", 10, cohort="co", borrowing_limit=10) for i in (1, 2, 3)]
    w = Workload(ClusterSpec(8, 8), [Job("wl1", 2, 8, duration=600, queue="cq1", priority=1),
                                     Job("wl2", 2, 8, duration=600, queue="cq2")], queues)
    r = simulate(w, "kueue", horizon=60)
    assert r.job("wl1").start == 0 and r.job("wl2").start is None
    assert r.job("wl2").pending_reason.endswith("in flavor default-flavor, 2 more needed")
    never = Workload(w.cluster, [Job("huge", 5, 8, duration=600, queue="cq1")], queues)
    assert simulate(never, "kueue", horizon=60).job("huge").pending_reason.endswith(
        "request (40) > maximum capacity (20)")


# ---- Slurm ---------------------------------------------------------------------------------------
def test_slurm_backfill_with_reservations():
    """FACTS §3.4 sched_config.shtml L68/L83/L88: start lower-priority jobs only if no reservation moves."""
    from courselib.io.workload import load_workload
    w = load_workload(EXAMPLES / "slurm-backfill.yaml")
    r = simulate(w, "slurm", check=True)
    assert r.job("short").start == 120  # fits before wide's reservation at 1h
    assert r.job("wide").start == 3600  # not delayed
    assert r.job("long").start == 3600 + 7200
    mid = simulate(w, "slurm", horizon=1800)
    assert (mid.job("wide").pending_reason, mid.job("long").pending_reason) == ("Resources", "Priority")


@pytest.mark.parametrize("reference", [False, True])
def test_slurm_backfill_window_is_closed_at_its_end(reference):
    """Slurm's backfill keeps a job off the nodes of a reservation that begins exactly when the job
    would end: a reservation's slot counts if ``begin_time <= end_time``, the job's end being start +
    time limit (backfill.c at slurm-26-05-3-1 L3015, L3088-3090); one that ends exactly at the job's
    start does not (``end_time <= start_res``). Seen on the real Slurm 26.05.5 (the busy replay at 51 s).
    With a backfill pass at every event (``bf_interval=0``); at slurm.conf's 30 s, the second pass."""
    H = 3600.0
    jobs = [Job("run", 1, 8, duration=H, time_limit=H),
            Job("wide", 2, 8, submit=1, duration=H, time_limit=H, priority=9),  # reserved from 1 h
            Job("edge", 1, 8, submit=2, duration=H - 2, time_limit=H - 2)]      # would end at 1 h
    r = simulate(Workload(ClusterSpec(2, 8), jobs), "slurm", check=True, reference=reference, bf_interval=0.0)
    assert r.job("wide").start == H
    assert r.job("edge").start == 2 * H  # not at 2 s on the free node: it would end as wide's reservation begins
    # one second shorter, it ends before the reservation begins: backfilled at once
    jobs[2] = replace(jobs[2], duration=H - 3, time_limit=H - 3)
    r = simulate(Workload(ClusterSpec(2, 8), jobs), "slurm", check=True, reference=reference, bf_interval=0.0)
    assert r.job("edge").start == 2 and r.job("wide").start == H
    # at the default interval: the first pass ran at 1 s (wide blocked), the next 30 s later; at 31 s
    # edge would end at 1 h + 28 s, inside wide's reservation, so it waits for wide
    r = simulate(Workload(ClusterSpec(2, 8), jobs), "slurm", check=True, reference=reference)
    assert r.job("edge").start == 2 * H and r.job("wide").start == H
    jobs[2] = replace(jobs[2], duration=H - 40, time_limit=H - 40)  # ends by 1 h from 31 s: backfilled then
    r = simulate(Workload(ClusterSpec(2, 8), jobs), "slurm", check=True, reference=reference)
    assert r.job("edge").start == 31 and r.job("wide").start == H


def test_slurm_without_backfill_is_strict_priority_order():
    """FACTS §3.4 L16: without backfill, once a job is left pending no other job is scheduled."""
    from courselib.io.workload import load_workload
    w = load_workload(EXAMPLES / "slurm-backfill.yaml")
    r = simulate(w, "slurm", horizon=1800, backfill=False)
    assert r.job("short").start is None and r.job("short").pending_reason == "Priority"


def test_slurm_default_reserves_for_every_job_easy_only_for_one():
    """FACTS §3.4 / §7.2: bf_job_part_count_reserve=0 "will reserve resources for any pending job";
    1 approximates EASY (only the top job is protected, so a small job may delay the second one)."""
    jobs = [Job("run", 2, 8, duration=3600), Job("run2", 2, 8, duration=7200),
            Job("w1", 5, 8, submit=1, duration=3600, priority=9),
            Job("w2", 3, 8, submit=1, duration=3000, priority=8),  # ends before w1's reservation at 2 h
            Job("small", 1, 8, submit=2, duration=5400)]
    w = Workload(ClusterSpec(5, 8), jobs)
    conservative = simulate(w, "slurm", check=True, bf_interval=0.0)  # (a backfill pass at every event)
    easy = simulate(w, "slurm", check=True, bf_job_part_count_reserve=1, bf_interval=0.0)
    assert conservative.job("w2").start == 3600 and conservative.job("small").start > 2
    assert easy.job("small").start == 2 and easy.job("w2").start > 3600
    assert conservative.job("w1").start == easy.job("w1").start == 7200  # the top job is never delayed
    p0 = make_policy("slurm", w)
    assert (p0.bf_job_part_count_reserve, p0.bf_max_job_test, p0.bf_window) == (0, 500, 86400)
    assert p0.bf_interval == 30  # slurm.conf's default (backfill.c L102-104)


def test_slurm_reasons_partition_node_limit_and_bad_constraints():
    """FACTS §3.4 job_reason_codes.shtml: PartitionNodeLimit, BadConstraints (never Resources)."""
    w = Workload(ClusterSpec(4, 8, features=("nvlink",)),
                 [Job("huge", 40, 1, duration=60), Job("h100", 1, 1, duration=60, constraint="h100"),
                  Job("ok", 1, 1, duration=60, constraint="nvlink")])
    r = simulate(w, "slurm")
    assert r.job("huge").pending_reason == "PartitionNodeLimit"
    assert r.job("h100").pending_reason == "BadConstraints"
    assert r.job("ok").state == "COMPLETED"


def test_slurm_exclusive_takes_whole_nodes_and_time_limit_ends_in_timeout():
    """FACTS §3.4 sbatch.1 L940-947 (--exclusive: all GPUs of the nodes), L2477-2487 (--time)."""
    w = Workload(ClusterSpec(4, 8), [Job("x", 3, 2, duration=7200, exclusive=True, time_limit=3600),
                                     Job("y", 1, 8, duration=60)])
    r = simulate(w, "slurm", check=True)
    assert r.job("x").gpus_held_max == 8 and r.job("x").state == "TIMEOUT" and r.job("x").end == 3600
    w2 = Workload(ClusterSpec(2, 8), [Job("x", 3, 4, duration=60, exclusive=True)])
    assert simulate(w2, "slurm").job("x").gpus_held_max == 16


def test_slurm_matching_or_constraint_keeps_the_job_in_one_island():
    """FACTS §3.4 sbatch.1 L281-286: [rack1|rack2] -- all nodes allocated on a single rack."""
    assert alternatives("[island0|island1]") == ["island0", "island1"]
    assert parse_constraint("a&b|c") == [frozenset({"a", "b"}), frozenset({"c"})]
    w = Workload(ClusterSpec(4, 8, island_size=2),
                 [Job("one", 1, 4, duration=60), Job("g", 2, 8, duration=60, constraint="[island0|island1]")])
    r = simulate(w, "slurm", check=True)
    islands = {e.what for e in r.trace if e.job == "g"}
    assert r.job("g").start == 0 and islands
    c = Cluster(w.cluster)
    assert c.nodes[2].features == frozenset({"island1"})


# ---- preemption (used by the NCCL chapter) -----------------------------------------------------------
def test_preempting_one_rank_restarts_the_whole_job():
    """FACTS §4.3: "if k<=n workers fail all workers are stopped and restarted"."""
    w = Workload(ClusterSpec(2, 8), [Job("low", 16, 1, duration=3600),
                                     Job("high", 1, 1, submit=600, duration=600, priority=100)])
    r = simulate(w, "kube-default", check=True, preemption=True)
    low = r.job("low")
    assert low.restarts == 1 and low.start == 0
    assert low.end == 1200 + 3600  # restarted from scratch when "high" finished at 1200
    assert r.job("high").start == 600
    assert low.wasted_gpu_hours == pytest.approx(15 * 600 / 3600)
    plain = simulate(w, "kube-default")
    assert plain.job("high").start == 3600 and plain.job("low").restarts == 0


@pytest.mark.parametrize("reference", [False, True])
def test_preemption_frees_a_whole_exclusive_node_or_takes_every_pod_for_one(reference):
    """The dry run removes every lower-priority pod, then reprieves each only if the preemptor
    still passes every filter (kube-scheduler v1.37.2 ``default_preemption.go`` L286-448): a node
    owned by an exclusive job is free only once all its pods there are gone, and an exclusive pod
    needs a node with no pod on it. Counting GPUs alone reprieved a pod that still blocked the
    node: the victim was deleted, the preemptor did not fit, the victim came back, for ever."""
    one = ClusterSpec(1, 8)
    w = Workload(one, [Job("low", 2, 4, duration=3600, exclusive=True),
                       Job("high", 1, 1, submit=600, duration=600, priority=100)])
    r = simulate(w, "kube-default", check=True, preemption=True, reference=reference)
    assert r.job("high").start == 600 and r.job("high").end == 1200
    low = r.job("low")
    assert (low.start, low.restarts, low.end) == (0, 1, 1200 + 3600)
    assert sum("preempted" in e.what for e in r.trace if e.job == "low") >= 1
    w2 = Workload(one, [Job("low", 8, 1, duration=3600),
                        Job("high", 1, 1, submit=600, duration=600, priority=100, exclusive=True)])
    r2 = simulate(w2, "kube-default", check=True, preemption=True, reference=reference)
    assert r2.job("high").start == 600 and r2.job("low").end == 1200 + 3600
    r3 = simulate(LIVELOCK, "kube-default", check=True, preemption=True, reference=reference)
    assert r3.job("high").start == 600 and r3.job("low").end == 1200 + 3600


# a third, waiting pod of "low" fits its own node again after each failed preemption
LIVELOCK = Workload(ClusterSpec(1, 8), [Job("low", 3, 4, duration=3600, exclusive=True, min_member=2),
                                        Job("high", 1, 1, submit=600, duration=600, priority=100)])


def test_a_livelock_fails_with_the_time_instead_of_hanging(monkeypatch):
    """The engine's bound on cycles at one instant: with the old GPU-only dry run (which reprieves
    a pod that keeps the node exclusive) ``LIVELOCK`` never leaves t = 600 s."""
    from courselib.sim.gang import NoProgress

    def gpus_only(cluster, job, i, gone):
        freed = sum(cluster.alloc[name][i].gpus * k // cluster.jobs_on[i][name] for name, k in gone.items())
        return cluster.free[i] + freed >= job.gpus_per_pod

    monkeypatch.setattr(Cluster, "fits_without", gpus_only)
    with pytest.raises(NoProgress, match=r"at t = 600 s .*policy kube-default"):
        simulate(LIVELOCK, "kube-default", preemption=True)


def _preempted(r) -> dict[str, int]:
    """Pods each job lost to preemption, read from the trace."""
    out: dict[str, int] = {}
    for e in r.trace:
        if " preempted by " in e.what:
            out[e.job] = out.get(e.job, 0) + 1
    return out


GiB = 2 ** 30
# one 8-GPU node with 100 GiB: "hog" (more important than "wide") holds the memory the group needs
MEMORY_BOUND = Workload(ClusterSpec(1, 8, memory_per_node=100 * GiB), [
    Job("wide", 1, 4, duration=3600, priority=1, memory_per_pod=10 * GiB),
    Job("hog", 1, 1, duration=3600, priority=2, memory_per_pod=80 * GiB),
    Job("high", 1, 4, submit=600, duration=600, priority=100, memory_per_pod=50 * GiB,
        preemption_policy="PreemptLowerPriority")])


def test_group_preemption_takes_the_victim_that_holds_the_memory():
    """kube-gang's workload-aware preemption runs the group's scheduling with every filter on the
    cluster without victims, then reprieves each victim only if every placed pod still passes the
    filters (kube-scheduler v1.37.2 ``podgrouppreemption.go`` L223-240, L258-331; memory is
    NodeResourcesFit's ``Insufficient memory``, ``noderesources/fit.go`` L743-750). Counting GPUs
    alone reprieved ``hog`` (1 GPU back, 3 left) and deleted ``wide``: 20 GiB free, the group
    still did not fit, ``wide`` came back, at t = 600 s for ever."""
    r = simulate(MEMORY_BOUND, "kube-gang", check=True)
    assert _preempted(r) == {"hog": 1}
    assert (r.job("high").start, r.job("high").end) == (600, 1200)
    assert (r.job("wide").restarts, r.job("wide").end) == (0, 3600)
    assert (r.job("hog").restarts, r.job("hog").end) == (1, 1200 + 3600)   # back when high ends


def test_group_preemption_frees_an_exclusive_node_whole():
    """A node an exclusive job owns is free only once its last pod there is gone. Counting GPUs
    alone took 2 of the 3 pods of ``low`` (one stayed and kept the node), and on two owned nodes one
    pod of each: the group placed nothing. The real dry run places the group once with every
    victim gone, most free GPUs first, so its two pods go one to each node and both owners go
    whole (not the fewest victims: one node would have held both pods). (Whole-node ownership by
    pods smaller than a node is the model's filter: a replay refuses such a job, ``live/kube/plan.py``.)"""
    one = Workload(ClusterSpec(1, 8), [
        Job("low", 3, 1, duration=3600, exclusive=True),
        Job("high", 2, 1, submit=600, duration=600, priority=100, preemption_policy="PreemptLowerPriority")])
    r = simulate(one, "kube-gang", check=True)
    assert _preempted(r) == {"low": 3}
    assert r.job("high").start == 600 and r.job("low").end == 1200 + 3600
    two = Workload(ClusterSpec(2, 8), [
        Job("own-a", 2, 1, duration=3600, exclusive=True),
        Job("own-b", 2, 1, duration=3600, exclusive=True, priority=1),
        Job("high", 2, 1, submit=600, duration=600, priority=100, preemption_policy="PreemptLowerPriority")])
    r2 = simulate(two, "kube-gang", check=True)
    assert _preempted(r2) == {"own-a": 2, "own-b": 2}
    assert r2.job("high").start == 600
    assert r2.job("own-a").end == r2.job("own-b").end == 1200 + 3600


@pytest.mark.parametrize("reference", [False, True])
def test_kueue_block_admission_lifts_when_the_admitted_workload_is_ready(reference):
    # v1beta1 defaults: blockAdmission on. `first` is admitted, placed and ready at t=0; that
    # PodsReady unblocks `second` at once (same instant), not at the 5-minute PodsReady timer.
    w = Workload(ClusterSpec(nodes=2, gpus_per_node=8),
                 [Job("first", pods=1, gpus_per_pod=8, duration=3600),
                  Job("second", pods=1, gpus_per_pod=8, duration=3600)])
    r = simulate(w, "kueue", config_api="v1beta1", reference=reference)
    assert [e.what for e in r.trace if e.job == "second"][1].startswith("waiting: Pending: admission blocked")
    assert r.job("first").start == 0 and r.job("second").start == 0
    # and while an admitted workload is not ready, the next one stays blocked: `frag` spreads 4+4
    # GPUs over both nodes, so `big` (one 8-GPU pod) is admitted by quota but cannot be placed
    w2 = Workload(ClusterSpec(nodes=2, gpus_per_node=8),
                  [Job("frag", pods=2, gpus_per_pod=4, duration=3600),
                   Job("big", pods=1, gpus_per_pod=8, duration=3600),
                   Job("small", pods=1, gpus_per_pod=1, duration=60)])
    r2 = simulate(w2, "kueue", config_api="v1beta1", reference=reference, horizon=3600)
    assert r2.job("frag").start == 0 and r2.job("big").evictions >= 1
    assert r2.job("small").start == 300   # only after `big` is evicted at its PodsReady timeout


# ---- kube-gang: Kubernetes v1.37.2's own gang scheduling ------------------------------------------
def test_kube_gang_story1_one_gang_binds_the_other_holds_nothing():
    """The PodGroup cycle (schedule_one_podgroup.go L556-648): b's 512 pods are tried on the snapshot,
    88 fit, PlacementFeasible stops at the first that does not (gangscheduling.go L494-497) and the
    88 tentative placements are reverted: b holds nothing for the 2 h a trains."""
    for reference in (False, True):
        r = simulate(two_512_jobs(), "kube-gang", check=True, reference=reference)
        assert not r.deadlock and r.wasted_gpu_hours == 0
        assert (r.job("a").start, r.job("b").start) == (0, 7200)
        assert r.job("b").first_bound == 7200
        waits = [e.what for e in r.trace if e.job == "b" and e.what.startswith("waiting")]
        assert waits == ["waiting: PodGroup Unschedulable: minCount (512) cannot be satisfied: "
                         "88 scheduled, 423 remaining"]


def test_kube_gang_story1_pod_by_pod_permit_timeout_turns_the_deadlock_into_a_livelock():
    """Without the PodGroup cycle (the v1.35 design) each job's 300 assumed pods wait at Permit; at
    300 s (permitTimeoutDuration, gangscheduling.go L42) they are rejected and unreserved, the other
    job's unschedulable pods take the freed GPUs, the rejected ones come back after the 5-minute
    unschedulable flush (scheduling_queue.go L65): GPUs held idle, nothing trains, no fixed point."""
    r = simulate(two_512_jobs(), "kube-gang", horizon=3600, check=True, pod_group_cycle=False)
    assert not r.deadlock  # the timers keep changing the world
    assert all(j.start is None and j.gpus_held_max == 300 for j in r.jobs)
    timeouts = [(e.time, e.job, e.held) for e in r.trace if e.what.startswith("Permit timeout")]
    assert timeouts[:2] == [(300.0, "a", 0), (300.0, "b", 0)]
    rebound = [(e.job, e.held) for e in r.trace if e.time == 300.0 and e.what.startswith("bound")]
    assert rebound == [("a", 212), ("b", 212)]  # the 212 + 212 pods left in the queue
    assert r.wasted_gpu_hours == pytest.approx(sum(j.wasted_gpu_hours for j in r.jobs))
    # 600 GPUs idle for 300 s, then 424 (the 212 + 212 left) for 300 s, and again: 512 GPU-h in the hour
    assert r.wasted_gpu_hours == pytest.approx((600 * 300 + 424 * 300) * 6 / 3600) == 512


def test_kube_gang_story2_nothing_held_while_the_finetune_runs():
    from courselib.io.workload import load_workload
    w = load_workload(EXAMPLES / "seed-400-of-512-25min.yaml")
    r = simulate(w, "kube-gang", check=True)
    assert r.job("pretrain").start == 25 * 60 and r.job("pretrain").first_bound == 25 * 60
    assert r.wasted_gpu_hours == 0
    # pod by pod (the v1.35 design): 400 pods assumed at t=0 wait at Permit and are let go at 300 s;
    # the 112 left take 112 of them, and the two halves of the gang never wait at the same time again
    # (each comes back when the other times out): the model's livelock of one gang with itself
    p = simulate(w, "kube-gang", check=True, horizon=2 * 3600, pod_group_cycle=False)
    held = [(e.time, e.held) for e in p.trace if e.job == "pretrain" and e.what[:5] in ("bound", "Permi")]
    assert held[:4] == [(0.0, 400), (300.0, 0), (300.0, 112), (600.0, 0)]
    assert p.job("pretrain").start is None


def test_kube_gang_freed_capacity_goes_to_the_smaller_waiting_gang_first():
    """Failed PodGroups wait in the backoffQ at 10 s x sqrt(pods) (backoff_queue.go L249-266) and the
    backoffQ pops the earliest backoff end first (L193-201): when the first job ends, the 16-pod gang
    submitted later is tried before the 64-pod one and takes the GPUs."""
    w = Workload(ClusterSpec(8, 8), [Job("first", 64, 1, submit=0, duration=600),
                                     Job("big", 64, 1, submit=60, duration=600),
                                     Job("small", 16, 1, submit=120, duration=600)])
    for reference in (False, True):
        r = simulate(w, "kube-gang", check=True, reference=reference)
        assert [r.job(n).start for n in ("first", "small", "big")] == [0, 600, 1200]
        assert r.wasted_gpu_hours == 0


def test_kube_gang_priority_sort_among_groups_never_tried():
    """PrioritySort (priority_sort.go L43-47) on the PodGroup's priority (framework/types.go L976-984)."""
    w = Workload(ClusterSpec(2, 8), [Job("low", 16, 1, duration=600, priority=0),
                                     Job("high", 16, 1, duration=600, priority=5)])
    r = simulate(w, "kube-gang", check=True)
    assert (r.job("high").start, r.job("low").start) == (0, 600)


def test_kube_gang_min_count_below_pods_binds_what_fits_and_the_rest_later():
    """minCount 4 of 8 pods: the cycle places every pod that fits (6), succeeds (>= minCount) and the
    2 left are requeued (scheduling_queue.go L1215-1220), bound when GPUs free up."""
    w = Workload(ClusterSpec(1, 8), [Job("other", 2, 1, duration=100),
                                     Job("elastic", 8, 1, min_member=4, duration=1000)])
    r = simulate(w, "kube-gang", check=True)
    e = r.job("elastic")
    assert e.start == 0 and e.gpus_held_max == 8
    bound = [(ev.time, ev.what.split(":")[0]) for ev in r.trace if ev.job == "elastic" and ev.what.startswith("bound")]
    assert bound == [(0.0, "bound 6 pods"), (100.0, "bound 2 pods")]


def test_kube_gang_options_are_checked():
    with pytest.raises(ValueError, match="15 minutes"):
        make_policy("kube-gang", two_512_jobs(), permit_timeout=901)
    with pytest.raises(ValueError, match="no option"):
        make_policy("kube-gang", two_512_jobs(), timeout=60)
    assert "kube-gang" in policy_names()


# ---- a real run's order of PodGroups tried, recorded and replayed ------------------------------
def test_kube_gang_replays_which_gang_the_real_scheduler_tried_first():
    r = simulate(two_512_jobs(), "kube-gang", check=True, group_order="b,a")
    assert (r.job("b").start, r.job("a").start) == (0, 7200)


@pytest.mark.parametrize("value", ["a,c", ["z"], 5])
def test_a_recorded_group_order_is_checked(value):
    with pytest.raises(ValueError, match="which is not a job"):
        make_policy("kube-gang", two_512_jobs(), group_order=value)

def test_volcano_podgroup_without_min_resources_passes_enqueue_and_waits_at_allocate():
    """enqueue.go L95-97: no minResources means Inqueue at once; allocate.go discards a partial placement."""
    from courselib.model.workload import ClusterSpec, Job, Workload
    w = Workload(ClusterSpec(64, 8), [Job("finetune", 14, 8, 0, 1500.0), Job("pretrain", 64, 8, 1, 7200.0)])
    with_mr = simulate(w, "volcano")
    without = simulate(w, "volcano", min_resources=False)
    said = lambda r: [e.what for e in r.trace if e.job == "pretrain"]
    assert any("overused (overcommit)" in x for x in said(with_mr))          # held back at enqueue
    assert not any("overused" in x for x in said(without))
    assert any("Inqueue at once" in x for x in said(without))
    assert any("tasks in gang unschedulable" in x for x in said(without))   # allocate discards it
    assert without.job("pretrain").start == with_mr.job("pretrain").start == 1500.0
    assert without.wasted_gpu_hours == with_mr.wasted_gpu_hours == 0.0      # nothing bound either way


@pytest.mark.parametrize("reference", [False, True])
def test_volcano_s_gang_message_counts_the_tasks_that_did_not_fit(reference):
    """Volcano v1.15.1 gang.go L237-252: U = minAvailable - (ready + allocated in the discarded
    statement), N = every task: the seed's 512-rank job with 400 GPUs free says "112/512"."""
    w = load_workload(EXAMPLES / "seed-400-of-512-25min.yaml")
    r = simulate(w, "volcano", min_resources=False, horizon=600, reference=reference)
    job, free = w.job("pretrain"), w.cluster.total_gpus - w.job("finetune").gpus
    fit = free // job.gpus_per_pod                                  # uniform pods: a second way
    assert r.job("pretrain").pending_reason == (f"Unschedulable/NotEnoughResources: {job.min_member - fit}/"
                                                f"{job.pods} tasks in gang unschedulable")
    assert "112/512" in r.job("pretrain").pending_reason


@pytest.mark.parametrize("reference", [False, True])
def test_volcano_s_gang_message_counts_bound_tasks_as_ready(reference):
    """An elastic job (minMember 6 of 8) that holds 2 pods and finds 3 more GPUs free: the discarded
    statement placed 3, so U = 6 - 2 - 3 = 1 ("1/8"), not the 6 still missing nor all 8."""
    from courselib.model.gang import SchedState
    from courselib.model.policies.volcano import gang_message
    w = Workload(ClusterSpec(1, 8), [Job("other", 3, 1, duration=60.0), Job("a", 8, 1, duration=60.0, min_member=6)])
    state = SchedState(w, reference=reference)
    other, run = state.submit(w.jobs[0]), state.submit(w.jobs[1])
    assert state.place(other, 3) == 3 and state.place(run, 2) == 2
    assert not state.place_all_or_nothing(run, 4)          # 4 more needed, 3 fit: rolled back
    assert (state.last_fit, state.bound(run)) == (3, 2)
    assert gang_message(run.job, state.bound(run), state.last_fit).endswith(": 1/8 tasks in gang unschedulable")


def test_kueue_says_in_every_admission_whether_wait_for_pods_ready_is_on():
    w = load_workload(EXAMPLES / "kueue-quota-not-placement.yaml")
    on, off = simulate(w, "kueue"), simulate(w, "kueue", wait_for_pods_ready=False, horizon=6 * 3600)
    admitted = lambda r: [e.what for e in r.trace if e.what.startswith("admitted")]
    assert admitted(on) and all("waitForPodsReady on" in x for x in admitted(on))
    assert admitted(off) and all("waitForPodsReady off (Kueue v0.17's default)" in x for x in admitted(off))
    assert on.job("big").evictions >= 1 and off.job("big").evictions == 0
