"""The real experiment's plumbing on fixture trees: where it creates its cgroup, what it reads."""
from __future__ import annotations

from courselib.live.memcg import RealRun, find_place, parse_oom_table


def _tree(tmp_path, proc_cgroup: str):
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text(proc_cgroup)
    return tmp_path / "proc", tmp_path / "cgroup"


def test_delegated_v2_subtree_is_used(tmp_path):
    proc, fs = _tree(tmp_path, "0::/user.slice/me\n")
    (fs / "user.slice" / "me").mkdir(parents=True)
    (fs / "cgroup.controllers").write_text("cpu memory io\n")
    (fs / "user.slice" / "me" / "cgroup.subtree_control").write_text("memory pids\n")
    place = find_place(proc=proc, cgroupfs=fs)
    assert place.version == "v2" and place.parent == fs / "user.slice" / "me"


def test_delegated_v2_parent_is_used_when_our_own_cgroup_holds_processes(tmp_path):
    proc, fs = _tree(tmp_path, "0::/user.slice/app.scope\n")
    (fs / "user.slice" / "app.scope").mkdir(parents=True)
    (fs / "cgroup.controllers").write_text("cpu memory io\n")
    (fs / "user.slice" / "app.scope" / "cgroup.subtree_control").write_text("\n")
    (fs / "user.slice" / "cgroup.subtree_control").write_text("memory\n")
    place = find_place(proc=proc, cgroupfs=fs)
    assert place.version == "v2" and place.parent == fs / "user.slice"


def test_hybrid_without_v2_memory_falls_back_to_v1(tmp_path):
    proc, fs = _tree(tmp_path, "4:memory:/job/7\n0::/\n")
    (fs / "unified").mkdir(parents=True)
    (fs / "unified" / "cgroup.controllers").write_text("hugetlb\n")
    (fs / "unified" / "cgroup.subtree_control").write_text("\n")
    (fs / "memory" / "job" / "7").mkdir(parents=True)
    (fs / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    place = find_place(proc=proc, cgroupfs=fs)
    assert place.version == "v1" and place.parent == fs / "memory" / "job" / "7"


def test_kernel_task_table_is_parsed():
    # lines as Linux 6.18 prints them under "Tasks state (memory values in pages):"
    lines = [
        "[  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name",
        "[  13218]     0 13218     4896     4179     2688     1491         0    81920        0             0 python",
        "[  13221]     0 13221     5252     4493     3008     1485         0    81920        0          1000 python",
        "[  99999]     0 99999     5252     4493     3008     1485         0    81920        0             0 other",
    ]
    table = parse_oom_table(lines, {13218: "a", 13221: "trigger"})
    assert table == {"a": {"rss": 4179, "pgtables_bytes": 81920, "swapents": 0, "oom_score_adj": 0},
                     "trigger": {"rss": 4493, "pgtables_bytes": 81920, "swapents": 0, "oom_score_adj": 1000}}


def test_returncode_minus_9_is_exit_137():
    run = RealRun("largest", "v1", "/x", 64 * 2 ** 20, 0, killed=["b"], returncodes={"a": None, "b": -9},
                  predicted_killed=["b"], predicted_oom_kill=1, oom_kill=1)
    d = run.as_dict()
    assert d["kernel"]["exit_codes"] == {"a": None, "b": 137} and d["match"] is True
    run.oom_kill = 2
    assert run.as_dict()["match"] is False


def test_recorded_runs_stand_in_without_privilege(monkeypatch):
    from courselib.errors import PrivilegeError
    from courselib.live import memcg

    def refuse(**kw):
        raise PrivilegeError("no memory cgroup here; nothing was touched")

    monkeypatch.setattr(memcg, "find_place", refuse)
    from courselib.live import recorded
    runs, why = recorded.live_or_recorded(memcg.source(("largest", "adj-shifts")))
    assert [r["scenario"] for r in runs] == ["largest", "adj-shifts"]
    assert all(r["recorded"] for r in runs) and why.startswith("RECORDED run (") and "nothing was touched" in why
    # the recorded runs are real kernel runs where prediction and kernel agreed
    assert all(r["match"] and r["kernel"]["killed"] == r["prediction"]["killed"] for r in runs)
    assert runs[0]["kernel"]["killed"] == ["b"] and runs[1]["kernel"]["killed"] == ["a"]
