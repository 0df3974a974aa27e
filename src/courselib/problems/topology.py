"""Topology problems: headcount fits, topology does not — which job waits, where each one lands, and why.

The generator draws a cluster with a tree of racks and blocks, a few jobs already running that leave
free GPUs scattered, and a queue of jobs with topology requests (required or preferred at a level).
The solver runs the mini gang scheduler (:func:`courselib.sim.gang.simulate`) and explains, job by
job, the domains each one landed in, or why it waits in the scheduler's own words, and at the first
refusal the free GPUs per domain: enough in total, not enough in any one domain. *easy* is one
rack-level request under Kueue's TAS; *medium* adds a preferred request and a second level; *hard*
has a three-level tree, several requests and asks for two schedulers side by side (one of them
perhaps topology-blind).
"""
from __future__ import annotations

from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.problems.base import Problem, Solution, cite, rng
from courselib.problems.render import table
from courselib.units import format_duration

TOPIC = "topology"
SUMMARY = "headcount fits, topology does not: which job waits for a domain, where each lands, and why"

NAMES = ("llm-a", "llm-b", "vision", "speech", "moe", "rl", "embed", "finetune", "diffusion", "ranker")
RULES = {
    "kueue": "Kueue with Topology-Aware Scheduling (BestFit): a workload is admitted only when its pods fit "
             "the requested domains; of the domains that fit it takes the one with the fewest free pods; "
             "preferred climbs to the level above when no domain fits " + cite("kueue-tas"),
    "slurm": "Slurm with topology/tree: every job goes to the leaf switches (innermost level) that fit it "
             "most tightly; --switches=1 (required at the innermost level) waits at most max_switch_wait "
             "= 300 s; a requirement above the leaves has no Slurm form " + cite("slurm-topology", "slurm-tree-source"),
    "volcano": "Volcano with networkTopology mode: hard (required): tier by tier from the lowest, up to the "
               "required level, the fullest HyperNode that holds the whole job; soft (preferred): the same with "
               "no tier limit, so the job spans the cluster only when no HyperNode holds it "
               + cite("volcano-network-topology"),
    "kube-gang": "Kubernetes v1.37 with TopologyAwareWorkloadScheduling: one placement per domain of the "
                 "PodGroup's required level, the group placed only inside one; preferred has no form " + cite("k8s-v1372-topology-placement"),
    "kube-default": "the default kube-scheduler: topology-blind, every pod to the node with the most free GPUs",
}


# ---- generation ---------------------------------------------------------------------------------
def _draw(r, difficulty: str) -> dict:
    gpn = r.choice([4, 8])
    if difficulty == "easy":
        levels, racks = [("rack", 8)], r.choice([2, 3])
        nodes = 8 * racks
        policies = ["kueue"]
    elif difficulty == "medium":
        levels, racks = [("rack", 8), ("block", 4)], r.choice([2, 3])
        nodes = 8 * racks
        policies = [r.choice(["kueue", "volcano", "slurm"])]
    else:
        levels, racks = [("spine", 16), ("rack", 8), ("block", 4)], 4
        nodes = 32
        policies = [r.choice(["kueue", "volcano", "kube-gang"]), r.choice(["kube-default", "slurm"])]
    names = r.sample(NAMES, {"easy": 4, "medium": 5, "hard": 6}[difficulty])
    jobs = []
    # the fillers: one whole-node job pinned to each rack (a feature per rack, as an administrator
    # labels racks), leaving a few free nodes in every rack: the fragmentation
    per_rack_free, frees = r.choice([2, 3, 4, 5]), []
    for k in range(racks):
        used = 8 - per_rack_free - (r.choice([0, 1]) if difficulty != "easy" else 0)
        frees.append(8 - used)
        jobs.append({"name": f"{names[0]}-{k}", "pods": used, "gpus_per_pod": gpn, "constraint": f"r{k}",
                     "submit": 0, "duration": r.choice([2, 3, 4]) * 3600, "topology": None})
    # the queue: the first asks for one node more than any rack has free (headcount fits overall)
    big = max(frees) + 1
    queue = [{"name": names[1], "pods": big, "gpus_per_pod": gpn, "submit": 600, "duration": 3600,
              "topology": ["required", "rack"]}]
    if difficulty != "easy":
        queue.append({"name": names[2], "pods": big, "gpus_per_pod": gpn, "submit": 600, "duration": 3600,
                      "topology": ["preferred", r.choice(["rack", "block"])]})
    queue.append({"name": names[-1], "pods": r.choice([1, 2]), "gpus_per_pod": gpn, "submit": 900,
                  "duration": 1800, "topology": ["required", levels[-1][0]]})
    if difficulty == "hard":
        queue.append({"name": names[3], "pods": 16, "gpus_per_pod": gpn, "submit": 1200, "duration": 3600,
                      "topology": ["required", "spine"]})
    return {"cluster": {"nodes": nodes, "gpus_per_node": gpn, "topology": [list(x) for x in levels],
                        "features": {f"r{k}": [8 * k, 8 * k + 8] for k in range(racks)}},
            "jobs": jobs + queue, "policies": policies}


def workload(data: dict) -> Workload:
    """The :class:`Workload` a problem's data describes."""
    c = data["cluster"]
    spec = ClusterSpec.with_features(c["nodes"], c["gpus_per_node"],
                                     {f: range(a, b) for f, (a, b) in c["features"].items()},
                                     topology=tuple(tuple(x) for x in c["topology"]))
    return Workload(spec, tuple(Job(j["name"], j["pods"], j["gpus_per_pod"], submit=float(j["submit"]),
                                    duration=float(j["duration"]), constraint=j.get("constraint"),
                                    topology=tuple(j["topology"]) if j["topology"] else None)
                                for j in data["jobs"]))


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    data = _draw(r, difficulty)
    c = data["cluster"]
    tree = ", then ".join(f"{level}s of {size} consecutive nodes" for level, size in c["topology"])
    rows = [("job", "submit", "pods x GPUs/pod", "GPUs", "topology", "duration")]
    for j in data["jobs"]:
        rows.append((j["name"], format_duration(j["submit"]), f"{j['pods']} x {j['gpus_per_pod']}",
                     j["pods"] * j["gpus_per_pod"],
                     f"{j['topology'][0]}: {j['topology'][1]}" if j["topology"] else f"rack {j['constraint'][1:]} only",
                     format_duration(j["duration"])))
    lines = [f"A cluster of {c['nodes']} nodes x {c['gpus_per_node']} GPUs is a tree: {tree} (node1 is in "
             f"the first of each). These jobs arrive; required = every pod in one domain of that level, "
             f"preferred = as few domains as the scheduler manages.", "", table(rows), ""]
    for p in data["policies"]:
        lines.append(f"Scheduler {p}: {RULES[p]}.")
    under = " under " + " and under ".join(data["policies"])
    question = (f"Which jobs wait{under}, and why, although enough GPUs are free in total? In which domains "
                "does each job land, and when does each start?")
    lines += ["", "Question: " + question]
    return Problem(TOPIC, seed, difficulty, "\n".join(lines), data, question)


# ---- solution -----------------------------------------------------------------------------------
def run(data: dict, policy: str):
    from courselib.sim.gang import simulate
    return simulate(workload(data), policy)


def explain(data: dict, policy: str, result) -> list[str]:
    w = workload(data)
    spec = w.cluster
    steps = [f"Under {policy}: {RULES[policy]}."]
    for j in sorted(result.jobs, key=lambda j: (j.start if j.start is not None else float("inf"), j.name)):
        job = w.job(j.name)
        if j.start is None:
            steps.append(f"{j.name} never starts within the horizon: {j.pending_reason}.")
            continue
        where = "; ".join(f"{level} {', '.join(j.domains[level])}" for level in spec.levels)
        wait = j.start - j.submit
        asked = f"{job.topology[0]}: {job.topology[1]}" if job.topology else "pinned"
        line = (f"t={format_duration(j.start)}  {j.name} ({asked}) starts in {where}"
                + (f", after waiting {format_duration(wait)}" if wait else ""))
        if j.topology_note and job.topology:
            line += f" — {j.topology_note}"
        steps.append(line)
    waits = [e for e in result.trace if e.what.startswith("waiting:") and w.job(e.job).topology]
    if waits:
        e = waits[0]
        steps.append(f"The first refusal, t={format_duration(e.time)}: {e.job} {e.what}.")
    return steps


def solve(problem: Problem) -> Solution:
    data = problem.data
    c = data["cluster"]
    fillers = [j for j in data["jobs"] if j["submit"] == 0]
    racks = c["nodes"] // 8
    free_nodes = racks * 8 - sum(j["pods"] for j in fillers)
    head = next(j for j in data["jobs"] if j["submit"] > 0)
    per_rack = ", ".join(f"rack{k} {8 - j['pods']}" for k, j in enumerate(fillers))
    steps = [f"After the jobs of t=0: {free_nodes} of {c['nodes']} nodes are free "
             f"({free_nodes * c['gpus_per_node']} GPUs), by rack: {per_rack}; {head['name']} asks for "
             f"{head['pods']} nodes in one rack. Headcount fits; no rack does."]
    answer = {}
    for policy in data["policies"]:
        result = run(data, policy)
        steps += explain(data, policy, result)
        answer[policy] = {j.name: {"start_s": j.start, "domains": j.domains, "waits": j.pending_reason}
                          for j in result.jobs}
    return Solution(answer, steps)
