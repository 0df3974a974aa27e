"""`courselib problem`: seeded practice problems with worked solutions (issue 10).

The framework tests run over every topic whose module exists (``problems.available()``), so a
topic added later is covered without touching this file. The topic tests at the bottom check the
answers of gang, backfill, cost and checkpoint against an independent computation: the simulator
run directly on a workload built here, or the formula recomputed from first principles.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib import problems
from courselib.cli.main import main
from courselib.problems import DIFFICULTIES, render
from budget import examples

READY = problems.available()
CASES = [(t, d) for t in READY for d in DIFFICULTIES]


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own errors exit
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def leaves(obj) -> int:
    if isinstance(obj, dict):
        return sum(leaves(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(leaves(v) for v in obj)
    return 1


def test_topics_exist():
    assert set(READY) <= set(problems.TOPICS)
    for mine in ("gang", "backfill", "cost", "checkpoint"):
        assert mine in READY


@pytest.mark.parametrize("topic", READY)
def test_topic_module_follows_the_contract(topic):
    mod = problems.topic_module(topic)
    assert mod.TOPIC == topic
    assert isinstance(mod.SUMMARY, str) and mod.SUMMARY and "\n" not in mod.SUMMARY
    p = mod.generate(3, "easy")
    assert isinstance(p, problems.Problem) and p.topic == topic and p.seed == 3 and p.difficulty == "easy"
    assert p.question and p.text
    s = mod.solve(p)
    assert isinstance(s, problems.Solution)


# ---- determinism, variety, solvability --------------------------------------------------------------
@pytest.mark.parametrize("topic,difficulty", CASES)
def test_same_seed_same_problem_and_solution(topic, difficulty):
    a, b = problems.generate(topic, 11, difficulty), problems.generate(topic, 11, difficulty)
    assert a == b
    assert render.text(a, problems.solve(a)) == render.text(b, problems.solve(b))


def _documents_in_a_subprocess(hashseed: str) -> str:
    code = ("import json\nfrom courselib import problems\nfrom courselib.problems import render\n"
            "out = [render.document(p, problems.solve(p)) for t in problems.available() "
            "for d in problems.DIFFICULTIES for s in (5,) for p in [problems.generate(t, s, d)]]\n"
            "print(json.dumps(out, sort_keys=True, default=str))\n")
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout


def test_same_seed_same_problem_across_hash_seeds_and_processes():
    here = [render.document(p, problems.solve(p)) for t in problems.available() for d in DIFFICULTIES
            for s in (5,) for p in [problems.generate(t, s, d)]]
    a, b = _documents_in_a_subprocess("0"), _documents_in_a_subprocess("4242")
    assert a == b
    assert json.loads(a) == json.loads(json.dumps(here, sort_keys=True, default=str))


@pytest.mark.parametrize("topic,difficulty", CASES)
def test_fifty_seeds_fifty_different_problems_all_solvable(topic, difficulty):
    texts = set()
    for seed in range(50):
        p = problems.generate(topic, seed, difficulty)
        texts.add(p.text)
        s = problems.solve(p)
        assert s.answer and s.steps, f"{topic} seed {seed}: empty solution"
        json.dumps(render.document(p, s))  # JSON-serialisable, inputs and answer
    assert len(texts) == 50


@pytest.mark.parametrize("topic", READY)
def test_difficulty_changes_the_size_not_only_the_numbers(topic):
    def size(d):
        ps = [problems.generate(topic, s, d) for s in range(8)]
        return sum(leaves(p.data) + len(problems.solve(p).steps) for p in ps) / len(ps)
    assert size("hard") > size("easy")
    assert size("medium") >= size("easy")


@pytest.mark.parametrize("topic", READY)
def test_different_difficulties_are_different_problems(topic):
    texts = {problems.generate(topic, 4, d).text for d in DIFFICULTIES}
    assert len(texts) == 3


# ---- the command ----------------------------------------------------------------------------------
@pytest.mark.parametrize("topic", READY)
def test_cli_echoes_its_arguments_then_the_problem(capsys, topic):
    code, out, err = run(capsys, "problem", topic, "--seed", "7", "--difficulty", "medium")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:3] == [f"ARG topic {topic}", "ARG seed 7", "ARG difficulty medium"]
    p = problems.generate(topic, 7, "medium")
    assert p.text.strip() in out
    assert "ANSWER" not in out
    assert f"courselib problem {topic} --seed 7 --difficulty medium --solve" in out


@pytest.mark.parametrize("topic", READY)
def test_cli_solve_prints_answer_and_numbered_steps(capsys, topic):
    code, out, _ = run(capsys, "problem", topic, "--seed", "2", "--difficulty", "hard", "--solve")
    assert code == 0
    assert "ANSWER" in out and "WHY, STEP BY STEP" in out
    steps = problems.solve(problems.generate(topic, 2, "hard")).steps
    assert f"{len(steps)}. " in out
    assert out.index("ANSWER") < out.index("WHY, STEP BY STEP")


@pytest.mark.parametrize("topic", READY)
def test_cli_json_is_one_document(capsys, topic):
    code, out, _ = run(capsys, "problem", topic, "--seed", "9", "--json", "--solve")
    assert code == 0
    doc = json.loads(out)
    assert doc["args"] == {"topic": topic, "seed": 9, "difficulty": "easy"}
    p = problems.generate(topic, 9, "easy")
    assert doc["text"] == p.text
    assert doc["answer"] == json.loads(json.dumps(problems.solve(p).answer))
    code, out, _ = run(capsys, "problem", topic, "--seed", "9", "--json")
    assert "answer" not in json.loads(out)


def test_cli_lists_topics(capsys):
    code, out, _ = run(capsys, "problem", "--list")
    assert code == 0
    for t in problems.TOPICS:
        assert t in out
    for t in READY:
        assert problems.topic_module(t).SUMMARY in out
    code, out2, _ = run(capsys, "problem")
    assert code == 2 and out2 == out  # no topic: the list, and a usage status


@pytest.mark.parametrize("argv,says", [
    (["problem", "nosuchtopic"], "unknown topic 'nosuchtopic'"),
    (["problem", "gang", "--seed", "-1"], "--seed"),
    (["problem", "gang", "--seed", "x"], "--seed"),
    (["problem", "gang", "--seed", "1.5"], "--seed"),
    (["problem", "gang", "--seed"], "--seed"),
    (["problem", "gang", "--difficulty", "insane"], "unknown difficulty 'insane'"),
    (["problem", "gang", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["problem", "gang", "extra"], "unrecognized arguments: extra"),
])
def test_malformed_arguments_are_one_line_usage_errors(capsys, argv, says):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert says in err
    assert "Traceback" not in err


def test_malformed_arguments_from_the_shell_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "courselib", "problem", "gang", "--seed", "-3"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_topic_not_written_yet_is_one_clear_line(capsys, monkeypatch):
    monkeypatch.setattr(problems, "TOPICS", problems.TOPICS + ("future",))
    code, out, err = run(capsys, "problem", "future", "--seed", "1")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "'future' problems are not available yet" in err
    code, out, _ = run(capsys, "problem", "--list")
    assert "future" in out and "(not available yet)" in out


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(min_value=0, max_value=10 ** 12), topic=st.sampled_from(READY),
       difficulty=st.sampled_from(DIFFICULTIES))
def test_any_seed_gives_a_solvable_problem(seed, topic, difficulty):
    p = problems.generate(topic, seed, difficulty)
    s = problems.solve(p)
    assert s.steps and s.answer
    assert render.text(p, s).startswith(f"ARG topic {topic}\nARG seed {seed}\nARG difficulty {difficulty}\n")


# ---- gang: the simulator run directly, and first principles for two equal-pod jobs ---------------
def _gang_workload(data):
    from courselib.model.workload import ClusterSpec, Job, Queue, Workload
    c = data["cluster"]
    return Workload(ClusterSpec(c["nodes"], c["gpus_per_node"]),
                    [Job(j["name"], j["pods"], j["gpus_per_pod"], submit=j["submit"], duration=j["duration"],
                         min_member=j.get("min_member"), priority=j.get("priority", 0), queue=j.get("queue", "default"))
                     for j in data["jobs"]],
                    [Queue(q["name"], q["nominal_quota"]) for q in data.get("queues", [])])


def _per_policy(problem, answer):
    pols = problem.data["policies"]
    return {pols[0]: answer} if len(pols) == 1 else {p: answer[p] for p in pols}


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_gang_answer_is_what_the_simulator_says(difficulty):
    from courselib.sim.gang import simulate
    for seed in range(25):
        p = problems.generate("gang", seed, difficulty)
        wl = _gang_workload(p.data)
        horizon = max(j.submit for j in wl.jobs) + max(86400.0, 2 * sum(j.duration for j in wl.jobs))
        for policy, ans in _per_policy(p, problems.solve(p).answer).items():
            # the simulator's straightforward path (every cycle rescans every job), with its invariant checks
            r = simulate(wl, policy, horizon=horizon, reference=True, check=True,
                         **p.data.get("options", {}).get(policy, {}))
            assert ans["deadlock"] == r.deadlock
            assert ans["wasted_gpu_hours"] == pytest.approx(r.wasted_gpu_hours, abs=0.006)
            for j in r.jobs:
                assert ans["jobs"][j.name]["start_s"] == j.start and ans["jobs"][j.name]["end_s"] == j.end
            if policy in ("volcano", "slurm"):
                assert not ans["deadlock"], "all-or-nothing placement never holds GPUs idle forever"
                assert ans["wasted_gpu_hours"] == 0
            if ans["deadlock"]:
                assert ans["stuck"] and all(ans["jobs"][n]["start_s"] is None for n in ans["stuck"])


def test_gang_easy_two_equal_pod_jobs_from_first_principles():
    """Round-robin pods into S slots: job X completes iff its last pod's place in a0,b0,a1,b1,... is ≤ S."""
    checked = 0
    for seed in range(80):
        p = problems.generate("gang", seed, "easy")
        a, b = p.data["jobs"]
        if a["gpus_per_pod"] != b["gpus_per_pod"]:
            continue
        g = a["gpus_per_pod"]
        slots = p.data["cluster"]["nodes"] * (p.data["cluster"]["gpus_per_node"] // g)
        both_fit = a["pods"] + b["pods"] <= slots
        ans = problems.solve(p).answer
        if p.data["policies"] == ["kube-default"]:
            a_done = 2 * a["pods"] - 1 <= slots if a["pods"] <= b["pods"] else False
            b_done = 2 * b["pods"] <= slots if b["pods"] < a["pods"] else False
            deadlock = not both_fit and not a_done and not b_done
            assert ans["deadlock"] == deadlock, seed
        else:  # volcano: the first job in order starts at once; the second at once or when the first ends
            assert not ans["deadlock"]
            assert ans["jobs"][a["name"]]["start_s"] == 0
            assert ans["jobs"][b["name"]]["start_s"] == (0 if both_fit else a["duration"]), seed
            assert ans["wasted_gpu_hours"] == 0
        checked += 1
    assert checked >= 20


def test_gang_hard_compares_two_policies_and_has_more_jobs():
    hard = [problems.generate("gang", s, "hard") for s in range(20)]
    easy = [problems.generate("gang", s, "easy") for s in range(20)]
    assert all(len(p.data["policies"]) == 2 for p in hard)
    assert min(len(p.data["jobs"]) for p in hard) > max(len(p.data["jobs"]) for p in easy)
    traps = {p.data["trap"] for p in hard}
    assert traps == {"exact", "both-over-half", "fragmented", "min-member"}
    assert any(problems.solve(p).answer[p.data["policies"][0]]["deadlock"] for p in hard)


def test_gang_trace_is_event_by_event():
    p = problems.generate("gang", 0, "easy")
    steps = problems.solve(p).steps
    assert any(s.startswith("t=0s") and "bound" in s for s in steps)
    assert any("GPU-hours held idle" in s for s in steps)


# ---- backfill: the simulator run directly, and what conservative backfill must guarantee ----------
def _bf_workload(data):
    from courselib.model.workload import ClusterSpec, Job, Workload
    c = data["cluster"]
    feats = {}
    for f, rng_ in c.get("features", {}).items():
        lo, hi = rng_.split("-")
        feats[f] = list(range(int(lo) - 1, int(hi)))
    spec = ClusterSpec.with_features(c["nodes"], c["gpus_per_node"], feats)
    return Workload(spec, [Job(j["name"], j["pods"], j["gpus_per_pod"], duration=j["duration"], priority=j["priority"],
                               time_limit=j["time_limit"], constraint=j.get("constraint")) for j in data["jobs"]])


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_backfill_answer_agrees_with_the_simulator_and_the_rules(difficulty):
    from courselib.sim.gang import simulate
    for seed in range(25):
        p = problems.generate("backfill", seed, difficulty)
        data, ans = p.data, problems.solve(p).answer
        r = simulate(_bf_workload(data), "slurm", reference=True, check=True, **data.get("options", {}))
        total = data["cluster"]["nodes"] * data["cluster"]["gpus_per_node"]
        by = {j["name"]: j for j in data["jobs"]}
        for j in r.jobs:
            assert ans["jobs"][j.name]["start_s"] == j.start and ans["jobs"][j.name]["end_s"] == j.end
        # reasons at t=0 as squeue would show them, read from the simulator's own trace
        reasons = {}
        for e in r.trace:
            if e.time == 0 and e.what.startswith("waiting: "):
                reasons[e.job] = e.what.split(": ", 1)[1]
        started0 = {j.name for j in r.jobs if j.start == 0}
        assert set(ans["running_after_t0"]) == started0
        for name, reason in ans["pending_reasons_at_t0"].items():
            if name != "-":
                assert reasons[name] == reason and name not in started0
        # first principles: never more GPUs than the partition; each job runs min(duration, --time)
        for t in {j.start for j in r.jobs if j.start is not None}:
            busy = sum(by[j.name]["pods"] * by[j.name]["gpus_per_pod"] for j in r.jobs
                       if j.start is not None and j.start <= t < j.end)
            assert busy <= total
        for j in r.jobs:
            if j.start is not None:
                assert j.end - j.start == min(by[j.name]["duration"], by[j.name]["time_limit"])
            else:
                assert ans["pending_reasons_at_t0"][j.name] in ("PartitionNodeLimit", "BadConstraints")
            if by[j.name]["pods"] * by[j.name]["gpus_per_pod"] > total:
                assert j.start is None and ans["pending_reasons_at_t0"][j.name] == "PartitionNodeLimit"
        # a backfilled job started at 0 although a higher-priority job was still waiting
        for name in ans["backfilled"]:
            assert name in started0
            assert any(by[o]["priority"] > by[name]["priority"] and o not in started0 for o in by)
        # exactly one job waits for Resources at t=0 (the first blocked one), the others behind it Priority
        waiting = sorted((n for n in ans["pending_reasons_at_t0"] if n != "-"
                          and ans["pending_reasons_at_t0"][n] in ("Resources", "Priority")),
                         key=lambda n: -by[n]["priority"])
        if waiting:
            assert ans["pending_reasons_at_t0"][waiting[0]] == "Resources"
            assert all(ans["pending_reasons_at_t0"][n] == "Priority" for n in waiting[1:])


def test_backfill_easy_the_short_candidate_starts_unless_the_free_nodes_are_taken():
    """Easy: one running job, one blocked job, two candidates. The candidate whose --time ends before
    the running job's ends before any reservation can begin (ending exactly then would not do: Slurm's
    backfill window is closed at its end), so it starts at t=0 — unless the other, higher-priority
    candidate was backfilled first onto the nodes it needed."""
    for seed in range(40):
        p = problems.generate("backfill", seed, "easy")
        running, blocked, c1, c2 = sorted(p.data["jobs"], key=lambda j: -j["priority"])
        short, other = (c1, c2) if c1["time_limit"] < running["time_limit"] else (c2, c1)
        assert short["time_limit"] < running["time_limit"] < other["time_limit"]
        free_nodes = p.data["cluster"]["nodes"] - running["pods"]
        backfilled = problems.solve(p).answer["backfilled"]
        if short["name"] not in backfilled:
            assert backfilled == [other["name"]] and other is c1, seed
            assert other["pods"] + short["pods"] > free_nodes, seed
        assert blocked["name"] not in backfilled


def test_backfill_hard_has_an_impossible_job_and_traps():
    ps = [problems.generate("backfill", s, "hard") for s in range(30)]
    reasons = set()
    for p in ps:
        reasons |= set(problems.solve(p).answer["pending_reasons_at_t0"].values())
    assert {"PartitionNodeLimit", "BadConstraints", "Resources", "Priority"} <= reasons
    assert any(p.data.get("options", {}).get("bf_job_part_count_reserve") == 1 for p in ps)
    assert any(any(j["duration"] < j["time_limit"] for j in p.data["jobs"]) for p in ps)


# ---- cost: recomputed by hand ------------------------------------------------------------------------
def _hand_cost(data):
    w = data["wait"]
    if w["unit"] == "clock":
        (h0, m0), (h1, m1) = [[int(x) for x in t.split(":")] for t in w["value"]]
        minutes = (h1 * 60 + m1 - h0 * 60 - m0) % 1440
        hours = minutes / 60
    else:
        hours = w["value"] / {"s": 3600, "min": 60}[w["unit"]]
    per = 8 if data["price"]["per"] == "node-hour" else 1
    lo = data["price"]["low"] / per
    hi = (data["price"]["high"] or data["price"]["low"]) / per
    gh = data["held"] * hours
    out = {"gh": gh, "lo": gh * lo, "hi": gh * hi, "ranged": lo != hi}
    if "lost_rank" in data:
        lr = data["lost_rank"]
        lost = data["gang_size"] * (lr["since_checkpoint_min"] + 10 + lr["restart_min"]) / 60
        out.update(lost=lost, lost_lo=lost * lo, lost_hi=lost * hi)
    return out


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_cost_answer_recomputed_by_hand(difficulty):
    for seed in range(50):
        p = problems.generate("cost", seed, difficulty)
        ans, hand = problems.solve(p).answer, _hand_cost(p.data)
        assert ans["wasted_gpu_hours"] == pytest.approx(hand["gh"], abs=0.006)
        if hand["ranged"]:
            assert ans["cost_usd"] == pytest.approx([hand["lo"], hand["hi"]], abs=0.006)
        else:
            assert ans["cost_usd"] == pytest.approx(hand["lo"], abs=0.006)
        assert ans["with_gang_check_gpu_hours"] == 0
        if "lost" in hand:
            assert ans["lost_rank_gpu_hours"] == pytest.approx(hand["lost"], abs=0.006)
            total = (hand["lo"] + hand["lost_lo"], hand["hi"] + hand["lost_hi"])
            assert ans["total_usd"] == pytest.approx(list(total) if hand["ranged"] else total[0], abs=0.011)


def test_cost_traps_appear_in_the_text_by_difficulty():
    for seed in range(20):
        med = problems.generate("cost", seed, "medium")
        assert "still missing" in med.text and str(med.data["gang_size"] - med.data["held"]) in med.text
        assert " to $" in med.text  # a price range
        hard = problems.generate("cost", seed, "hard")
        assert "node-hour" in hard.text and "PyTorch's default NCCL timeout" in hard.text
        assert "10 min" not in hard.text  # the timeout is knowledge, not given
        easy = problems.generate("cost", seed, "easy")
        assert "minutes" in easy.text and "node-hour" not in easy.text


# ---- checkpoint: Young and Daly recomputed from the formulas (FACTS §5) ------------------------------
def _hand_checkpoint(data):
    unit = {"s": 1, "min": 60, "h": 3600, "days": 86400, "years": 365 * 86400}
    c = data["cost"]["value"] * unit[data["cost"]["unit"]]
    m = data["mtbf"]["value"] * unit[data["mtbf"]["unit"]]
    n = {"job": 1, "GPU": data.get("gpus"), "node": (data.get("gpus") or 0) // 8}[data["mtbf"]["of"]]
    m = m / n
    r = data.get("restart", {"value": 0, "unit": "s"})
    r = r["value"] * unit[r["unit"]]
    young = math.sqrt(2 * c * m)
    daly = m if c >= 2 * m else math.sqrt(2 * c * m) * (1 + math.sqrt(c / (2 * m)) / 3 + c / (2 * m) / 9) - c
    return c, m, r, young, daly


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_checkpoint_answer_recomputed_from_the_formulas(difficulty):
    for seed in range(50):
        p = problems.generate("checkpoint", seed, difficulty)
        ans = problems.solve(p).answer
        c, m, r, young, daly = _hand_checkpoint(p.data)
        assert ans["young_interval_s"] == pytest.approx(young, abs=0.06)
        if difficulty == "easy":
            assert ans["waste_at_young"] == pytest.approx(math.sqrt(2 * c / m), abs=1e-4)
            continue
        assert ans["job_mtbf_s"] == pytest.approx(m, abs=0.06)
        assert ans["daly_interval_s"] == pytest.approx(daly, abs=0.06)
        assert ans["daly_interval_s"] <= ans["job_mtbf_s"] + 0.1
        assert ans["waste_at_daly"] == pytest.approx(min(1.0, c / daly + daly / (2 * m) + r / m), abs=1e-4)
        if "current_interval" in p.data:
            t = p.data["current_interval"]["value"] * 3600
            w = min(1.0, c / t + t / (2 * m) + r / m)
            assert ans["waste_at_current"] == pytest.approx(w, abs=1e-4)
            saved = max(0.0, w - min(1.0, c / daly + daly / (2 * m) + r / m)) * p.data["gpus"] * 24
            assert ans["saved_gpu_hours_per_day"] == pytest.approx(saved, abs=0.05)


def test_checkpoint_daly_matches_the_papers_figures():
    """Independent anchor (FACTS §5): M = 24 h, 6 h, 15 min with δ = 5 min give 116.69, 56.71, 9.14 min."""
    from courselib.model.checkpoint import daly_interval
    for m, want in ((24 * 3600, 116.69), (6 * 3600, 56.71), (15 * 60, 9.14)):
        assert daly_interval(300, m) / 60 == pytest.approx(want, abs=0.01)


def test_checkpoint_medium_counts_nodes_when_the_mtbf_is_per_node():
    found = False
    for seed in range(30):
        p = problems.generate("checkpoint", seed, "medium")
        if p.data["mtbf"]["of"] == "node":
            steps = " ".join(problems.solve(p).steps)
            assert f"{p.data['gpus'] // 8} nodes" in steps and "not GPUs" in steps
            found = True
    assert found


@pytest.mark.parametrize("topic", READY)
def test_a_chapters_practice_cells_print_the_problem_then_its_solution(topic):
    p = problems.generate(topic, 6, "medium")
    shown = render.practice(topic, 6, "medium")
    assert shown == render.text(p) and "ANSWER" not in shown
    solution = render.practice_solution(topic, 6, "medium")
    assert solution.startswith("ANSWER") and solution in render.text(p, problems.solve(p))
