"""Gang problems: which jobs start when under a named policy, and where is the deadlock?

The generator draws a cluster and a few training jobs; the solver runs the mini gang scheduler
(:func:`courselib.sim.gang.simulate`) and explains its allocation sequence event by event, then
adds up the GPUs held idle (held while not training: the NCCL init barrier has not passed,
chapter 7; book/references.bib: nccl-header). Difficulty changes the size and the traps: *easy* is two jobs at t=0 under
kube-default or volcano; *medium* adds staggered submits, ``min_member`` below ``pods``, kueue and
slurm; *hard* has more jobs and nodes, priorities, near-deadlocks (demand exactly the cluster, or
one pod over, or fragmentation by mixed pod sizes) and asks for two policies side by side.
"""
from __future__ import annotations

from courselib.model.cost import gpu_hours
from courselib.model.workload import ClusterSpec, Job, Queue, Workload
from courselib.problems.base import Problem, Solution, rng
from courselib.problems.render import table
from courselib.units import format_duration

TOPIC = "gang"
SUMMARY = "which jobs start when under kube-default, kube-gang, volcano, kueue or slurm, and where is the deadlock"

NAMES = ("llm-a", "llm-b", "vision", "speech", "moe", "rl", "embed", "finetune", "diffusion", "eval-sweep",
         "ranker", "retrieval")
DURATIONS = (30 * 60, 3600, 90 * 60, 2 * 3600, 3 * 3600, 4 * 3600)
POD_GPUS = (1, 2, 4, 8)

# Each rule as the book states it (k8s-gang-scheduling and kube-gang, volcano-allocate, kueue-all-or-nothing,
# slurm-quickstart; kube-gang: courselib.model.policies.kube_gang).
RULES = {
    "kube-default": "the default kube-scheduler: no gang scheduling; pods of jobs submitted together are "
                    "created round-robin and bound one at a time, each to the node with the most free "
                    "GPUs",
    "volcano": "Volcano: a PodGroup (each pod names it in its scheduling.k8s.io/group-name annotation) with "
               "minResources is enqueued only if they fit (overcommit factor 1.2), "
               "then allocated all-or-nothing: no pod is bound unless min_member pods fit at once",
    "kueue": "Kueue: a workload is admitted when its whole GPU count fits the ClusterQueue's unused "
             "quota (placement is NOT checked); admitted pods are bound one at a time by the default "
             "scheduler; this cluster enables waitForPodsReady (Kueue v0.17 leaves it off unless configured; "
             "v0.19 and later turn it on by default), which "
             "evicts a workload not ready after the timeout and re-queues it after 60 s, 120 s, ...",
    "slurm": "Slurm: each job is one allocation of all its tasks, started in priority order; backfill "
             "starts lower-priority jobs that delay no reservation",
    "kube-gang": "Kubernetes v1.37 with GenericWorkload on: each job is a PodGroup with gang minCount = "
                 "min_member; one PodGroup scheduling cycle tries all its pods at once (each to the node "
                 "with the most free GPUs) and binds none unless min_member fit; a gang that does not fit "
                 "holds nothing and is retried whenever GPUs free up, groups never tried first, then the "
                 "smaller waiting gangs",
}


# ---- generation ---------------------------------------------------------------------------------
def _job(r, name: str, total: int, frac: float, gpn: int, pod_gpus=POD_GPUS, **kw) -> dict:
    g = r.choice([p for p in pod_gpus if p <= gpn])
    pods = max(1, min(total // g, round(frac * total / g)))
    return {"name": name, "pods": pods, "gpus_per_pod": g, "submit": 0, "duration": r.choice(DURATIONS), **kw}


def _draw(r, difficulty: str) -> dict:
    gpn = 8
    if difficulty == "easy":
        nodes = r.choice([2, 3, 4, 6, 8, 16, 75])
        total = nodes * gpn
        names = r.sample(NAMES, 2)
        policy = r.choice(["kube-default", "volcano"])
        fracs = [r.uniform(0.35, 0.8) for _ in names]
        jobs = [_job(r, n, total, f, gpn) for n, f in zip(names, fracs)]
        return {"cluster": {"nodes": nodes, "gpus_per_node": gpn}, "jobs": jobs, "policies": [policy]}
    if difficulty == "medium":
        nodes = r.choice([4, 6, 8, 12])
        total = nodes * gpn
        names = r.sample(NAMES, 3)
        policy = r.choice(["kube-default", "volcano", "kueue", "slurm"])
        jobs = [_job(r, n, total, r.uniform(0.3, 0.75), gpn) for n in names]
        jobs[1]["submit"] = 0 if r.random() < 0.6 else r.choice([5, 10, 20]) * 60
        jobs[2]["submit"] = r.choice([10, 30, 45, 60]) * 60
        if r.random() < 0.4:  # an elastic job: trains once min_member ranks are placed
            j = r.choice(jobs)
            if j["pods"] > 1:
                j["min_member"] = max(1, j["pods"] * r.choice([1, 2, 3]) // 4)
        data = {"cluster": {"nodes": nodes, "gpus_per_node": gpn}, "jobs": jobs, "policies": [policy]}
        if policy == "kueue" and r.random() < 0.5:
            data["queues"] = [{"name": "team", "nominal_quota": r.choice([total // 2, total, total + total // 2])}]
            for j in jobs:
                j["queue"] = "team"
        return data
    # hard: more jobs and nodes, priorities, two policies, a near-deadlock by construction
    nodes = r.choice([8, 10, 12, 16, 24])
    total = nodes * gpn
    names = r.sample(NAMES, r.choice([4, 5]))
    trap = r.choice(["exact", "both-over-half", "fragmented", "min-member"])
    g = r.choice([1, 2, 4])
    half = total // (2 * g)  # pods of g GPUs in half the cluster
    if trap == "both-over-half":  # each job alone fits, both together cannot: round-robin splits them
        a_pods, b_pods = half + r.randint(1, max(1, half // 3)), half + r.randint(1, max(1, half // 3))
    else:  # exactly the cluster between them: a near-deadlock that fits, unless placement spoils it
        a_pods = r.randint(max(1, 2 * half // 3), half)
        b_pods = 2 * half - a_pods
    jobs = [{"name": names[0], "pods": a_pods, "gpus_per_pod": g, "submit": 0, "duration": r.choice(DURATIONS)},
            {"name": names[1], "pods": b_pods, "gpus_per_pod": g, "submit": 0, "duration": r.choice(DURATIONS)}]
    if trap == "fragmented":  # same total, but the second job's pods need whole nodes
        jobs[1]["gpus_per_pod"] = 8
        jobs[1]["pods"] = max(1, b_pods * g // 8)
    if trap == "min-member":  # more pods than fit, but min_member of them do
        jobs[1]["min_member"] = b_pods
        jobs[1]["pods"] = b_pods + r.randint(1, 4)
    for n in names[2:]:
        j = _job(r, n, total, r.uniform(0.1, 0.4), gpn, submit=r.choice([15, 30, 60, 90, 120]) * 60)
        if r.random() < 0.5:
            j["priority"] = r.choice([10, 100])
        jobs.append(j)
    pair = r.choice([("kube-default", "volcano"), ("kube-default", "slurm"), ("kueue", "volcano"),
                     ("kube-default", "kueue")])
    data = {"cluster": {"nodes": nodes, "gpus_per_node": gpn}, "jobs": jobs, "policies": list(pair),
            "trap": trap}
    if "kueue" in pair and r.random() < 0.5:
        data["options"] = {"kueue": {"config_api": "v1beta1"}}  # 5 min timeout, blockAdmission on
    if pair[0] == "kube-default" and r.random() < 0.3:  # drawn last: the problems above keep their draws
        data["policies"] = ["kube-default" if pair[1] == "kueue" else pair[1], "kube-gang"]
    return data


def workload(data: dict) -> Workload:
    """The :class:`Workload` a problem's data describes."""
    c = data["cluster"]
    jobs = tuple(Job(name=j["name"], pods=j["pods"], gpus_per_pod=j["gpus_per_pod"], submit=float(j["submit"]),
                     duration=float(j["duration"]), min_member=j.get("min_member"), priority=j.get("priority", 0),
                     queue=j.get("queue", "default")) for j in data["jobs"])
    queues = tuple(Queue(q["name"], q.get("nominal_quota")) for q in data.get("queues", ()))
    return Workload(ClusterSpec(c["nodes"], c["gpus_per_node"]), jobs, queues)


def horizon(data: dict) -> float:
    """Watch the cluster this long: the simulator's default horizon, stated in the problem."""
    from courselib.sim.gang import default_horizon
    return default_horizon(workload(data))


def _policy_text(policy: str, data: dict) -> str:
    text = RULES[policy]
    opts = data.get("options", {}).get(policy, {})
    if policy == "kueue":
        if opts.get("config_api") == "v1beta1":
            text += "; configured with the v1beta1 config API: timeout 5 min and blockAdmission on"
        else:
            text += "; configured with the v1beta2 config API: timeout 30 min, blockAdmission off"
        quotas = data.get("queues")
        text += (f"; ClusterQueue {quotas[0]['name']} has nominalQuota {quotas[0]['nominal_quota']} GPUs"
                 if quotas else "; the ClusterQueue's quota is the whole cluster")
    return text


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    data = _draw(r, difficulty)
    c = data["cluster"]
    total = c["nodes"] * c["gpus_per_node"]
    rows = [("job", "submit", "pods x GPUs/pod", "GPUs", "min_member", "duration", "priority")]
    for j in data["jobs"]:
        rows.append((j["name"], format_duration(j["submit"]), f"{j['pods']} x {j['gpus_per_pod']}",
                     j["pods"] * j["gpus_per_pod"], j.get("min_member", j["pods"]), format_duration(j["duration"]),
                     j.get("priority", 0)))
    h = horizon(data)
    pols = data["policies"]
    lines = [f"A cluster of {c['nodes']} nodes x {c['gpus_per_node']} GPUs = {total} GPUs runs these training "
             "jobs. A job trains only once min_member of its pods are placed (the NCCL init barrier); "
             "GPUs it holds before that sit idle.", "", table(rows), ""]
    for p in pols:
        lines.append(f"Scheduler {p}: {_policy_text(p, data)}.")
    lines.append(f"Watch the cluster from t=0s to t={format_duration(h)}.")
    under = " under " + " and under ".join(pols) if len(pols) > 1 else ""
    question = (f"When does each job start training and finish{under}? Is there a deadlock (GPUs held, "
                "nothing training, nothing can ever change), and which jobs are stuck? How many GPU-hours "
                "are held idle?" + (" Which policy wastes more?" if len(pols) > 1 else ""))
    lines += ["", "Question: " + question]
    return Problem(TOPIC, seed, difficulty, "\n".join(lines), data, question)


# ---- solution -----------------------------------------------------------------------------------
def run(data: dict, policy: str):
    """The simulator's result for one of the problem's policies."""
    from courselib.sim.gang import simulate
    return simulate(workload(data), policy, **data.get("options", {}).get(policy, {}))  # its default horizon


def _h(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def _idle_segments(history, end: float):
    for (t0, held, training), nxt in zip(history, list(history[1:]) + [(end, 0, False)]):
        t1 = min(nxt[0], end)
        if held and not training and t1 > t0:
            yield t0, t1, held


def explain(data: dict, policy: str, result) -> list[str]:
    steps = [f"Under {policy}: {_policy_text(policy, data)}."]
    skip = ("submitted:",)
    for e in result.trace:
        if e.what.startswith(skip):
            continue
        steps.append(f"t={format_duration(e.time)}  {e.job}: {e.what}  [now holds {e.held} GPUs]")
    if result.deadlock:
        stuck = [j for j in result.jobs if j.start is None and j.gpus_held > 0]
        steps.append(f"After the last event nothing can change: no job that holds GPUs is training, so none "
                     f"will finish and free any. DEADLOCK: {', '.join(j.name for j in stuck)} hold "
                     f"{sum(j.gpus_held for j in stuck)} GPUs until the horizon, t={format_duration(result.horizon)}.")
        waiting = [j.name for j in result.jobs if j.start is None and j.gpus_held == 0]
        if waiting:
            steps.append(f"{', '.join(waiting)} never start: the GPUs they need are held by the stuck jobs.")
    else:
        never = [j.name for j in result.jobs if j.start is None]
        if never:
            steps.append(f"No deadlock, but {', '.join(never)} never start(s) training before the horizon.")
        else:
            steps.append(f"No deadlock: every job trained; the last finished at t={format_duration(result.end_time)}.")
    parts = []
    for name, history in result.histories.items():
        for t0, t1, held in _idle_segments(history, result.end_time):
            gh = gpu_hours(held, t1 - t0)
            parts.append(gh)
            steps.append(f"Idle: {name} held {held} GPUs without training from t={format_duration(t0)} to "
                         f"t={format_duration(t1)}: {held} x {_h(t1 - t0)} = {gh:,.2f} GPU-h")
    if parts:
        steps.append(f"GPU-hours held idle under {policy}: " + " + ".join(f"{p:,.2f}" for p in parts)
                     + f" = {result.wasted_gpu_hours:,.2f}")
    else:
        steps.append(f"GPU-hours held idle under {policy}: 0 (no job ever held a GPU while not training).")
    return steps


def answer_for(result) -> dict:
    jobs = {j.name: {"start_s": j.start, "end_s": j.end, "state": j.state} for j in result.jobs}
    stuck = [j.name for j in result.jobs if result.deadlock and j.start is None and j.gpus_held > 0]
    return {"deadlock": result.deadlock, "stuck": stuck, "wasted_gpu_hours": round(result.wasted_gpu_hours, 2),
            "jobs": jobs}


def solve(problem: Problem) -> Solution:
    data = problem.data
    c = data["cluster"]
    total = c["nodes"] * c["gpus_per_node"]
    at0 = [j for j in data["jobs"] if j["submit"] == 0]
    need = sum(j.get("min_member", j["pods"]) * j["gpus_per_pod"] for j in at0)
    steps = [f"Capacity: {c['nodes']} nodes x {c['gpus_per_node']} GPUs = {total} GPUs. The jobs submitted at "
             f"t=0 need " + " + ".join(f"{j.get('min_member', j['pods']) * j['gpus_per_pod']} ({j['name']})"
                                       for j in at0)
             + f" = {need} GPUs at their barrier: " + ("more than the cluster, so not all can train at once."
                                                       if need > total else "they fit together, if placement allows.")]
    answer, wasted = {}, {}
    for policy in data["policies"]:
        result = run(data, policy)
        steps += explain(data, policy, result)
        answer[policy] = answer_for(result)
        wasted[policy] = result.wasted_gpu_hours
    if len(wasted) > 1:
        a, b = data["policies"]
        if abs(wasted[a] - wasted[b]) < 0.005:
            verdict = "both waste the same"
        else:
            verdict = f"{max(wasted, key=wasted.get)} wastes more"
        steps.append(f"Compare: {a} {wasted[a]:,.2f} GPU-h vs {b} {wasted[b]:,.2f} GPU-h idle: {verdict}.")
        answer["wastes_more"] = verdict
    if len(answer) == 1:
        answer = next(iter(answer.values()))
    return Solution(answer, steps)
