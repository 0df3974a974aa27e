"""The memcg timeline: memory.high throttles and never kills, memory.max kills, restarts back off."""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.io.scenario import read_scenario, scenario_from_text
from courselib.sim.memcg import simulate, summary
from budget import examples

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "oom"


def run(text: str) -> dict:
    return summary(simulate(scenario_from_text(text)))


def test_issue_example_scenario_json_fields():
    out = run("""
scope: memcg
limit: 1Gi
swap: 0
oom_group: false
cgroup: v2
processes:
  - {name: a, rss: 150000p, pagetables: 0, swap: 0, oom_score_adj: 0}
""")
    assert out["victim"] == "a" and out["killed"] == ["a"]
    assert out["points"] == {"a": 150000}
    # FACTS §1.4 with the default node_memory 16Gi = 4194304 pages: (1000 + 150000000//4194304)*2//3
    assert out["oom_score"] == {"a": (1000 + 150000 * 1000 // 4194304) * 2 // 3}
    assert out["events"]["oom"] == 1 and out["events"]["oom_kill"] == 1 and out["events"]["oom_group_kill"] == 0
    assert out["exit_codes"] == {"a": 137}


def test_memory_high_throttles_and_never_kills():
    # FACTS §1.5: "Going over the high limit never invokes the OOM killer"
    out = run("""
limit: 1Gi
high: 100Mi
duration: 10s
processes:
  - {name: leak, rss: 10Mi, grow: 50Mi/s}
""")
    assert out["killed"] == [] and out["events"]["oom"] == 0 and out["events"]["high"] > 0
    # throttled: without memory.high it would have grown 500 MiB in 10 s
    tl = simulate(scenario_from_text("limit: 1Gi\nhigh: 100Mi\nduration: 10s\nprocesses:\n"
                                     "  - {name: leak, rss: 10Mi, grow: 50Mi/s}\n"))
    assert tl.rss["leak"][-1] * 4096 < 300 * 2 ** 20


def test_memory_max_kills_when_usage_crosses_it_with_sizes_at_that_moment():
    # FACTS §1.5 memory.max: "the OOM killer is invoked in the cgroup"; totalpages = limit (§1.3)
    tl = simulate(scenario_from_text("""
limit: 100Mi
duration: 5s
step: 0.5s
processes:
  - {name: big, rss: 60Mi}
  - {name: leak, rss: 10Mi, grow: 10Mi/s, oom_score_adj: 0}
"""))
    assert len(tl.kills) == 1
    k = tl.kills[0]
    # 70 MiB + 5 MiB per 0.5 s step fills 100 MiB exactly at 3 s; the step at 3.5 s cannot be charged
    assert k.time == pytest.approx(3.5)
    assert k.oom.points == {"big": 60 * 256, "leak": 40 * 256} and k.oom.victim == "big"


def test_crashloop_restarts_follow_the_backoff():
    # FACTS §2.5: first restart immediate, then 10 s, 20 s ...
    tl = simulate(read_scenario(EXAMPLES / "growing.yaml"))
    delays = [d for _, name, d in tl.restarts if name == "leaky"]
    assert delays[:3] == [0.0, 10.0, 20.0]
    t = [k.time for k in tl.kills]
    # each life regrows for the same time; the gap between crashes adds the backoff delay
    assert t[1] - t[0] == pytest.approx(t[0] + 0.0) and t[2] - t[1] == pytest.approx(t[0] + 10.0)


def test_group_kill_example():
    out = summary(simulate(read_scenario(EXAMPLES / "group.yaml")))
    assert out["killed"] == ["main", "helper"] and out["events"]["oom_group_kill"] == 1
    assert out["exit_codes"]["pause"] is None


def test_node_oom_deadlock_panic_and_memcg_no_panic():
    # FACTS §1.3 no panic for memcg; global -> "System is deadlocked on memory"
    node = run("scope: node\nlimit: 1Gi\nprocesses:\n  - {name: g, rss: 10Mi, oom_score_adj: -1000}\n")
    assert node["victim"] is None and node["panic"] == "System is deadlocked on memory"
    memcg = run("scope: memcg\nlimit: 1Gi\nprocesses:\n  - {name: g, rss: 10Mi, oom_score_adj: -1000}\n")
    assert memcg["victim"] is None and memcg["panic"] is None and memcg["events"]["oom"] == 1


def test_child_cgroup_limit_is_the_oom_domain():
    # FACTS §1.3: only tasks in the OOMing memcg's subtree are candidates
    out = run("""
limit: 1Gi
duration: 5s
cgroups:
  - {path: /pod-a, max: 100Mi}
processes:
  - {name: huge, rss: 500Mi, cgroup: /pod-b}
  - {name: small, rss: 10Mi, cgroup: /pod-a, grow: 50Mi/s}
""")
    assert out["victim"] == "small" and out["ooms"][0]["domain"] == "/pod-a"
    assert "huge" not in out["points"]


def test_same_input_same_output():
    a = summary(simulate(read_scenario(EXAMPLES / "growing.yaml")))
    b = summary(simulate(read_scenario(EXAMPLES / "growing.yaml")))
    assert a == b


@pytest.mark.parametrize("name", ["basic", "growing", "group", "node"])
def test_examples_run(name):
    out = summary(simulate(read_scenario(EXAMPLES / f"{name}.yaml")))
    assert out["victim"] is not None


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from courselib.model.badness import Task, select_victim  # noqa: E402
from courselib.model.memcg import OomScenario, ProcessSpec  # noqa: E402

procs_strategy = st.lists(st.tuples(st.integers(0, 20_000), st.integers(-1000, 1000), st.integers(0, 4)),
                          min_size=1, max_size=5)


@settings(max_examples=examples(40), deadline=None)
@given(procs_strategy, st.integers(1_000, 60_000), st.integers(500, 80_000))
def test_kills_happen_only_at_memory_max_never_at_high(specs, limit, high):
    # FACTS §1.5: memory.high never kills; memory.max invokes the OOM killer in the cgroup
    procs = tuple(ProcessSpec(Task(f"p{i}", rss, oom_score_adj=adj), grow=mib * 2 ** 20)
                  for i, (rss, adj, mib) in enumerate(specs))
    if not any(p.grow for p in procs):
        return
    sc = OomScenario("memcg", limit, procs, high=high, duration=5.0, step=0.5)
    tl = simulate(sc)
    for k in tl.kills:
        # the kernel charges up to the limit and only then invokes the OOM killer
        assert k.usage >= limit
    no_max = simulate(OomScenario("memcg", 10 ** 9, procs, high=high, duration=5.0, step=0.5))
    assert no_max.kills == []  # only memory.high: throttled, never killed


@settings(max_examples=examples(100), deadline=None)
@given(procs_strategy, st.integers(1_000, 10 ** 6))
def test_static_scenario_victim_is_the_models(specs, limit):
    # a scenario without growth is the OOM at t=0: the victim is select_victim's (FACTS §1.2)
    procs = tuple(ProcessSpec(Task(f"p{i}", rss, oom_score_adj=adj)) for i, (rss, adj, _) in enumerate(specs))
    out = summary(simulate(OomScenario("memcg", limit, procs)))
    choice = select_victim([p.task for p in procs], limit)
    assert out["victim"] == (None if choice.victim is None else procs[choice.victim].name)


def test_restart_is_per_container_and_only_when_its_pid1_exits():
    """k8s-docs-pod-lifecycle: the kubelet restarts a container when its PID 1 exits — not one process."""
    from courselib.widgets.oom import default_scenario

    plain = simulate(default_scenario(high_mib=448, restart="Always"))          # web is PID 1
    assert plain.kills and not plain.restarts                                   # cache and leaky die, web runs on
    out = summary(plain)
    assert out["status"]["web"] == "Running" and out["status"]["cache"].startswith("Killed")
    group = simulate(default_scenario(high_mib=448, restart="Always", oom_group=True))
    assert [name for _t, name, _d in group.restarts][:2] == ["web", "web"]     # the container, via its PID 1
    assert [d for _t, _n, d in group.restarts][:2] == [0.0, 10.0]
    assert all(set(k.oom.killed) == {"web", "cache", "leaky"} for k in group.kills)


def test_no_process_is_killed_twice_at_the_same_instant():
    from courselib.widgets.oom import default_scenario

    for og in (False, True):
        for restart in ("Always", "OnFailure", "Never"):
            tl = simulate(default_scenario(high_mib=448, restart=restart, oom_group=og))
            seen = [(round(k.time, 9), name) for k in tl.kills for name in k.oom.killed]
            assert len(seen) == len(set(seen)), (og, restart, seen)


def test_when_pid1_dies_its_namespace_goes_with_it_but_is_not_counted_as_oom_kills():
    out = run("""
scope: memcg
limit: 100Mi
cgroup: v2
duration: 10s
step: 0.5s
processes:
  - {name: main, rss: 10Mi, grow: 20Mi/s}
  - {name: helper, rss: 20Mi}
""")
    assert out["killed"] == ["main"] and out["events"]["oom_kill"] == 1
    assert out["exit_codes"]["helper"] == 137 and out["status"]["helper"] == "OOMKilled"
