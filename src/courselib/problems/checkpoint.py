"""Checkpoint problems: Young's and Daly's intervals, the time they waste, and the trap of the job's MTBF.

The solver uses :mod:`courselib.model.checkpoint` (Young 1974 ``sqrt(2CM)``; Daly 2006 eq. 37; the
first-order waste ``C/T + T/(2M) + R/M``, book/references.bib: young-1974, daly-2006) and :func:`courselib.model.cost.job_mtbf`
(a job fails when any of its n parts fails: ``M_job = M_part / n``, [derived]). Difficulty:
*easy* gives the job's MTBF and C in seconds and asks for Young's interval and its waste;
*medium* gives a per-GPU or per-node MTBF in days or years (divide by the number of parts — nodes,
not GPUs, when the MTBF is per node), C and R in minutes, and asks for Daly's interval too; *hard*
adds the team's current interval, the GPU-hours and dollars a day it costs against Daly's, and
sometimes a regime where the first-order model breaks (C close to M: Daly's τ = M, waste clamped at 1).
"""
from __future__ import annotations

from courselib.model import checkpoint as ckpt
from courselib.model import cost
from courselib.problems.base import Problem, Solution, rng
from courselib.units import format_duration

TOPIC = "checkpoint"
SUMMARY = "Young/Daly checkpoint interval and the time it wastes (the job's MTBF is the part's MTBF / n)"

DAY = 86400.0
YEAR = 365 * DAY


def _draw(r, difficulty: str) -> dict:
    if difficulty == "easy":
        return {"cost": {"value": r.randint(2, 60) * 5, "unit": "s"},
                "mtbf": {"of": "job", "value": r.randint(2, 48), "unit": "h"}}
    gpus = r.choice([256, 512, 1024, 2048, 4096, 8192])
    per = r.choice(["GPU", "node"])
    if per == "GPU":
        mtbf = {"of": "GPU", "value": r.choice([2, 3, 5, 8, 10]), "unit": "years"}
    else:
        mtbf = {"of": "node", "value": r.choice([100, 200, 365, 500, 730]), "unit": "days"}
    data = {"gpus": gpus, "gpus_per_node": 8, "mtbf": mtbf,
            "cost": {"value": r.randint(1, 15), "unit": "min"},
            "restart": {"value": r.randint(2, 20), "unit": "min"}}
    if difficulty == "hard":
        data["current_interval"] = {"value": r.choice([1, 2, 3, 4, 6, 8, 12]), "unit": "h"}
        data["price_usd"] = r.choice([2.0, 2.5, 3.0, 4.0])
        if r.random() < 0.2:  # the first-order model's edge: checkpoints nearly as slow as failures come
            data["gpus"] = r.choice([16384, 32768])
            data["cost"] = {"value": r.randint(20, 45), "unit": "min"}
            data["mtbf"] = {"of": "node", "value": r.choice([20, 30, 50]), "unit": "days"}
    return data


UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0, "days": DAY, "years": YEAR}


def seconds(q: dict) -> float:
    return q["value"] * UNITS[q["unit"]]


def parts(data: dict) -> int:
    """How many independent parts can fail the job: GPUs or nodes, as the MTBF is stated."""
    of = data["mtbf"]["of"]
    if of == "job":
        return 1
    return data["gpus"] if of == "GPU" else data["gpus"] // data["gpus_per_node"]


def _q(q: dict) -> str:
    unit = q["unit"] if q["value"] != 1 else q["unit"].rstrip("s") if q["unit"] in ("days", "years") else q["unit"]
    return f"{q['value']:g} {unit}"


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    data = _draw(r, difficulty)
    m = data["mtbf"]
    if m["of"] == "job":
        lines = [f"A training job fails on average once every {_q(m)} (its MTBF). Writing one checkpoint "
                 f"takes {_q(data['cost'])}; assume restarting is instant."]
        q = "What checkpoint interval does Young's formula give, and what fraction of the time is wasted at it?"
    else:
        lines = [f"A training job runs on {data['gpus']} GPUs ({data['gpus_per_node']} per node). Each {m['of']} fails "
                 f"independently, on average once every {_q(m)}. Writing one checkpoint takes {_q(data['cost'])}; "
                 f"after a failure, restarting takes {_q(data['restart'])}."]
        q = ("What is the job's MTBF? What checkpoint interval do Young's and Daly's formulas give, and what "
             "fraction of the time is wasted at Daly's interval (checkpoints, lost work and restarts)?")
        if "current_interval" in data:
            lines.append(f"Today the team checkpoints every {_q(data['current_interval'])}; a GPU-hour costs "
                         f"${data['price_usd']:g}.")
            q += (" How much time would switching from the current interval to Daly's save, in GPU-hours and "
                  "dollars per day?")
    lines += ["", "Question: " + q]
    return Problem(TOPIC, seed, difficulty, "\n".join(lines), data, q)


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def solve(problem: Problem) -> Solution:
    data = problem.data
    c_s = seconds(data["cost"])
    m = data["mtbf"]
    steps = []
    if m["of"] == "job":
        mtbf = seconds(m)
        r_s = 0.0
        steps.append(f"Units first, seconds: C = {c_s:g} s; M = {_q(m)} = {mtbf:,.0f} s.")
    else:
        n = parts(data)
        part = seconds(m)
        mtbf = cost.job_mtbf(part, n)
        r_s = seconds(data["restart"])
        what = (f"{data['gpus']} GPUs" if m["of"] == "GPU"
                else f"{data['gpus']} / {data['gpus_per_node']} = {n} nodes (the MTBF is per node, so count nodes, not GPUs)")
        steps.append(f"The job stops when any one of its parts fails: {what}. Failure rates add, so "
                     f"M_job = M_{m['of']} / n = {_q(m)} / {n} = {part:,.0f} s / {n} = {mtbf:,.1f} s = "
                     f"{format_duration(mtbf)} ({mtbf / 3600:.2f} h).")
        steps.append(f"C = {_q(data['cost'])} = {c_s:g} s; R = {_q(data['restart'])} = {r_s:g} s.")
    plan = ckpt.checkpoint_plan(c_s, mtbf, r_s)
    steps.append(f"Young: T = sqrt(2 C M) = sqrt(2 x {c_s:g} x {mtbf:,.1f}) = {plan.young_s:,.1f} s = "
                 f"{format_duration(plan.young_s)}.")
    answer = {}
    if m["of"] != "job":
        answer["job_mtbf_s"] = round(mtbf, 1)
    answer["young_interval_s"] = round(plan.young_s, 1)
    if m["of"] == "job":
        w = ckpt.waste_fraction(plan.young_s, c_s, mtbf)
        steps.append(f"Waste at Young's T: C/T + T/(2M) = {c_s:g}/{plan.young_s:,.1f} + {plan.young_s:,.1f}/"
                     f"(2 x {mtbf:g}) = {w:.4f} = {_pct(w)} (at the optimum this is sqrt(2C/M)).")
        answer["waste_at_young"] = round(w, 4)
        return Solution(answer, steps)
    if c_s >= 2 * mtbf:
        steps.append(f"Daly: C = {c_s:g} s >= 2M = {2 * mtbf:,.1f} s, so Daly's formula gives tau = M = "
                     f"{format_duration(plan.daly_s)}.")
    else:
        f = c_s / (2 * mtbf)
        steps.append(f"Daly: tau = sqrt(2CM) [1 + sqrt(C/2M)/3 + (C/2M)/9] - C with C/2M = {f:.5f}: "
                     f"{plan.young_s:,.1f} x {1 + f ** 0.5 / 3 + f / 9:.5f} - {c_s:g} = {plan.daly_s:,.1f} s = "
                     f"{format_duration(plan.daly_s)}.")
    raw = ckpt.first_order_waste(plan.daly_s, c_s, mtbf, r_s)
    steps.append(f"Waste at Daly's interval: C/T + T/(2M) + R/M = {c_s:g}/{plan.daly_s:,.1f} + {plan.daly_s:,.1f}/"
                 f"(2 x {mtbf:,.1f}) + {r_s:g}/{mtbf:,.1f} = {raw:.4f}"
                 + (f" > 1: the first-order model has left its range — the job makes essentially no progress; "
                    "clamp to 1 (100%)." if plan.clamped else f" = {_pct(raw)} of the machine time."))
    answer["daly_interval_s"] = round(plan.daly_s, 1)
    answer["waste_at_daly"] = round(plan.waste_fraction, 4)
    if "current_interval" in data:
        cur = seconds(data["current_interval"])
        w_cur = ckpt.waste_fraction(cur, c_s, mtbf, r_s)
        steps.append(f"Waste at today's {_q(data['current_interval'])}: {c_s:g}/{cur:g} + {cur:g}/(2 x {mtbf:,.1f}) + "
                     f"{r_s:g}/{mtbf:,.1f} = {ckpt.first_order_waste(cur, c_s, mtbf, r_s):.4f}"
                     + (" -> clamped to 1" if w_cur >= 1 else "") + f" = {_pct(w_cur)}.")
        saved = max(0.0, w_cur - plan.waste_fraction)
        gh = saved * data["gpus"] * 24
        steps.append(f"Saved per day: ({_pct(w_cur)} - {_pct(plan.waste_fraction)}) x {data['gpus']} GPUs x 24 h = "
                     f"{gh:,.2f} GPU-h, x ${data['price_usd']:g} = ${gh * data['price_usd']:,.2f} per day"
                     + (" (both waste everything: switching does not help; make checkpoints faster or the job "
                        "smaller)" if saved == 0 and plan.clamped else "") + ".")
        answer.update({"waste_at_current": round(w_cur, 4), "saved_gpu_hours_per_day": round(gh, 2),
                       "saved_usd_per_day": round(gh * data["price_usd"], 2)})
    return Solution(answer, steps)
