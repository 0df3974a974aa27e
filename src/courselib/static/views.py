"""Precomputed tables behind the website's kernel-free views (plain data, ready for JSON).

``cost_table()`` prices a gang wait with :func:`courselib.model.cost.gang_wait_cost` for every
setting of the calculator's three controls; ``gang_race_table()`` runs
:func:`courselib.sim.gang.simulate` on the seed's race (two 512-GPU jobs, see
``examples/workloads/seed-600-free-deadlock.yaml``) for every policy, cluster size and arrival gap
the race view offers, keeping what the page draws, and the run's steps (:func:`courselib.sim.steps.gang_steps`:
the state after each event and its one-line story) so the page's stepper needs no kernel. Both are
deterministic: same courselib, same table.
"""
from __future__ import annotations

from courselib.model import cost
from courselib.model.generate import default_workload
from courselib.plots.gang import segments, usage
from courselib.sim.steps import gang_steps

# The calculator's controls. Every preset case of the course lies on the grid: the seed (400 GPUs
# held, 25 min, $2-4) and the exercise (480, 40 min, $3).
COST_GPUS = list(range(16, 1024 + 1, 16))
COST_WAIT_MIN = list(range(5, 120 + 1, 5))
COST_PRICES = ["1", "1.5", "2", "2.5", "3", "3.5", "4", "5", "6", "8", "2-4"]
COST_DEFAULT = {"gpus": 400, "wait_min": 25, "price": "2-4"}

# The race's controls: the scheduler, the cluster (75 nodes x 8 GPUs = the seed's 600 free GPUs)
# and how long after job a the job b arrives.
RACE_POLICIES = ["kube-default", "volcano", "kueue", "slurm"]
RACE_NODES = [64, 70, 75, 80, 90, 100, 110, 120, 128, 140]
RACE_DELAY_MIN = [0, 10, 30]
RACE_GPUS_PER_NODE = 8
RACE_HORIZON_S = 6 * 3600.0
RACE_DEFAULT = {"policy": "kube-default", "nodes": 75, "delay_min": 0}


def _r(value):
    if isinstance(value, list):
        return [round(v, 2) for v in value]
    return round(value, 2)


def cost_case(gpus: int, wait_min: int, price: str) -> dict:
    """One setting of the calculator, priced by courselib (rounded to cents for display)."""
    c = cost.gang_wait_cost(cost.GangWait(gpus_held=gpus, wait_s=wait_min * 60.0, price=cost.Price.parse(price)))
    return {"gpu_hours": _r(c.wasted_gpu_hours), "cost": _r(c.cost_usd),
            "gang_gpu_hours": _r(c.gang_wasted_gpu_hours), "gang_cost": _r(c.gang_cost_usd)}


def cost_table() -> dict:
    """Every setting of the calculator: ``cost[i][j][k]`` for ``gpus[i]``, ``wait_min[j]``, ``prices[k]``."""
    fields = ("gpu_hours", "cost", "gang_gpu_hours", "gang_cost")
    grid = {f: [] for f in fields}
    for g in COST_GPUS:
        rows = {f: [] for f in fields}
        for w in COST_WAIT_MIN:
            cases = [cost_case(g, w, p) for p in COST_PRICES]
            rows["gpu_hours"].append(cases[0]["gpu_hours"])
            rows["gang_gpu_hours"].append(cases[0]["gang_gpu_hours"])
            rows["cost"].append([c["cost"] for c in cases])
            rows["gang_cost"].append([c["gang_cost"] for c in cases])
        for f in fields:
            grid[f].append(rows[f])
    return {"gpus": COST_GPUS, "wait_min": COST_WAIT_MIN, "prices": COST_PRICES,
            "default": COST_DEFAULT, **grid}


def race_case(policy: str, nodes: int, delay_min: int) -> dict:
    """The seed's race on ``nodes`` x 8 GPUs under ``policy``, job b ``delay_min`` after job a."""
    from courselib.sim.gang import simulate

    result = simulate(default_workload(nodes=nodes, gpus_per_node=RACE_GPUS_PER_NODE, minutes_b=delay_min),
                      policy, horizon=RACE_HORIZON_S)
    times, train, idle, free = usage(result)
    return {
        "deadlock": result.deadlock,
        "verdict": result.verdict,
        "wasted_gpu_hours": _r(result.wasted_gpu_hours),
        "utilisation": round(result.utilisation, 4),
        "end": result.end_time,
        "jobs": [{"name": j.name, "gpus": j.gpus, "state": j.state, "submit": j.submit, "start": j.start,
                  "end": j.end, "held_max": j.gpus_held_max, "wasted_gpu_hours": _r(j.wasted_gpu_hours),
                  "segments": [[t0, t1, held, bool(tr)]
                               for t0, t1, held, tr in segments(result.histories[j.name], result.end_time)]}
                 for j in result.jobs],
        "usage": {"t": times, "training": train, "idle": idle, "free": free},
        "steps": [step_row(s) for s in gang_steps(result)],
    }


def step_row(step) -> dict:
    """One state of the page's stepper: its time, its line, and per job (in the jobs' order) GPUs held and training."""
    return {"t": step.t, "text": step.text, "held": list(step.held.values()),
            "training": list(step.training.values())}


def gang_race_table() -> dict:
    """Every setting of the race: ``cases["policy|nodes|delay"]``."""
    cases = {f"{p}|{n}|{d}": race_case(p, n, d)
             for p in RACE_POLICIES for n in RACE_NODES for d in RACE_DELAY_MIN}
    return {"policies": RACE_POLICIES, "nodes": RACE_NODES, "gpus_per_node": RACE_GPUS_PER_NODE,
            "delay_min": RACE_DELAY_MIN, "horizon": RACE_HORIZON_S, "default": RACE_DEFAULT, "cases": cases}
