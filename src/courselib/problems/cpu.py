"""Practice: a CPU limit and a CPU request, as the kernel enforces them.

The kubelet turns ``limits.cpu`` into a CFS quota over a 100 ms period and ``requests.cpu`` into
``cpu.shares``, which a cgroup v2 runtime converts to ``cpu.weight``; the kernel throttles a cgroup
that used its quota until the period ends, and shares contended CPUs in proportion to the weights
(sources: ``kubelet-cpu-helpers``, ``kernel-sched-bwc``, ``kernel-cgroup-v2``,
``opencontainers-cgroups-weight``). The solution is :mod:`courselib.model.cpu`. Traps by difficulty:

- easy: one container, busy threads on idle CPUs: the quota is CPU time summed over CPUs, so
  n threads spend it n times faster and then stall for the rest of the period.
- medium: two containers competing for fewer CPUs than they want: requests decide the split
  (weights, not the request's CPU count), limits cap it; a tiny limit meets the 1 ms floor.
- hard: three containers, one capped below its fair share so the others get what it cannot use,
  and one with a limit but no request (Kubernetes sets the request to the limit: not the minimum weight).
"""
from __future__ import annotations

from courselib.model import cpu
from courselib.problems.base import Problem, Solution, cite, rng
from courselib.problems.render import table

TOPIC = "cpu"
SUMMARY = "CPU quota, period and throttling; shares and weight when containers compete for CPUs"

_NAMES = ("trainer", "loader", "exporter", "evaluator", "tokenizer", "sidecar")
_LIMITS = ("100m", "250m", "500m", "750m", "1", "1500m", "2", "3", "4")
_REQUESTS = ("100m", "250m", "500m", "1", "2", "3")


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    n = {"easy": 1, "medium": 2, "hard": 3}[difficulty]
    names = r.sample(_NAMES, n)
    containers = []
    for i, name in enumerate(names):
        limit = r.choice(_LIMITS)
        if difficulty != "easy" and i == 0 and r.random() < 0.3:
            limit = r.choice(("2m", "5m"))                 # below the kubelet's 1 ms floor
        request = None if (difficulty == "hard" and i == n - 1) else r.choice(
            [q for q in _REQUESTS if cpu.parse_cpu(q) <= cpu.parse_cpu(limit)] or [limit])
        containers.append({"name": name, "limit": limit, "request": request, "threads": r.randint(2, 8)})
    node_cpus = r.choice((16, 32, 64)) if difficulty == "easy" else r.choice((1, 2, 3, 4))
    data = {"containers": containers, "node_cpus": node_cpus, "cgroup": "v2"}
    question = ("For each container: the cpu.max the kubelet writes (quota and period), how many CPUs that is, and, "
                "if its busy threads had idle CPUs to themselves, for how many ms of each 100 ms period they run "
                "and for how long they are throttled."
                + ("" if n == 1 else " Then, with all of them busy on this node: each one's cpu.weight, and the "
                   "CPUs each actually gets."))
    return Problem(TOPIC, seed, difficulty, _text(data, question), data, question)


def _text(d: dict, question: str) -> str:
    lines = [f"A cgroup v2 node with {d['node_cpus']} CPU{'s' if d['node_cpus'] > 1 else ''} runs these containers, "
             "each a busy loop in every thread:"]
    for c in d["containers"]:
        req = f"requests.cpu {c['request']}" if c["request"] else "no CPU request"
        lines.append(f"  - {c['name']}: limits.cpu {c['limit']}, {req}, {c['threads']} busy threads")
    lines += ["The kubelet uses the default CFS period of 100 ms.", "", question]
    return "\n".join(lines)


def _weights(d: dict) -> dict[str, tuple[int, int]]:
    """(shares, weight) per container; a limit without a request gets request = limit (API defaulting)."""
    out = {}
    for c in d["containers"]:
        shares = cpu.milli_cpu_to_shares(cpu.parse_cpu(c["request"] or c["limit"]))
        out[c["name"]] = (shares, cpu.shares_to_weight(shares))
    return out


def solve(problem: Problem) -> Solution:
    d = problem.data
    steps, answer, caps = [], {"cpu_max": {}, "cpus": {}, "run_ms_per_period": {}, "throttled_ms_per_period": {}}, {}
    for c in d["containers"]:
        milli = cpu.parse_cpu(c["limit"])
        raw = milli * cpu.DEFAULT_PERIOD_US // 1000
        quota = cpu.milli_cpu_to_quota(milli)
        lim = cpu.CpuLimit(quota)
        run_us, wait_us = lim.burst(c["threads"])
        caps[c["name"]] = lim.cpus
        floor = (f"; {raw} µs is below the kubelet's {cpu.MIN_QUOTA_US} µs minimum, so it writes {quota}"
                 if raw < cpu.MIN_QUOTA_US else "")
        steps.append(f"{c['name']}: limits.cpu {c['limit']} = {milli} milliCPU -> quota = {milli} × "
                     f"{cpu.DEFAULT_PERIOD_US} / 1000 = {raw} µs{floor} {cite('kubelet-cpu-helpers')}: "
                     f"cpu.max \"{lim.v2_files()['cpu.max']}\", {lim.cpus:g} CPUs. The quota is CPU time summed "
                     f"over CPUs {cite('kernel-sched-bwc')}: {c['threads']} busy threads spend it in "
                     f"{quota} µs / {c['threads']} = {run_us / 1000:g} ms, then the cgroup is throttled for the "
                     f"remaining {wait_us / 1000:g} ms of every period.")
        answer["cpu_max"][c["name"]] = lim.v2_files()["cpu.max"]
        answer["cpus"][c["name"]] = round(lim.cpus, 4)
        answer["run_ms_per_period"][c["name"]] = round(run_us / 1000, 4)
        answer["throttled_ms_per_period"][c["name"]] = round(wait_us / 1000, 4)
    if len(d["containers"]) > 1:
        w = _weights(d)
        rows = [("container", "request", "cpu.shares", "cpu.weight", "cap (CPUs)", "wants (CPUs)")]
        for c in d["containers"]:
            rows.append((c["name"], c["request"] or f"{c['limit']} (= limit)", str(w[c["name"]][0]), str(w[c["name"]][1]),
                         f"{caps[c['name']]:g}", str(c["threads"])))
        defaulted = [c["name"] for c in d["containers"] if not c["request"]]
        if defaulted:
            steps.append(f"{', '.join(defaulted)} sets a limit but no request: Kubernetes then sets the request to the "
                         f"limit {cite('k8s-docs-qos')} — not to nothing.")
        steps.append("requests.cpu becomes cpu.shares = milliCPU × 1024 / 1000 "
                     f"{cite('kubelet-cpu-helpers')}, which the runtime converts to cgroup v2's cpu.weight "
                     f"{cite('opencontainers-cgroups-weight')}:\n" + table(rows, indent=""))
        got = cpu.contended_cpus({c["name"]: float(c["threads"]) for c in d["containers"]},
                                 {k: v[1] for k, v in w.items()}, caps, float(d["node_cpus"]))
        steps.append(f"The {d['node_cpus']} CPU(s) are split in proportion to the weights {cite('kernel-cgroup-v2')}; "
                     "a container that hits its cpu.max (or wants less) keeps only that, and the rest is split "
                     "again among the others: " + ", ".join(f"{k} {v:.3f}" for k, v in got.items()) + " CPUs.")
        answer["cpu_weight"] = {k: v[1] for k, v in w.items()}
        answer["contended_cpus"] = {k: round(v, 3) for k, v in got.items()}
    return Solution(answer, steps)
