"""Precomputed tables behind the website's kernel-free views (plain data, ready for JSON).

``cost_table()`` prices a gang wait with :func:`courselib.model.cost.gang_wait_cost` for every
setting of the calculator's three controls; ``gang_race_table()`` runs
:func:`courselib.sim.gang.simulate` on the seed's race (two 512-GPU jobs, see
``examples/workloads/seed-600-free-deadlock.yaml``) for every policy, cluster size and arrival gap
the race view offers, keeping what the page draws, and the run's steps (:func:`courselib.sim.steps.gang_steps`:
the state after each event and its one-line story) so the page's stepper needs no kernel. ``topology_table()`` runs every
``examples/topology`` workload under every policy and keeps each event's placements and pending
messages (:func:`courselib.plots.topology.states`) for the topology view.
``barrier_run_table()`` and ``recovery_ladder_table()`` do the same for the barrier playground: the
512-rank run that loses rank 37 (:func:`courselib.sim.barrier.simulate`, stepped by
:func:`courselib.sim.steps.barrier_steps`) and that loss recovered on each rung of the recovery
ladder. All are deterministic: same courselib, same table.
"""
from __future__ import annotations

from courselib.model import cost, recovery
from courselib.model.generate import default_workload
from courselib.plots.barrier import COLOURS as BARRIER_COLOURS
from courselib.plots.barrier import LABELS as BARRIER_LABELS
from courselib.plots.gang import segments, usage
from courselib.plots.topology import EXAMPLES, POLICIES, example, states
from courselib.sim import barrier
from courselib.sim.steps import barrier_steps, gang_steps, rank_states

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
                      policy, horizon=RACE_HORIZON_S, binds=True)
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


# The barrier playground's runs (notebooks/barrier-playground.ipynb): 512 ranks, rank 37 hung at 3 h
# (a checkpoint every hour, PyTorch's 10-minute NCCL timeout, a 5-minute restart); and for the ladder,
# rank 37 of 512 lost at 3.5 h with an error the transport reports, its node busy for 10 minutes.
BARRIER_RUN = barrier.BarrierScenario(ranks=512, losses=(barrier.RankLoss(37, 3 * 3600),),
                                      checkpoint_every_s=3600, timeout_s=600, restart_s=300)
BARRIER_RUN_TITLE = "512 ranks, rank 37 lost at 3 h"


def ladder_scenario(rung: str) -> barrier.BarrierScenario:
    """The ladder's loss recovered on ``rung`` (one of ``courselib.model.recovery.RUNGS``)."""
    return barrier.BarrierScenario(ranks=512, losses=(barrier.RankLoss(37, 3.5 * 3600, "error"),),
                                   recovery=rung, ladder={"replacement_wait_s": 600})


def barrier_step_row(step) -> dict:
    """One state of a barrier stepper: its time, its line, and the ranks in each state (``barrier.STATES`` order)."""
    return {"t": step.t, "text": step.text, "states": [step.states[s] for s in barrier.STATES]}


def barrier_case(result, title: str) -> dict:
    """What the barrier view draws for one run: ranks per state over time, and the run's steps."""
    times = sorted({t for rows in result.segments.values() for seg in rows for t in seg[:2]}
                   | {0.0, result.ended_at_s})
    times = [t for t in times if t < result.ended_at_s] + [result.ended_at_s]
    counts = [[rank_states(result, t)[s] for s in barrier.STATES] for t in times]
    summary = (f"{title}: " + (f"finished at {result.finished_at_s / 3600:.2f} h" if result.finished
                               else "never finished")
               + f"; {result.restarts} restart{'s' if result.restarts != 1 else ''}, "
               f"{result.lost_gpu_hours:.2f} GPU-hours lost.")
    return {"title": title, "summary": summary, "ranks": result.scenario.ranks, "end": result.ended_at_s,
            "usage": {"t": times, "counts": counts},
            "steps": [barrier_step_row(s) for s in barrier_steps(result)]}


def _barrier_table(cases: dict, default: str) -> dict:
    hours = max(c["end"] for c in cases.values()) / 3600
    return {"states": list(barrier.STATES), "labels": [BARRIER_LABELS[s] for s in barrier.STATES],
            "colours": [BARRIER_COLOURS[s] for s in barrier.STATES], "choices": list(cases),
            "default": default, "horizon": float(-(-hours // 1)) * 3600, "cases": cases}


def barrier_run_table() -> dict:
    """The barrier playground's 512-rank run, stepped (one case, ``cases["run"]``)."""
    return _barrier_table({"run": barrier_case(barrier.simulate(BARRIER_RUN), BARRIER_RUN_TITLE)}, "run")


def recovery_ladder_table() -> dict:
    """The ladder's loss recovered on each rung, stepped: ``cases[rung]``."""
    return _barrier_table({r: barrier_case(barrier.simulate(ladder_scenario(r)), f"{r}: rank 37 of 512 lost at 3.5 h")
                           for r in recovery.RUNGS}, recovery.RUNGS[0])


# The topology view: every examples/topology workload under every policy, each run's state at each of
# its events (courselib.plots.topology.states: who is on which node, who waits and why).
TOPOLOGY_DEFAULT = {"workload": "fragmentation", "step": 1}     # the first moment after t = 0: who waits?


def topology_case(name: str) -> dict:
    """One workload: its tree, its jobs, and per policy the states the page steps through."""
    w = example(name)
    runs = {p: states(w, p) for p in POLICIES}
    return {
        "nodes": w.cluster.nodes, "gpus_per_node": w.cluster.gpus_per_node,
        "levels": [[level, size] for level, size in w.cluster.topology],
        "jobs": [j.name for j in w.jobs],
        "steps": [{"t": t, "text": f"event at t = {t / 60:g} min" if t < 3600 else f"event at t = {t / 3600:g} h"}
                  for t in sorted({s.t for run in runs.values() for s in run})],
        "runs": {p: [{"t": s.t, "text": s.text, "nodes": [[[job, gpus] for job, gpus in on] for on in s.nodes],
                      "waiting": [[job, why] for job, why in s.waiting]} for s in run]
                 for p, run in runs.items()},
    }


def topology_table() -> dict:
    """Every topology workload of the course: ``cases[name]`` (see :func:`topology_case`)."""
    return {"examples": list(EXAMPLES), "policies": list(POLICIES), "default": TOPOLOGY_DEFAULT,
            "cases": {name: topology_case(name) for name in EXAMPLES}}
