"""Practice problems oom, qos, barrier, layers: every answer agrees with a second, independent
derivation written out here from first principles (the kernel's formula, the kubelet's rules,
the barrier's arithmetic, the build cache's key chain), never by calling the solver's engine."""
from __future__ import annotations

import fnmatch
import hashlib
import re
import signal
import subprocess
from dataclasses import asdict

import pytest

from courselib.io.pod import read_pods_text
from courselib.problems import DIFFICULTIES, generate, solve

TOPICS_B = ("oom", "qos", "barrier", "layers")
SEEDS = range(12)
PAGE = 4096


def both(topic, seed, difficulty):
    p = generate(topic, seed, difficulty)
    return p, solve(p)


# --- oom: the kernel's formulas, written out (FACTS §1.1-1.5) -----------------------------------

def pages(q) -> int:
    """'123p' pages, '64Ki' / '8Gi' sizes -> pages (sizes in whole pages here)."""
    m = re.fullmatch(r"(\d+)(p|Ki|Mi|Gi)", str(q))
    n, unit = int(m.group(1)), m.group(2)
    return n if unit == "p" else n * {"Ki": 1024, "Mi": 2 ** 20, "Gi": 2 ** 30}[unit] // PAGE


def nbytes(q) -> int:
    m = re.fullmatch(r"(\d+)Ki", str(q))
    return int(m.group(1)) * 1024


def under(path, parent):
    return parent == "/" or path == parent or path.startswith(parent + "/")


def c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def kernel_oom(sc: dict, trigger: str) -> dict:
    procs = sc["processes"]
    charge = {p["name"]: pages(p["rss"]) + nbytes(p.get("pagetables", "0Ki")) // PAGE for p in procs}
    cg = {p["name"]: p.get("cgroup", "/") for p in procs}
    limits = {c["path"]: pages(c["max"]) for c in sc.get("cgroups", []) if c.get("max")}
    groups = {c["path"]: c.get("oom_group", False) for c in sc.get("cgroups", [])}
    groups["/"] = sc.get("oom_group", False)
    if sc["scope"] == "memcg":
        limits["/"] = pages(sc["limit"])
    # which limit does the trigger's one page hit? the lowest full cgroup on its path
    domain = None
    path = cg[trigger]
    chain = [path]
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        chain.append(path)
    for c in chain:
        if c in limits:
            used = sum(v for n, v in charge.items() if under(cg[n], c))
            if c == "/" and sc.get("usage"):
                used = pages(sc["usage"])
            if used + 1 > limits[c]:
                domain = c
                break
    if domain is None:
        assert sc["scope"] == "node"
        total = pages(sc["limit"]) + pages(sc["swap"])
        candidates = procs
    else:
        total = limits[domain]
        if domain == "/":   # memory.swap.max (v2) / memsw (v1) adds the swap it may use, swappiness 60
            total += min(pages(sc["swap"]), pages(sc["node_swap"]))
        candidates = [p for p in procs if under(cg[p["name"]], domain)]
    unit = total // 1000
    points, victim, best = {}, None, None
    for p in candidates:
        adj = p["oom_score_adj"]
        if adj == -1000 or p.get("unkillable"):
            points[p["name"]] = None
            continue
        x = pages(p["rss"]) + pages(p.get("swap", "0p")) + nbytes(p.get("pagetables", "0Ki")) // PAGE + adj * unit
        points[p["name"]] = x
        if best is None or not x < best:       # equal points: the later task replaces the choice
            victim, best = p["name"], x
    group = None
    if sc["cgroup"] == "v2":
        for c in [c for c in chain_of(cg[victim])]:
            if groups.get(c):
                group = c
            if c == (domain or "/"):
                break
    killed = {victim}
    if group:
        killed |= {p["name"] for p in procs if under(cg[p["name"]], group)
                   and p["oom_score_adj"] != -1000 and not p.get("unkillable")}
    g = (pages(sc["limit"]) + pages(sc["swap"])) if sc["scope"] == "node" else \
        pages(sc["node_memory"]) + pages(sc["node_swap"])
    v = next(p for p in procs if p["name"] == victim)
    badness = pages(v["rss"]) + pages(v.get("swap", "0p")) + nbytes(v.get("pagetables", "0Ki")) // PAGE \
        + v["oom_score_adj"] * (g // 1000)
    score = c_div((1000 + c_div(badness * 1000, g)) * 2, 3)
    return {"domain": domain or "/", "totalpages": total, "points": points, "victim": victim,
            "killed": killed, "group": group, "oom_score": score}


def chain_of(path):
    out = [path]
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        out.append(path)
    return out


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_oom_agrees_with_the_kernel_formula(difficulty):
    for seed in SEEDS:
        p, s = both("oom", seed, difficulty)
        k = kernel_oom(p.data["scenario"], p.data["story"]["trigger"])
        a = s.answer
        assert (a["oom_domain"], a["totalpages"], a["victim"], a["victim_oom_score"]) == \
            (k["domain"], k["totalpages"], k["victim"], k["oom_score"]), (seed, difficulty)
        assert a["victim_points"] == k["points"][k["victim"]]
        assert set(a["killed"]) == k["killed"] and a["killed"][0] == k["victim"]
        assert a["exit_code"] == 128 + int(signal.SIGKILL)
        for path, ev in a["memory_events"].items():
            assert ev["oom_kill"] >= len(k["killed"])           # FACTS §1.5: at least one per task
            if "oom" in ev:
                assert ev["oom"] == (0 if a["scope"] == "node" else 1)
                assert ev["oom_group_kill"] == (1 if k["group"] and under(k["group"], path) else 0)
        assert str(k["oom_score"]) in "\n".join(s.steps)         # the trace shows the number it derives


def test_oom_exit_status_137_is_what_bash_reports_for_sigkill():
    out = subprocess.run(["bash", "-c", "sleep 30 & p=$!; kill -KILL $p; wait $p; echo $?"],
                         capture_output=True, text=True, timeout=20)
    p, s = both("oom", 3, "easy")
    assert int(out.stdout.strip()) == s.answer["exit_code"] == 137


def test_oom_traps_reach_every_kind_of_hard_problem():
    hard = [generate("oom", seed, "hard") for seed in range(40)]
    kinds = {p.data["story"]["kind"] for p in hard}
    assert kinds == {"pod", "node"}
    answers = [solve(p).answer for p in hard]
    assert any(a["scope"] == "node" and a["memory_events"]["/kubepods"]["oom"] == 0 for a in answers)
    assert any(a["oom_domain"] != "/" for a in answers)                    # a container below the pod
    assert any(len(a["killed"]) > 1 for a in answers)                      # a group kill
    medium = [solve(generate("oom", seed, "medium")) for seed in range(40)]
    assert any("tie at" in " ".join(s.steps) for s in medium)              # last-scanned-wins appears
    assert any("adj -1000: never" in " ".join(s.steps) for s in medium)
    easy = [generate("oom", seed, "easy").data for seed in range(40)]
    assert all(d["story"]["kind"] == "container" and "cgroups" not in d["scenario"] for d in easy)


# --- qos: GetPodQOS and policy.go, written out (FACTS §2.1-2.2, §7.3-7.4) ------------------------

def kubelet(pod, capacity: int):
    def defaulted(c):
        req = dict(c.requests)
        for k, v in c.limits.items():
            req.setdefault(k, v)
        return req, dict(c.limits)
    everyone = [(c, *defaulted(c)) for c in pod.containers + pod.init_containers]
    any_set = any(req.get(r, 0) > 0 or lim.get(r, 0) > 0 for _, req, lim in everyone for r in ("cpu", "memory"))
    guaranteed = all(lim.get("cpu", 0) > 0 and lim.get("memory", 0) > 0 for _, _, lim in everyone)
    sums = {(kind, r): sum(d.get(r, 0) for _, *pair in everyone for d in [pair[kind == "lim"]])
            for kind in ("req", "lim") for r in ("cpu", "memory")}
    if not any_set:
        qos = "BestEffort"
    elif guaranteed and all(sums[("req", r)] == sums[("lim", r)] for r in ("cpu", "memory")):
        qos = "Guaranteed"
    else:
        qos = "Burstable"
    regular_min = min(defaulted(c)[0].get("memory", 0) for c in pod.containers)
    out = {}
    for c, req, _ in everyone:
        if pod.priority_class_name == "system-node-critical" or qos == "Guaranteed":
            adj = -997
        elif qos == "BestEffort":
            adj = 1000
        else:
            adj = 1000 - 1000 * req.get("memory", 0) // capacity
            if c.sidecar:
                adj = min(adj, 1000 - 1000 * regular_min // capacity)
            adj = 3 if adj < 3 else (999 if adj == 1000 else adj)
        out[c.name] = adj
    return qos, out


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_qos_agrees_with_the_kubelet_rules_read_from_the_manifest_text(difficulty):
    for seed in range(30):
        p, s = both("qos", seed, difficulty)
        manifest = p.text[p.text.index("apiVersion:"):p.text.rindex(p.question)]
        [reading] = read_pods_text(manifest)                  # the YAML the learner sees, not problem.data
        capacity = int(re.search(r"has (\d+)Gi of memory \(capacity\)", p.text).group(1)) * 2 ** 30
        qos, adj = kubelet(reading.pod, capacity)
        assert s.answer["qos_class"] == qos, (seed, difficulty)
        assert s.answer["oom_score_adj"] == adj, (seed, difficulty)


def test_qos_hard_problems_carry_the_traps_and_easy_ones_do_not():
    hard = [solve(generate("qos", seed, "hard")) for seed in range(40)]
    hard_p = [generate("qos", seed, "hard") for seed in range(40)]
    assert all(p.data["pod"]["initContainers"] for p in hard_p)
    assert any(any(c.get("restartPolicy") == "Always" for c in p.data["pod"]["initContainers"]) for p in hard_p)
    assert {s.answer["qos_class"] for s in hard} == {"Guaranteed", "Burstable", "BestEffort"}
    assert any(p.data["pod"]["priorityClassName"] == "system-node-critical" for p in hard_p)
    easy = [generate("qos", seed, "easy") for seed in range(40)]
    assert all(len(p.data["pod"]["containers"]) == 1 and not p.data["pod"]["initContainers"] for p in easy)
    medium = [solve(generate("qos", seed, "medium")) for seed in range(60)]
    adjs = [v for s in medium for v in s.answer["oom_score_adj"].values()]
    assert 3 in adjs and 999 in adjs                          # the clamp at 3 and the 1000 -> 999 rule


# --- barrier: the timeline by arithmetic (nccl-header, nccl-env, pytorch-distributed-init, torchrun-elastic) ----------------------------------------

def barrier_by_hand(d: dict) -> dict:
    n, step, cost = d["ranks"], d["step_s"], d["checkpoint_cost_s"]
    total, every = round(d["work_s"] / step), round(d["checkpoint_every_s"] / step)
    joins = d["join_times_s"] or [0.0] * n
    losses = sorted((float(t), k, (kind or ["silent"])[0]) for k, t, *kind in d["losses"])
    start, resume, li, failures = max(joins), 0, 0, []
    init_wait = sum(max(joins) - j for j in joins) / 3600
    while True:
        ops, t = [], start
        for k in range(resume + 1, total + 1):
            t += step
            ops.append((t, f"all-reduce after step {k}", None))
            if k % every == 0 and k < total:
                t += cost
                ops.append((t, f"checkpoint after step {k}", k))
        finish = t
        while li < len(losses) and losses[li][0] < start:      # lost while restarting: replaced anyway
            li += 1
        if li == len(losses) or losses[li][0] > finish:
            break
        at = losses[li][0]
        stall = next(op for op in ops if op[0] >= at)           # a loss at the boundary wins the tie
        saved = [op for op in ops if op[2] is not None and op[0] < at]
        anchor, resumed = (saved[-1][0], saved[-1][2]) if saved else (start, resume)
        # a preempted rank's peers get an NCCL error after InfiniBand's retries; a hung one only the timeout
        wait = min(d["timeout_s"], 4.096e-6 * 2 ** 20 * (1 + 7)) if losses[li][2] == "error" else d["timeout_s"]
        detected = stall[0] + wait
        restarted = detected + d["restart_s"]
        failures.append({"stalled_in": stall[1], "stalled_at_s": stall[0], "detected_at_s": detected,
                         "training_again_at_s": restarted, "resumes_from_step": resumed,
                         "lost_gpu_hours": n * (detected - anchor + d["restart_s"]) / 3600})
        while li < len(losses) and losses[li][0] < restarted:
            li += 1
        start, resume = restarted, resumed
    return {"failures": failures, "finished_at_s": finish, "init_wait_gpu_hours": init_wait}


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_barrier_agrees_with_the_arithmetic_of_the_timeline(difficulty):
    for seed in range(8):
        p, s = both("barrier", seed, difficulty)
        hand = barrier_by_hand(p.data)
        got = list(s.answer["failures"].values())
        assert len(got) == len(hand["failures"]) == s.answer["restarts"] >= 1, (seed, difficulty)
        for g, h in zip(got, hand["failures"]):
            assert g["stalled_in"] == h["stalled_in"]
            for key in ("stalled_at_s", "detected_at_s", "training_again_at_s"):
                assert g[key] == pytest.approx(h[key], abs=1e-6), (seed, difficulty, key)
            assert g["resumes_from_step"] == h["resumes_from_step"]
            assert g["lost_gpu_hours"] == pytest.approx(h["lost_gpu_hours"], abs=0.006)
        assert s.answer["finished_at_s"] == pytest.approx(hand["finished_at_s"], abs=1e-6)
        assert s.answer["init_wait_gpu_hours"] == pytest.approx(hand["init_wait_gpu_hours"], abs=0.006)


def test_barrier_hard_has_late_ranks_second_losses_and_replacements():
    hard = [generate("barrier", seed, "hard").data for seed in range(30)]
    assert any(d["join_times_s"] for d in hard)
    assert any(len(d["losses"]) == 2 for d in hard)
    assert any(d["strategy"] == "replace-rank" for d in hard)
    kinds = {loss[2] for d in hard for loss in d["losses"]}
    assert kinds == {"error", "silent"}            # preempted pods (an NCCL error) and hung ranks (the timeout)
    easy = [generate("barrier", seed, "easy").data for seed in range(30)]
    assert all(d["join_times_s"] is None and len(d["losses"]) == 1 and d["checkpoint_cost_s"] == 0
               and d["strategy"] == "restart-all" for d in easy)
    medium = [solve(generate("barrier", seed, "medium")) for seed in range(20)]
    assert any(f["stalled_in"].startswith("checkpoint")
               for s in medium for f in s.answer["failures"].values())   # lost mid-checkpoint


# --- layers: the cache key chain, computed from the two Dockerfiles and contexts -----------------

def instructions(text: str) -> list[tuple[int, str]]:
    """(first line, instruction) with continuations joined; comments and blank lines are no step."""
    out, buf, first = [], [], None
    for i, raw in enumerate(text.splitlines(), 1):
        if not buf and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        first = first or i
        buf.append(raw.rstrip("\\").strip())
        if not raw.endswith("\\"):
            out.append((first, " ".join(buf)))
            buf, first = [], None
    return out


def copied(src: str, path: str) -> bool:
    src = src.rstrip("/")
    if src in (".", ""):
        return True
    if "*" in src:
        return "/" not in path and fnmatch.fnmatchcase(path, src)
    return path == src or path.startswith(src + "/")


def cache_keys(text: str, files: dict[str, str]) -> list[tuple[int, str]]:
    h = lambda *parts: hashlib.sha256("\x00".join(parts).encode()).hexdigest()  # noqa: E731
    args, stage_end, names, key, out = {}, {}, {}, None, []
    stage = -1
    for line, ins in instructions(text):
        word, _, rest = ins.partition(" ")
        if word == "ARG" and stage < 0:
            name, _, val = rest.partition("=")
            args[name] = val
            continue
        if word == "FROM":
            stage += 1
            base, *alias = rest.split()
            resolved = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
            key = h("FROM", stage_end[names[base]] if base in names else resolved)
            if alias:
                names[alias[-1]] = stage
        elif word in ("COPY", "ADD"):
            srcs = rest.split()[:-1]
            if srcs and srcs[0].startswith("--from="):
                key = h(key, ins, stage_end[names[srcs[0][7:]]])
            else:
                content = sorted((p, c) for p, c in files.items() if any(copied(s, p) for s in srcs))
                key = h(key, ins, repr(content))
        else:
            key = h(key, ins)
        stage_end[stage] = key
        out.append((line, key))
    return out


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_layers_agree_with_the_cache_key_chain(difficulty):
    for seed in range(30):
        p, s = both("layers", seed, difficulty)
        d = p.data
        before_files = {f: "v1" for f in d["context"]}
        after_files, after_text = dict(before_files), d["dockerfile"]
        ch = d["change"]
        if "path" in ch:
            after_files[ch["path"]] = "v2"
        else:
            lines = d["dockerfile"].splitlines()
            assert lines[ch["line"] - 1] == ch["old"]
            lines[ch["line"] - 1] = ch["new"]
            after_text = "\n".join(lines) + "\n"
        old, new = cache_keys(d["dockerfile"], before_files), cache_keys(after_text, after_files)
        rebuilt = [line for (line, k1), (_, k2) in zip(old, new) if k1 != k2]
        assert s.answer["rebuilt_lines"] == rebuilt, (seed, difficulty, ch)
        assert s.answer["rebuilt_steps"] == len(rebuilt)
        assert sorted(s.answer["cached_lines"] + rebuilt) == [line for line, _ in old]


def test_layers_hard_is_multi_stage_and_easy_is_not():
    hard = [generate("layers", seed, "hard").data["dockerfile"] for seed in range(20)]
    assert all(t.count("\nFROM ") >= 2 for t in hard) and any("COPY --from=" in t for t in hard)
    easy = [generate("layers", seed, "easy").data for seed in range(40)]
    assert all(d["dockerfile"].count("FROM ") == 1 and "path" in d["change"] for d in easy)
    answers = [solve(generate("layers", seed, "easy")).answer for seed in range(40)]
    assert {a["reinstalls_packages"] for a in answers} == {True, False}   # the COPY . . ordering trap
    medium = [solve(generate("layers", seed, "medium")) for seed in range(40)]
    assert any(s.answer["rebuilt_steps"] == 0 for s in medium)           # a comment edit rebuilds nothing


# --- every topic: determinism, variety, size ----------------------------------------------------

@pytest.mark.parametrize("topic", TOPICS_B)
def test_same_seed_same_problem_and_solution(topic):
    for difficulty in DIFFICULTIES:
        for seed in (0, 7, 12345):
            p1, s1 = both(topic, seed, difficulty)
            p2, s2 = both(topic, seed, difficulty)
            assert p1 == p2 and asdict(s1) == asdict(s2)
            assert p1.question and p1.question in p1.text
            assert not set(s1.answer) & set(p1.data), "an answer stored in the problem's data"


@pytest.mark.parametrize("topic", TOPICS_B)
def test_fifty_seeds_fifty_problems(topic):
    for difficulty in DIFFICULTIES:
        texts = {generate(topic, seed, difficulty).text for seed in range(50)}
        assert len(texts) == 50, (topic, difficulty)


SIZE = {
    "oom": lambda d: len(d["scenario"]["processes"]) + len(d["scenario"].get("cgroups", [])),
    "qos": lambda d: len(d["pod"]["containers"]) + len(d["pod"]["initContainers"]),
    "barrier": lambda d: d["ranks"] * len(d["losses"]) + (d["join_times_s"] is not None),
    "layers": lambda d: len(instructions(d["dockerfile"])),
}


@pytest.mark.parametrize("topic", TOPICS_B)
def test_hard_problems_are_bigger_than_easy_ones(topic):
    def mean(difficulty):
        return sum(SIZE[topic](generate(topic, seed, difficulty).data) for seed in range(20)) / 20
    assert mean("hard") > mean("medium") >= mean("easy") or mean("hard") > mean("easy") * 1.3
    assert mean("hard") > mean("easy")
