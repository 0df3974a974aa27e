"""The chapter 1 and 2 practice topics, recomputed by hand from the rules they teach.

namespaces: pid_namespaces(7) — a PID in every namespace a process is visible from, each namespace
counting on from its own next number; getppid() is 0 across a namespace boundary; the init's exit
kills the namespace. cpu: the kubelet's quota and shares formulas, the 1 ms floor, quota spent n
times faster by n threads, weights from opencontainers/cgroups v0.0.7, proportional sharing.
"""
from __future__ import annotations

import pytest

from courselib import problems
from courselib.model import cpu

DIFFICULTIES = problems.DIFFICULTIES


def _by_hand_pids(d):
    first = {n["name"]: n["first_pid"] for n in d["namespaces"]}
    parent = {n["name"]: n["parent"] for n in d["namespaces"]}
    counted = {name: 0 for name in first}
    pids = {}
    for p in d["procs"]:
        ns, mine = p["ns"], {}
        while ns is not None:                          # own namespace, then every ancestor
            mine[ns] = first[ns] + counted[ns]
            counted[ns] += 1
            ns = parent[ns]
        pids[p["name"]] = mine
    return pids


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_namespaces_pids_ps_and_getppid_by_hand(difficulty):
    for seed in range(10):
        p = problems.generate("namespaces", seed, difficulty)
        a, d = problems.solve(p).answer, p.data
        pids = _by_hand_pids(d)
        ns_of = {q["name"]: q["ns"] for q in d["procs"]}
        for name, inside in a["pid_inside"].items():
            assert inside == pids[name][ns_of[name]]
            assert a["pid_on_host"][name] == pids[name]["host"]
            assert a["nspid_on_host"][name].split()[0] == str(pids[name]["host"])
            assert a["nspid_on_host"][name].split()[-1] == str(inside)
        for c in d["containers"]:
            first = next(q["name"] for q in d["procs"] if q["ns"] == c)
            assert a["pid_inside"][first] == 1                        # the first process of a namespace
            assert a["getppid_of_first_process"][first] == 0          # its parent is on the host
            listed = [x.split(" (")[0] for x in a["ps_inside"][c]]
            assert listed == [q["name"] for q in d["procs"] if c in pids[q["name"]]]
            assert "containerd" not in listed
        c2 = [q["name"] for q in d["procs"] if q["ns"] == "c2"]
        assert bool(set(c2) & set(a["same_hostname_as_c1"])) == d.get("shared_uts", False)
        if difficulty == "hard":
            inner = [q["name"] for q in d["procs"] if q["ns"] == "c1-inner"]
            assert all(len(a["nspid_on_host"][n].split()) == 3 for n in inner)
            assert set(inner) <= set(a["killed_when_c1_pid1_exits"])
            assert not set(c2) & set(a["killed_when_c1_pid1_exits"])


def test_namespaces_medium_both_ways_of_sharing_a_hostname():
    shared = {problems.generate("namespaces", s, "medium").data["shared_uts"] for s in range(20)}
    assert shared == {True, False}


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_cpu_quota_throttling_and_contention_by_hand(difficulty):
    for seed in range(10):
        p = problems.generate("cpu", seed, difficulty)
        a, d = problems.solve(p).answer, p.data
        caps = {}
        for c in d["containers"]:
            milli = cpu.parse_cpu(c["limit"])
            quota = max(milli * 100_000 // 1000, 1000)
            assert a["cpu_max"][c["name"]] == f"{quota} 100000"
            caps[c["name"]] = quota / 100_000
            run_ms = min(100.0, quota / c["threads"] / 1000)
            assert a["run_ms_per_period"][c["name"]] == pytest.approx(run_ms, abs=1e-3)
            assert a["throttled_ms_per_period"][c["name"]] == pytest.approx(100.0 - run_ms, abs=1e-3)
        if len(d["containers"]) == 1:
            continue
        got = a["contended_cpus"]
        assert sum(got.values()) <= d["node_cpus"] + 1e-2
        for c in d["containers"]:
            assert got[c["name"]] <= min(caps[c["name"]], c["threads"]) + 1e-3
        # below their caps, two containers get CPU in the ratio of their weights
        free = [c["name"] for c in d["containers"] if got[c["name"]] < min(caps[c["name"]], c["threads"]) - 1e-2]
        for x in free:
            for y in free:
                w = a["cpu_weight"]
                assert got[x] / got[y] == pytest.approx(w[x] / w[y], rel=0.02)


def test_cpu_weight_conversion_anchors():
    # opencontainers/cgroups v0.0.7 fits min, default and max exactly
    assert [cpu.shares_to_weight(s) for s in (2, 1024, 262144)] == [1, 100, 10000]
    assert cpu.shares_to_weight_linear(1024) == 39            # the old straight line


def test_cpu_hard_has_a_defaulted_request_and_some_floor_problem():
    hard = [problems.generate("cpu", s, "hard") for s in range(20)]
    assert all(any(c["request"] is None for c in p.data["containers"]) for p in hard)
    texts = [problems.solve(p).steps for p in hard]
    assert any("sets the request to the limit" in " ".join(t) for t in texts)
    medium = [problems.generate("cpu", s, "medium") for s in range(40)]
    assert any(c["limit"] in ("2m", "5m") for p in medium for c in p.data["containers"])
