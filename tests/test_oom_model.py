"""The OOM model against FACTS §1-2 and §6-7: every test names the fact it checks."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.model.badness import (LONG_MIN, Task, adj_unit, global_totalpages, memcg_totalpages,
                                     oom_badness, proc_oom_score, select_victim)
from courselib.model.memcg import (DEADLOCK_PANIC, Cgroup, ExitStatus, Process, memcg_oom, node_oom,
                                   oom_group_of)
from courselib.model.qos import (BESTEFFORT, BURSTABLE, GUARANTEED, Container, Pod,
                                 burstable_oom_score_adj, container_oom_score_adj, qos_class)
from courselib.model.restart import restart_delay, restart_delays, restart_times, terminated_by_oom
from budget import examples

GiB = 1024 ** 3
MiB = 1024 ** 2


# --- FACTS §1.1 oom_badness --------------------------------------------------------------------

def test_badness_formula_sums_rss_swap_pagetables_and_scaled_adj():
    # FACTS §1.1: points = rss + swapents + pgtables_bytes/PAGE_SIZE + adj * (totalpages/1000)
    t = Task("a", rss=150000, swap=1000, pagetables=8192 * 4 + 100, oom_score_adj=10)
    assert oom_badness(t, 262144) == 150000 + 1000 + 8 + 10 * 262


def test_adj_unit_rounds_down():
    # FACTS §1.1: "totalpages/1000 is unsigned-long integer division, so it rounds down"
    assert adj_unit(262144) == 262 and adj_unit(999) == 0


def test_adj_min_never_scores():
    # FACTS §1.1: OOM_SCORE_ADJ_MIN (-1000) returns LONG_MIN and is skipped
    assert oom_badness(Task("a", 10 ** 9, oom_score_adj=-1000), 10 ** 6) == LONG_MIN
    assert oom_badness(Task("k", 5, unkillable=True), 10 ** 6) == LONG_MIN


def test_negative_points_still_eligible_and_no_floor_at_one():
    # FACTS §1.1 "Negative scores still kill" and "no ... return points > 0 ? points : 1 any more"
    t = Task("a", rss=100, oom_score_adj=-999)
    assert oom_badness(t, 1_000_000) == 100 - 999 * 1000
    assert select_victim([t], 1_000_000).victim == 0


def test_adj_outside_range_is_refused():
    # FACTS §1.1: oom_score_adj_write() rejects values outside [-1000, 1000] with -EINVAL
    with pytest.raises(ValueError):
        Task("a", 1, oom_score_adj=1001)


# --- FACTS §1.2 victim selection and ties ------------------------------------------------------

def test_equal_points_last_scanned_wins():
    # FACTS §1.2 tie rule [derived]: `points < chosen_points` skips, so equal points replace
    tasks = [Task("first", 500), Task("second", 500), Task("small", 100)]
    assert tasks[select_victim(tasks, 10 ** 6).victim].name == "second"
    rev = list(reversed(tasks))
    assert rev[select_victim(rev, 10 ** 6).victim].name == "first"  # now "first" is scanned last


def test_any_eligible_task_beats_nothing():
    # FACTS §1.2: chosen_points starts at LONG_MIN; a lone task with adj -998 is still killed
    out = memcg_oom([Process(Task("x", 10, oom_score_adj=-998)),
                     Process(Task("p", 10 ** 6, oom_score_adj=-1000))], 65536)
    assert out.victim == "x" and out.killed == ("x",)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(-1000, 1000)), min_size=1, max_size=8),
       st.integers(1, 10 ** 7))
def test_victim_has_the_most_points_and_is_the_last_of_equals(specs, total):
    # FACTS §1.2: highest points wins; ties -> last evaluated; -1000 never
    tasks = [Task(f"t{i}", rss, oom_score_adj=adj) for i, (rss, adj) in enumerate(specs)]
    choice = select_victim(tasks, total)
    eligible = [i for i, t in enumerate(tasks) if t.oom_score_adj != -1000]
    if not eligible:
        assert choice.victim is None
        return
    best = max(choice.points[i] for i in eligible)
    assert choice.victim == max(i for i in eligible if choice.points[i] == best)


# --- FACTS §1.3 totalpages ---------------------------------------------------------------------

def test_totalpages_global_is_ram_plus_swap():
    # FACTS §1.3: oc->totalpages = totalram_pages() + total_swap_pages
    assert global_totalpages(4_000_000, 500_000) == 4_500_000


def test_totalpages_memcg_is_limit_plus_usable_swap():
    # FACTS §1.3 mem_cgroup_get_max: max += min(swap.max, total_swap_pages) when swappiness != 0
    assert memcg_totalpages(262144, total_swap_pages=0) == 262144
    assert memcg_totalpages(262144, swap_max_pages=1000, total_swap_pages=500) == 262644
    assert memcg_totalpages(262144, swap_max_pages=1000, total_swap_pages=5000, swappiness=0) == 262144
    # v1: swap part = memsw.max - max
    assert memcg_totalpages(1000, cgroup="v1", memsw_max_pages=1300, total_swap_pages=10 ** 6) == 1300
    assert memcg_totalpages(0) == 1  # "?: 1"


def test_adj_point_is_worth_limit_over_1000_in_a_container():
    # FACTS §1.3: "in a container OOM, one adj point is worth limit_pages/1000 pages, not node_pages/1000"
    a, b = Task("a", 100_000), Task("b", 60_000, oom_score_adj=10)
    procs = [Process(a), Process(b)]
    # 1 GiB memcg: 10 points = 10 * 262 pages, b scores 62620 < 100000
    assert oom_badness(b, 262144) == 62_620 and memcg_oom(procs, 262144).victim == "a"
    # 16 GiB node: 10 points = 10 * 4194 pages, b scores 101940 > 100000
    assert oom_badness(b, 4 * 1024 * 1024) == 101_940 and node_oom(procs, 4 * 1024 * 1024).victim == "b"


def test_memcg_oom_considers_only_its_subtree_and_never_panics():
    # FACTS §1.3: only tasks in the memcg subtree; no panic in a memcg OOM
    procs = [Process(Task("outside", 10 ** 6), "/other"), Process(Task("inside", 10), "/pod"),
             Process(Task("guard", 10 ** 5, oom_score_adj=-1000), "/pod/c")]
    out = memcg_oom(procs, 1000, domain="/pod")
    assert out.victim == "inside" and "outside" not in out.points
    none = memcg_oom([Process(Task("g", 5, oom_score_adj=-1000))], 1000)
    assert none.victim is None and none.panic is None and none.events.oom == 1


def test_global_oom_with_nobody_to_kill_panics():
    # FACTS §1.3: panic("System is deadlocked on memory") only for non-memcg OOMs
    out = node_oom([Process(Task("g", 5, oom_score_adj=-1000))], 10 ** 6)
    assert out.victim is None and out.panic == DEADLOCK_PANIC == "System is deadlocked on memory"


# --- FACTS §1.4 /proc/PID/oom_score ------------------------------------------------------------

def test_proc_oom_score_formula_and_range():
    # FACTS §1.4: (1000 + badness*1000/totalpages) * 2/3, 0 for -1000
    total = 24105 * 256
    assert proc_oom_score(Task("x", 4152), total) == (1000 + 4152 * 1000 // total) * 2 // 3 == 666
    # rss = totalpages, adj 1000: badness 12340880; 12340880*1000/6170880 = 1999; (1000+1999)*2/3 = 1999
    assert proc_oom_score(Task("x", total, oom_score_adj=1000), total) == 1999
    assert proc_oom_score(Task("x", 0, oom_score_adj=-999), 10 ** 6) == 0  # truncation toward zero
    assert proc_oom_score(Task("x", 10 ** 9, oom_score_adj=-1000), 10 ** 6) == 0


def test_proc_oom_score_truncates_toward_zero_like_c():
    # FACTS §1.4: C long arithmetic. badness -1500 over 1e6 pages: -1500000/1e6 = -1 (not -2)
    t = Task("x", 0, oom_score_adj=-1)  # badness = -1 * 1000 = -1000 pages at totalpages 1e6
    total = 1_000_000
    assert oom_badness(t, total) == -1000
    assert proc_oom_score(t, total) == (1000 + (-1)) * 2 // 3


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 10 ** 7), st.integers(-999, 1000), st.integers(1000, 10 ** 8))
def test_proc_oom_score_stays_in_0_2000(rss, adj, total):
    # FACTS §7.5: "oom_score range is 0-2000"
    assert 0 <= proc_oom_score(Task("x", min(rss, total), oom_score_adj=adj), total) <= 2000


# --- FACTS §1.5 memory.oom.group and memory.events ---------------------------------------------

def test_group_kill_spares_minus_1000_and_counts_the_victim_twice():
    # FACTS §1.5: group members except oom_score_adj -1000; oom_group_kill += 1;
    # [derived] the victim can add to oom_kill twice -> oom_kill >= members killed
    procs = [Process(Task("pause", 256, oom_score_adj=-1000)), Process(Task("main", 46080)),
             Process(Task("helper", 10240))]
    out = memcg_oom(procs, 65536, cgroups=(Cgroup("/", 65536, oom_group=True),))
    assert out.victim == "main" and out.killed == ("main", "helper") and out.group == "/"
    assert out.events.oom_group_kill == 1 and out.events.oom_kill >= len(out.killed)
    assert out.events.oom_kill == 3


def test_group_is_the_highest_ancestor_with_the_flag_up_to_the_domain():
    # FACTS §1.5: walk from the victim's memcg up to the OOMing memcg, keep the last with oom_group
    groups = {"/pod": True, "/pod/c": True, "/": True}
    assert oom_group_of("/pod/c", "/pod", groups, "v2") == "/pod"
    assert oom_group_of("/pod/c", "/", groups, "v2") == "/"
    assert oom_group_of("/pod/c", "/pod/c", groups, "v2") == "/pod/c"


def test_no_group_kill_on_cgroup_v1():
    # FACTS §1.5/§1.6: cgroup v2 only (cgroup_subsys_on_dfl check)
    procs = [Process(Task("main", 46080)), Process(Task("helper", 10240))]
    out = memcg_oom(procs, 65536, cgroup="v1", cgroups=(Cgroup("/", 65536, oom_group=True),))
    assert out.killed == ("main",) and out.events.oom_group_kill == 0


# --- FACTS §6, §2.4 exit status ------------------------------------------------------------------

def test_sigkill_is_137_and_minus_9():
    # FACTS §6: 137 = 128 + SIGKILL(9); §2.4 reason OOMKilled
    assert ExitStatus().exit_code == 137 and ExitStatus().returncode == -9
    t = terminated_by_oom()
    assert (t.reason, t.exit_code, t.signal) == ("OOMKilled", 137, 9)


# --- FACTS §2.1 QoS ------------------------------------------------------------------------------

def c(name="app", req=None, lim=None, **kw):
    return Container(name, req or {}, lim or {}, **kw)


def test_qos_classes():
    # FACTS §2.1 GetPodQOS
    assert qos_class(Pod("p", (c(),))) == BESTEFFORT
    assert qos_class(Pod("p", (c(req={"cpu": 500, "memory": GiB}, lim={"cpu": 500, "memory": GiB}),))) == GUARANTEED
    assert qos_class(Pod("p", (c(req={"memory": GiB}, lim={"memory": 2 * GiB}),))) == BURSTABLE
    # a container lacking a cpu limit makes the pod non-Guaranteed
    assert qos_class(Pod("p", (c(req={"memory": GiB}, lim={"memory": GiB}),))) == BURSTABLE
    # init containers count
    assert qos_class(Pod("p", (c(),), (c("init", req={"memory": MiB}),))) == BURSTABLE


def test_limits_only_is_guaranteed_after_defaulting():
    # FACTS §2.1 Defaulting: a limit without a request gets request = limit
    assert qos_class(Pod("p", (c(lim={"cpu": 1000, "memory": GiB}),))) == GUARANTEED


# --- FACTS §2.2 oom_score_adj --------------------------------------------------------------------

def test_kubelet_constants():
    # FACTS §2.2: Guaranteed -997, BestEffort 1000
    g = Pod("p", (c(lim={"cpu": 1000, "memory": GiB}),))
    b = Pod("p", (c(),))
    assert container_oom_score_adj(g, g.containers[0], 16 * GiB) == -997
    assert container_oom_score_adj(b, b.containers[0], 16 * GiB) == 1000


def test_burstable_formula_and_clamp_at_3_not_2():
    # FACTS §2.2 clamp(1000 - 1000*req/cap, 3, 999); §7.3 "lower clamp is 3, not 2";
    # upstream test: "request-no-limit": 3 with standardMemoryAmount = 8000000000
    assert burstable_oom_score_adj(2 * GiB, 16 * GiB) == 875
    assert burstable_oom_score_adj(8_000_000_000 - 1, 8_000_000_000) == 3
    assert burstable_oom_score_adj(8_000_000_000, 8_000_000_000) == 3
    assert burstable_oom_score_adj(0, 16 * GiB) == 999   # an exact 1000 becomes 999
    assert burstable_oom_score_adj(1, 16 * GiB) == 999
    pod = Pod("p", (c(req={"memory": 8_000_000_000}),))
    assert container_oom_score_adj(pod, pod.containers[0], 8_000_000_000) == 3


def test_only_system_node_critical_gets_minus_997():
    # FACTS §2.2 / §7.4: node-critical -997; "cluster-critical": {lowOOMScoreAdj: 1000, ...}
    be = (c(),)
    assert container_oom_score_adj(Pod("p", be, priority_class_name="system-node-critical"), be[0], GiB) == -997
    assert container_oom_score_adj(Pod("p", be, priority_class_name="system-cluster-critical"), be[0], GiB) == 1000


def test_sidecar_never_above_smallest_regular_container():
    # FACTS §2.2 sidecar: oomScoreAdjust = min(oomScoreAdjust, 1000 - 1000*minRegularContainerMemReq/cap)
    app = c("app", req={"memory": 4 * GiB}, lim={"memory": 8 * GiB})
    side = c("proxy", req={"memory": 64 * MiB}, sidecar=True)
    pod = Pod("p", (app,), (side,))
    assert container_oom_score_adj(pod, app, 16 * GiB) == 750
    assert container_oom_score_adj(pod, side, 16 * GiB) == 750


def test_the_course_follows_kubernetes_1_37_and_can_be_asked_for_an_older_kubelet():
    from courselib.model.qos import KUBERNETES_VERSION, Resources, rules
    assert KUBERNETES_VERSION == "1.37.2" and rules() == rules("v1.37.2")
    app = c("app", req={"memory": 4 * GiB}, lim={"memory": 8 * GiB})
    side = c("proxy", req={"memory": 64 * MiB}, sidecar=True)
    pod = Pod("p", (app,), (side,))
    # v1.31's policy.go has no sidecar rule: the sidecar scores by its own request
    assert container_oom_score_adj(pod, side, 16 * GiB, rules("1.31")) == 1000 - 1000 * 64 * MiB // (16 * GiB)
    assert container_oom_score_adj(pod, side, 16 * GiB, rules("1.32")) == 750
    # pod-level resources: ignored while the gate is off (v1.33), they set the class from v1.34
    plr = Pod("p", (c(),), resources=Resources({"cpu": 500, "memory": GiB}, {"cpu": 500, "memory": GiB}))
    assert qos_class(plr, rules("1.33")) == BESTEFFORT
    assert qos_class(plr, rules("1.34")) == GUARANTEED
    # v1.37 (PodLevelResourcesFixKubeletQOSClass): empty pod-level resources fall back to the containers
    empty = Pod("p", (c(lim={"cpu": 500, "memory": GiB}),), resources=Resources())
    assert (qos_class(empty, rules("1.36")), qos_class(empty)) == (BESTEFFORT, GUARANTEED)
    for bad in ("1.29", "2.0", "latest"):
        with pytest.raises(ValueError):
            rules(bad)


def test_pod_level_memory_request_is_shared_by_the_containers():
    # policy.go (v1.34+): the pod-level request no container claimed is split among all of them
    from courselib.model.qos import Resources
    a, b = c("a", req={"memory": GiB}), c("b")
    pod = Pod("p", (a, b), resources=Resources({"memory": 3 * GiB}))
    assert qos_class(pod) == BURSTABLE
    # a: its own 1 GiB plus half of the 2 GiB no container claimed; b: the other half
    assert container_oom_score_adj(pod, a, 16 * GiB) == 1000 - 1000 * 2 * GiB // (16 * GiB)
    assert container_oom_score_adj(pod, b, 16 * GiB) == 1000 - 1000 * GiB // (16 * GiB)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 64 * GiB), st.integers(1, 64 * GiB))
def test_burstable_adj_always_in_3_999(req, cap):
    # FACTS §2.2: Burstable = clamp(..., 3, 999)
    assert 3 <= burstable_oom_score_adj(req, cap) <= 999


# --- FACTS §2.5 / §7.11 CrashLoopBackOff --------------------------------------------------------

def test_crashloop_first_restart_immediate_then_10s_doubling_capped_300():
    # FACTS §2.5 [derived]: 0, 10, 20, 40, 80, 160, 300, 300, ...; §7.11
    assert restart_delays(9) == [0, 10, 20, 40, 80, 160, 300, 300, 300]
    assert restart_delay(1) == 0 and restart_delay(50) == 300
    with pytest.raises(ValueError):
        restart_delay(0)


def test_restart_times_accumulate_backoff():
    # FACTS §2.5: crash after 5 s each time -> restarts at 5, 20, 45
    assert restart_times(5.0, 3) == [(5.0, 5.0), (10.0, 20.0), (25.0, 45.0)]
    with pytest.raises(ValueError):
        restart_times(600.0, 2)  # 10 minutes of running resets the backoff
