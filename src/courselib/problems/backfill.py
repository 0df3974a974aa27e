"""Backfill problems: which job does Slurm backfill at t=0, which waits, and what reason does squeue show?

Every job is submitted at t=0; the solver replays Slurm's first scheduling pass with the course's
Slurm policy (:mod:`courselib.model.policies.slurm`) — main scheduler in strict priority order,
then backfill with reservations of whole nodes (book/references.bib: slurm-sched-config, slurm-conf-backfill) — and explains each decision, then
runs the rest with :func:`courselib.sim.gang.simulate`. Difficulty: *easy* is whole-node jobs on a
few nodes (one job running, one blocked, two candidates); *medium* adds a second running job,
half-node jobs and jobs that finish before their ``--time`` (backfill plans with the limit, not the
run time); *hard* has more jobs, priorities not in listing order, a job that can never run
(``PartitionNodeLimit``/``BadConstraints``), ``--constraint`` features, and sometimes
``bf_job_part_count_reserve=1`` (EASY-like: only the first blocked job gets a reservation).
"""
from __future__ import annotations

from courselib.model.gang import SchedState
from courselib.model.policies.slurm_fast import SlurmFast
from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.problems.base import Problem, Solution, rng
from courselib.problems.render import table
from courselib.units import format_duration

TOPIC = "backfill"
SUMMARY = "Slurm: which job backfills, which waits and why (pending reasons, reservations, --time)"

NAMES = ("sim", "train", "eval", "prep", "tune", "render", "bench", "align", "sweep", "infer", "embed",
         "ckpt-test", "fold", "mesh")
LIMITS = tuple(h * 3600 for h in (1, 2, 3, 4, 6, 8, 12))


def _whole(name, nodes, limit, prio, gpn=8, duration=None, **kw) -> dict:
    return {"name": name, "pods": nodes, "gpus_per_pod": gpn, "priority": prio, "time_limit": limit,
            "duration": limit if duration is None else duration, **kw}


def _draw(r, difficulty: str) -> dict:
    gpn = 8
    names = r.sample(NAMES, 8)
    if difficulty == "easy":
        n = r.choice([3, 4, 5, 6])
        k = r.randint((n + 1) // 2, n - 1)  # nodes the running job holds
        lim = r.choice(LIMITS[1:5])
        free = n - k
        # ends before the reservation begins: backfills (one that ends exactly then is in its way,
        # as in Slurm: the model's backfill window is closed at its end)
        short = r.choice([lm for lm in LIMITS if lm < lim])
        longer = r.choice([lm for lm in LIMITS[:6] if lm > lim])  # would delay the blocked job: waits
        a, b = (short, longer) if r.random() < 0.5 else (longer, short)
        jobs = [_whole(names[0], k, lim, 400),
                _whole(names[1], r.randint(free + 1, n), r.choice(LIMITS[:4]), 300),
                _whole(names[2], r.randint(1, free), a, 200),
                _whole(names[3], r.randint(1, free), b, 100)]
        return {"cluster": {"nodes": n, "gpus_per_node": gpn}, "jobs": jobs}
    if difficulty == "medium":
        n = r.choice([4, 5, 6, 8])
        k1 = r.randint(1, n // 2)
        k2 = r.randint(1, max(1, n - k1 - 1))
        jobs = [_whole(names[0], k1, r.choice(LIMITS[1:5]), 500),
                _whole(names[1], k2, r.choice(LIMITS[1:6]), 450)]
        free = n - k1 - k2
        jobs.append(_whole(names[2], r.randint(free + 1, n), r.choice(LIMITS[:4]), 400))
        for i, prio in zip(range(3, r.choice([5, 6])), (300, 200, 100)):
            if r.random() < 0.4:  # half-node tasks: 4 GPUs each
                j = {"name": names[i], "pods": r.randint(1, max(1, 2 * free + 1)), "gpus_per_pod": 4,
                     "priority": prio, "time_limit": r.choice(LIMITS[:6])}
                j["duration"] = j["time_limit"]
            else:
                j = _whole(names[i], r.randint(1, max(1, free + 1)), r.choice(LIMITS[:6]), prio)
            jobs.append(j)
        for j in r.sample(jobs, 2):  # the trap: the job ends well before its --time
            j["duration"] = max(1800, j["time_limit"] // r.choice([2, 3, 4]))
        return {"cluster": {"nodes": n, "gpus_per_node": gpn}, "jobs": jobs}
    n = r.choice([6, 8, 10, 12])
    nv = r.randint(2, n // 2)  # nodes 1..nv carry the feature nvlink
    k1 = r.randint(2, n // 2)
    k2 = r.randint(1, max(1, n - k1 - 2))
    free = n - k1 - k2
    prios = r.sample(range(100, 1000, 50), 8)
    prios.sort(reverse=True)
    jobs = [_whole(names[0], k1, r.choice(LIMITS[1:5]), prios[0]),
            _whole(names[1], k2, r.choice(LIMITS[2:6]), prios[1], duration=r.choice(LIMITS[:2])),
            _whole(names[2], r.randint(free + 1, n), r.choice(LIMITS[:4]), prios[2])]
    impossible = r.choice(["too-big", "bad-constraint"])
    if impossible == "too-big":
        jobs.append(_whole(names[3], n + r.randint(1, 4), r.choice(LIMITS[:3]), prios[3]))
    else:
        jobs.append(_whole(names[3], nv + 1, r.choice(LIMITS[:3]), prios[3], constraint="nvlink"))
    for i in range(4, r.choice([6, 7, 8])):
        g = r.choice([8, 8, 4, 2])
        j = {"name": names[i], "pods": r.randint(1, max(1, (free + 1) * 8 // g)), "gpus_per_pod": g,
             "priority": prios[i], "time_limit": r.choice(LIMITS[:6])}
        j["duration"] = j["time_limit"] if r.random() < 0.6 else j["time_limit"] // 2
        if r.random() < 0.3:
            j["constraint"] = "nvlink"
            j["pods"] = min(j["pods"], nv * 8 // g)
        jobs.append(j)
    listed = jobs[:]
    r.shuffle(listed)  # the table is not in priority order: read the priorities
    data = {"cluster": {"nodes": n, "gpus_per_node": gpn, "features": {"nvlink": f"1-{nv}"}}, "jobs": listed}
    if r.random() < 0.5:
        data["options"] = {"bf_job_part_count_reserve": 1}
    return data


def workload(data: dict) -> Workload:
    c = data["cluster"]
    feats = c.get("features", {})
    by = {}
    for f, spec in feats.items():
        lo, hi = (int(x) for x in spec.split("-"))
        by[f] = range(lo - 1, hi)
    spec = ClusterSpec.with_features(c["nodes"], c["gpus_per_node"], by) if by else \
        ClusterSpec(c["nodes"], c["gpus_per_node"])
    jobs = tuple(Job(name=j["name"], pods=j["pods"], gpus_per_pod=j["gpus_per_pod"], submit=0.0,
                     duration=float(j["duration"]), priority=j["priority"], time_limit=float(j["time_limit"]),
                     constraint=j.get("constraint")) for j in data["jobs"])
    return Workload(spec, jobs)


def _order(data: dict) -> list[dict]:
    """Slurm's priority order: highest priority first (all submitted at t=0, in listing order)."""
    return sorted(data["jobs"], key=lambda j: -j["priority"])


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    data = _draw(r, difficulty)
    c = data["cluster"]
    rows = [("job", "priority", "tasks x GPUs", "GPUs", "--time", "actually runs", "--constraint")]
    for j in data["jobs"]:
        rows.append((j["name"], j["priority"], f"{j['pods']} x {j['gpus_per_pod']}", j["pods"] * j["gpus_per_pod"],
                     format_duration(j["time_limit"]), format_duration(j["duration"]), j.get("constraint") or "-"))
    feats = c.get("features")
    lines = [f"A Slurm partition of {c['nodes']} nodes x {c['gpus_per_node']} GPUs = {c['nodes'] * c['gpus_per_node']} "
             "GPUs" + (f"; nodes {feats['nvlink']} carry the feature nvlink" if feats else "") + ". "
             "At t=0 these jobs are submitted (sbatch -n TASKS --gpus-per-task=GPUS --time=...); "
             "a job runs for 'actually runs' or until its --time, whichever is shorter.", "", table(rows), ""]
    opts = data.get("options", {})
    if opts.get("bf_job_part_count_reserve"):
        lines.append(f"slurm.conf has SchedulerParameters=bf_job_part_count_reserve={opts['bf_job_part_count_reserve']}"
                     " (backfill reserves resources only for the first pending job(s)).")
    else:
        lines.append("slurm.conf uses the backfill defaults (bf_job_part_count_reserve=0: a reservation "
                     "for every pending job it examines).")
    question = ("After Slurm's first scheduling pass at t=0 (main scheduler, then backfill): which jobs run, "
                "which of them were started by backfill, and what pending reason does squeue show for each "
                "waiting job? When does every job start and end?")
    lines += ["", "Question: " + question]
    return Problem(TOPIC, seed, difficulty, "\n".join(lines), data, question)


# ---- solution -----------------------------------------------------------------------------------
class _Explained(SlurmFast):
    """The course's Slurm policy, recording what backfill saw for each job at t=now (for the trace)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.in_backfill = False
        self.seen: dict[str, tuple] = {}
        self.free_before: list[int] | None = None  # free GPUs per node when backfill began  # name -> (plan now with reservations, plan now without, reservations)

    def _backfill(self, state, pending):
        self.in_backfill = True
        self.free_before = list(state.cluster.free)
        try:
            super()._backfill(state, pending)
        finally:
            self.in_backfill = False

    def plan(self, state, job, t, reserved):
        out = super().plan(state, job, t, reserved)
        if self.in_backfill and t == state.now and job.name not in self.seen:
            alone = out if out is not None or not reserved else super().plan(state, job, t, [])
            self.seen[job.name] = (out, alone, list(reserved))
        return out


def nodes_text(idx) -> str:
    """0-based node indexes → ``node1-node3,node5``."""
    idx = sorted(set(int(i) for i in idx))
    parts, start = [], None
    for k, i in enumerate(idx):
        if start is None:
            start = i
        if k + 1 == len(idx) or idx[k + 1] != i + 1:
            parts.append(f"node{start + 1}" + (f"-node{i + 1}" if i != start else ""))
            start = None
    return ",".join(parts)


def first_pass(data: dict):
    """Slurm's first scheduling pass at t=0: (policy after the pass, state, trace events at t=0)."""
    wl = workload(data)
    state = SchedState(wl)
    pol = _Explained(wl, **data.get("options", {}))
    runs = [state.submit(j) for j in wl.jobs]
    pol.submit(state, runs)
    pol.schedule(state)
    state.flush_binds()
    return pol, state


def run(data: dict):
    from courselib.sim.gang import simulate
    return simulate(workload(data), "slurm", **data.get("options", {}))


def solve(problem: Problem) -> Solution:
    data = problem.data
    c = data["cluster"]
    total = c["nodes"] * c["gpus_per_node"]
    order = _order(data)
    pol, state = first_pass(data)
    steps = ["Priority order (highest first): " + " > ".join(f"{j['name']} ({j['priority']})" for j in order) + "."]
    reasons, started, backfilled = {}, [], []
    blocked_seen = False
    for j in order:
        run_ = state.runs[j["name"]]
        gpus = j["pods"] * j["gpus_per_pod"]
        why = pol.infeasible(state, run_)
        bf = any(e.job == j["name"] and "backfill" in e.what for e in state.trace)
        if why == "PartitionNodeLimit":
            steps.append(f"{j['name']} needs {gpus} GPUs, more than the whole partition ({total}): it can never "
                         "run; squeue shows PartitionNodeLimit.")
        elif why == "BadConstraints":
            nv = c["features"]["nvlink"]
            steps.append(f"{j['name']} needs {j['pods']} tasks x {j['gpus_per_pod']} GPUs on nodes with "
                         f"{j['constraint']}, but only nodes {nv} carry it: it can never run; squeue shows "
                         "BadConstraints.")
        elif state.held(run_) and not bf:
            steps.append(f"Main scheduler: {j['name']} needs {gpus} GPUs and they are free: it starts at t=0 on "
                         f"{nodes_text(state.cluster.alloc[j['name']])}, expected to end by its --time at "
                         f"t={format_duration(j['time_limit'])}.")
        elif not blocked_seen and not bf:
            blocked_seen = True
            steps.append(f"Main scheduler: {j['name']} needs {gpus} GPUs but not enough are free: it waits with "
                         "reason Resources, and strict priority order stops here — every job behind it is "
                         "marked Priority.")
        if why:
            reasons[j["name"]] = why
        elif state.held(run_):
            started.append(j["name"])
        else:
            reasons[j["name"]] = run_.pending_reason
    if pol.free_before is not None:
        free = [(i, g) for i, g in enumerate(pol.free_before) if g]
        steps.append("Free GPUs after the main scheduler: " + (", ".join(f"node{i + 1} {g}" for i, g in free) or "none")
                     + f" ({sum(g for _, g in free)} in all). Backfill now walks the pending jobs in priority "
                     "order, planning each with its --time (not its real run time), and reserves whole nodes "
                     "for a job it cannot start.")
    for j in order:
        name = j["name"]
        if name not in pol.seen:
            continue
        now_plan, alone, reserved = pol.seen[name]
        res = pol.reservations.get(name)
        if name in started:
            backfilled.append(name)
            steps.append(f"Backfill: {name} fits in the free GPUs now and its window [0s, "
                         f"{format_duration(j['time_limit'])}] touches no reservation: started at t=0 on "
                         f"{nodes_text(state.cluster.alloc[name])} (BACKFILL).")
            continue
        if now_plan is None and alone is not None:
            clash = [f"{other} on {nodes_text(nodes)} from t={format_duration(s)}"
                     for other, (s, e, nodes) in pol.reservations.items()
                     if other != name and s <= j["time_limit"] and any(i for i, _ in alone if i in nodes)]
            # (closed at its end, as Slurm's backfill: a reservation that begins as it would end counts)
            what = (f"it would fit in the free GPUs now, but running [0s, {format_duration(j['time_limit'])}] "
                    "would delay a reservation" + (f" ({'; '.join(clash)})" if clash else ""))
        else:
            what = "not enough GPUs are free now"
        tail = (f"; backfill reserves {nodes_text(res[2])} for it from t={format_duration(res[0])} to "
                f"t={format_duration(res[1])}" if res else "; no reservation is made for it"
                + (" (bf_job_part_count_reserve reached)" if data.get("options") else ""))
        steps.append(f"Backfill: {name}: {what}{tail}. Its reason stays {reasons.get(name)}.")
    result = run(data)
    for e in result.trace:
        if e.time == 0 or e.what.startswith(("submitted", "barrier passed")):
            continue
        if e.what.startswith("bound"):
            job = next(j for j in data["jobs"] if j["name"] == e.job)
            steps.append(f"t={format_duration(e.time)}  {e.job} starts ({job['pods'] * job['gpus_per_pod']} GPUs)")
        elif "released" in e.what:
            job = next(j for j in data["jobs"] if j["name"] == e.job)
            early = job["duration"] < job["time_limit"]
            steps.append(f"t={format_duration(e.time)}  {e.job} ends, frees {job['pods'] * job['gpus_per_pod']} GPUs"
                         + (f" — {format_duration(job['time_limit'] - job['duration'])} before its --time, "
                            "earlier than backfill planned" if early else ""))
        else:
            steps.append(f"t={format_duration(e.time)}  {e.job}: {e.what}")
    jobs = {j.name: {"start_s": j.start, "end_s": j.end, "state": j.state if j.start is not None
                     else f"PENDING ({j.pending_reason})"} for j in result.jobs}
    answer = {"running_after_t0": started, "backfilled": backfilled,
              "pending_reasons_at_t0": reasons or {"-": "none"}, "jobs": jobs}
    return Solution(answer, steps)
